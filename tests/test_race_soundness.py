"""The static shared-memory check is sound against the interpreter, the oracle.

Specs of every kind (grouped, depthwise, strided, dilated, a dynamic batch, every
epilogue and dtype, the tensor-core route) go through the default pipeline with its
barrier and pipelining passes (`affinec-insert-barriers`,
`affine-pipeline-data-transfer`) kept, left out or moved, cut after a pass where
the block's threads exist; some of the kernels then lose barriers or waits, or
have their waits loosened. For each, either the static check refuses the kernel
(a pass's own check, or `check_shared_memory_hazards` on what the passes left), or
the interpreter runs it on random inputs without finding a data race. The default
pipeline, unchanged, is never refused by the check (its precision).

Hopper's route (`affinec-wgmma-gemm`: TMA, mbarrier phases, `wgmma`) is not drawn:
one pass writes its whole kernel, with no barrier or wait pass to leave out, and
the check has no rules for its synchronization (it refuses such a kernel by name);
the interpreter checks those kernels (`tests/test_hopper_interpreter.py`).

The `ci` profile draws about a hundred cases (ten times its examples for the SIMT
route, twice for the tensor cores), `fuzz` thousands; `AFFINEC_RACE_EXAMPLES` sets
the number of cases each test draws.

    HYPOTHESIS_PROFILE=fuzz AFFINEC_RACE_EXAMPLES=2500 pytest tests/test_race_soundness.py
"""

from __future__ import annotations

import contextlib
import os
import traceback
from dataclasses import dataclass, replace

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import IntegerAttr, i32

from affinec.base.diagnostics import DiagnosticException
from affinec.base.spec import ConvSpec, Spec
from affinec.dialects import gpu, nvgpu
from affinec.driver.checking import Checker
from affinec.driver.config import KernelConfig, config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipeline_names import pipeline_text
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.interpreter import InterpreterError
from affinec.interpreter.shared_memory import DataRaceError
from affinec.passes.affine_pipeline_data_transfer import AffinePipelineDataTransfer
from affinec.transforms.gpu.shared_memory_hazards import check_shared_memory_hazards
from strategies import conv_specs, matmul_specs, mma_cases

MOVABLE = {
    "affinec-insert-barriers": "affinec-place-buffers",
    "affine-pipeline-data-transfer": "affine-data-copy-generate",
}
"""The passes that place barriers and pipeline the copies (and their waits), and
the pass each needs before it (it refuses to run earlier: moved, it goes after)."""

THREADED = ("affinec-mma-sync", "affinec-map-threads")
"""The passes after which a block's threads exist (before them the interpreter runs
a block as one program, which cannot race)."""

CHECKED_UNTIL = "lower-affine"
"""The check covers the levels before this pass (below it, a mechanical lowering of
what it checked)."""


def _examples(per_profile: int) -> settings:
    """`per_profile` times the profile's examples, or `AFFINEC_RACE_EXAMPLES`."""
    count = os.environ.get("AFFINEC_RACE_EXAMPLES")
    base = settings()
    n = int(count) if count else base.max_examples * per_profile
    return settings(base, max_examples=n)


# -- cases ------------------------------------------------------------------------------


@st.composite
def small_specs(draw) -> Spec:
    """Tiny specs of every kind the SIMT route takes, depthwise ones often."""
    kind = draw(st.sampled_from(["conv", "conv", "depthwise", "matmul"]))
    if kind == "matmul":
        return draw(matmul_specs(6))
    spec = draw(conv_specs(max_channels=4, max_image=5, dynamic_batch=True))
    if kind == "depthwise":
        c = draw(st.integers(2, 4))
        spec = ConvSpec(**{**spec.__dict__, "c": c, "k": c, "groups": c})
    return spec


@st.composite
def configs(draw, spec: Spec) -> KernelConfig:
    """`config_for`'s configuration or one of the tuner's, its copies asynchronous
    or not, in one to three stages."""
    from affinec.tuning.problem import NotTunable
    from affinec.tuning.space import search_space

    choices: list[KernelConfig] = []
    with contextlib.suppress(ValueError):
        choices.append(config_for(spec))
    with contextlib.suppress(NotTunable):
        choices += search_space(spec).configs
    assume(choices)
    config = draw(st.sampled_from(choices))
    return replace(config, dma=draw(st.booleans()), stages=draw(st.integers(1, 3)))


@dataclass(frozen=True)
class Case:
    spec: Spec
    passes: list
    stop: int
    """The last pass that runs."""
    default: bool
    """Whether `passes` is the default pipeline, unchanged."""

    def __repr__(self) -> str:
        text = pipeline_text(self.passes[: self.stop + 1])
        return f"Case({self.spec.to_text()!r}, {text!r}, default={self.default})"


@st.composite
def pipelines(draw, spec: Spec, config: KernelConfig) -> Case:
    """The default passes for `config`, the movable ones kept, left out or moved
    (a pipelining pass added where the default has none), and where to stop: after
    a pass where the threads exist."""
    passes = default_passes(config)
    default = True
    names = [p.name for p in passes]
    if "affine-pipeline-data-transfer" not in names and draw(st.booleans()):
        after = names.index("affinec-place-buffers")
        stages = draw(st.integers(2, 3))
        passes.insert(after, AffinePipelineDataTransfer(stages=stages))
        default = False
    for name in MOVABLE:
        found = [p for p in passes if p.name == name]
        if not found:
            continue
        what = draw(st.sampled_from(["keep", "keep", "drop", "move"]))
        if what == "keep":
            continue
        default = False
        passes.remove(found[0])
        if what == "move":
            names = [p.name for p in passes]
            earliest = names.index(MOVABLE[name]) + 1 if MOVABLE[name] in names else 0
            passes.insert(draw(st.integers(earliest, len(passes))), found[0])
    names = [p.name for p in passes]
    first = min((names.index(n) for n in THREADED if n in names), default=0)
    # Mostly within the levels the check covers, sometimes down to the nvvm level.
    checked = names.index(CHECKED_UNTIL) - 1
    last = len(passes) - 1 if draw(st.integers(0, 3)) == 0 else max(first, checked)
    stop = draw(st.integers(first, last))
    return Case(spec, passes, stop, default)


@st.composite
def simt_cases(draw) -> Case:
    spec = draw(small_specs())
    return draw(pipelines(spec, draw(configs(spec))))


@st.composite
def mma_route_cases(draw) -> Case:
    spec, config = draw(mma_cases())
    config = replace(
        config, stages=draw(st.integers(1, 3)), stage_output=draw(st.booleans())
    )
    return draw(pipelines(spec, config))


# -- the property -----------------------------------------------------------------------


def _by_the_check(e: BaseException) -> bool:
    """Whether the static hazard check raised `e`."""
    frames = traceback.extract_tb(e.__traceback__)
    return any(f.filename.endswith("shared_memory_hazards.py") for f in frames)


def _mutate(data, module) -> bool:
    """Erase some barriers and waits, or loosen some waits: whether any changed."""
    changed = False
    every = data.draw(st.booleans(), label="erase every barrier")
    for op in [o for o in module.walk() if isinstance(o, gpu.BarrierOp)]:
        if every or data.draw(st.booleans(), label="erase barrier"):
            op.detach()
            op.erase()
            changed = True
    for op in [o for o in module.walk() if isinstance(o, nvgpu.DeviceAsyncWaitOp)]:
        how = data.draw(st.integers(0, 5), label="wait")
        if how == 0:
            op.detach()
            op.erase()
            changed = True
        elif how == 1:
            op.properties["numGroups"] = IntegerAttr(op.groups + 1, i32)
            changed = True
    return changed


def _holds(case: Case, data) -> None:
    spec, run = case.spec, case.passes[: case.stop + 1]
    last = run[-1].name
    module = build(spec)
    done: list[str] = []
    try:
        Pipeline(run).run(module, callback=lambda p, _m, _s: done.append(p.name))
    except DiagnosticException as e:
        where = run[len(done)].name
        if not _by_the_check(e):
            event(f"refused by {where}: {str(e).split(': ', 2)[-1][:50]}")
            return
        assert not case.default, f"the check refuses the default pipeline: {e}"
        event(f"refused by the check in {where}")
        return
    checked = CHECKED_UNTIL not in [p.name for p in run]
    mutate = checked and data.draw(st.booleans(), label="mutate")
    if mutate and _mutate(data, module):
        try:
            check_shared_memory_hazards(module)
        except DiagnosticException as e:
            assert _by_the_check(e), e
            event("mutated, refused by the check")
            return
        event("mutated, accepted by the check")
    try:
        Checker(spec).run(module)
    except DataRaceError as e:
        raise AssertionError(
            f"the interpreter finds a race the static check accepted: {case!r}\n{e}"
        ) from None
    except InterpreterError as e:
        event(f"the interpreter stops: {type(e).__name__}")
        return
    event(f"accepted, no race, after {last}")


@_examples(10)
@given(simt_cases(), st.data())
def test_simt_kernels_the_check_accepts_do_not_race(case, data):
    _holds(case, data)


@_examples(2)
@given(mma_route_cases(), st.data())
def test_tensor_core_kernels_the_check_accepts_do_not_race(case, data):
    _holds(case, data)
