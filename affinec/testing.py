"""Testing a pass the way affinec tests its own: hypothesis strategies for specs and
configurations, and an equivalence check through the interpreter.

    from hypothesis import given, settings

    from affinec.testing import assert_equivalent, conv_specs


    # deadline=None: an example builds, rewrites and interprets a spec at every
    # pass, about a second, past hypothesis's default deadline of 200 ms
    @settings(deadline=None, max_examples=5)
    @given(conv_specs())
    def test_tiling_keeps_the_result(spec):
        # your pass goes in the list too: ["affinec-tile-split-sink", MyPass()]
        assert_equivalent(["affinec-tile-split-sink"], spec)

`assert_equivalent` builds the naive IR of a spec (or takes a module that records
its spec, as `affinec gen` writes it), runs the passes with the interpreter checking
every one of them on random inputs — bit for bit where a pass keeps the order of
summation, within the dtype's tolerance of float64 where it says it may not
(`changes_rounding`) — and fails naming the first pass that changed the result and
the first element that differs. The strategies draw specs small enough to interpret
in a fraction of a second: every layout, dtype, stride, padding, dilation and
epilogue.

Needs hypothesis: the `testing` extra (`pip install -e '.[testing]'` in affinec's
checkout).
"""

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.extras import missing_extra

try:
    from hypothesis import assume
    from hypothesis import strategies as st
except ModuleNotFoundError as error:
    raise missing_extra(error, "affinec.testing") from None

from affinec.base.spec import (
    ACTIVATIONS,
    DTYPES,
    EPILOGUE_OPERANDS,
    EPILOGUES,
    FILTER_LAYOUTS,
    LAYOUTS,
    ConvSpec,
    MatmulSpec,
    OuterSpec,
    Spec,
    epilogue_text,
)
from affinec.driver.config import KernelConfig, config_for
from affinec.driver.pipeline import CheckFailure, Pipeline
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build

__all__ = [
    "assert_equivalent",
    "epilogues",
    "conv_specs",
    "kernel_configs",
    "matmul_specs",
    "outer_specs",
    "specs",
    "tile_sizes",
]


@st.composite
def epilogues(draw) -> str:
    """An epilogue: one of the named ones, or any steps in their order (scale, bias,
    residual, an activation), as the spec's text writes it."""
    if draw(st.booleans()):
        return draw(st.sampled_from(EPILOGUES))
    steps = [x for x in EPILOGUE_OPERANDS if draw(st.booleans())]
    activation = draw(st.sampled_from((None, *ACTIVATIONS)))
    return epilogue_text((*steps, *([activation] if activation else [])))


@st.composite
def conv_specs(
    draw, max_channels: int = 4, max_image: int = 9, dynamic_batch: bool = False
) -> ConvSpec:
    """Convolutions of every layout, dtype, stride (1-2), padding (0-2), dilation
    (1-2), filter (1-3 × 1-3) and epilogue, small enough to interpret quickly; with
    `dynamic_batch`, of any batch (`batch=dynamic`) too."""
    r = draw(st.integers(1, 3))
    s = draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(1, max_image))
    w = draw(st.integers(1, max_image))
    assume(dilation[0] * (r - 1) + 1 <= h + 2 * padding[0])
    assume(dilation[1] * (s - 1) + 1 <= w + 2 * padding[1])
    c = draw(st.integers(1, max_channels))
    k = draw(st.integers(1, max_channels))
    common = math.gcd(c, k)
    groups = draw(st.sampled_from([g for g in range(1, common + 1) if common % g == 0]))
    return ConvSpec(
        n=draw(st.integers(1, 2)),
        c=c,
        h=h,
        w=w,
        k=k,
        r=r,
        s=s,
        stride=stride,
        padding=padding,
        dilation=dilation,
        layout=draw(st.sampled_from(LAYOUTS)),
        filter_layout=draw(st.sampled_from(FILTER_LAYOUTS)),
        dtype=draw(st.sampled_from(DTYPES)),
        epilogue=draw(epilogues()),
        groups=groups,
        dynamic_batch=draw(st.booleans()) if dynamic_batch else False,
    )


@st.composite
def matmul_specs(draw, max_size: int = 12) -> MatmulSpec:
    return MatmulSpec(
        m=draw(st.integers(1, max_size)),
        n=draw(st.integers(1, max_size)),
        k=draw(st.integers(1, max_size)),
        dtype=draw(st.sampled_from(DTYPES)),
        epilogue=draw(epilogues()),
    )


@st.composite
def outer_specs(draw, max_size: int = 12) -> OuterSpec:
    return OuterSpec(
        m=draw(st.integers(1, max_size)),
        n=draw(st.integers(1, max_size)),
        dtype=draw(st.sampled_from(DTYPES)),
    )


def specs() -> st.SearchStrategy[Spec]:
    """Any spec kind, convolutions most often."""
    return st.one_of(conv_specs(), conv_specs(), matmul_specs(), outer_specs())


@st.composite
def tile_sizes(draw, spec: Spec) -> tuple[int, ...]:
    """A block tile for `spec`: a size between 1 and the extent along each output
    dimension (`affine-loop-tile{tile-sizes=...}`; partial tiles included)."""
    extents = [e for _, e in contraction_of(spec).output_index]
    return tuple(draw(st.integers(1, e)) for e in extents)


@st.composite
def kernel_configs(draw, spec: Spec) -> KernelConfig:
    """A configuration the autotuner would try for `spec` (its search space:
    `config_for`'s choice and the candidates the cost model keeps), any route;
    `config_for`'s for a spec the tuner does not take."""
    from affinec.tuning.problem import NotTunable
    from affinec.tuning.space import search_space

    try:
        return draw(st.sampled_from(search_space(spec).configs))
    except NotTunable:
        return config_for(spec)


def assert_equivalent(
    passes: ModulePass | str | Sequence[ModulePass | str] | Pipeline,
    subject: Spec | ModuleOp,
    *,
    seed: int = 0,
) -> ModuleOp:
    """Run `passes` on `subject` (a spec's naive IR, or a module recording its spec)
    with every pass interpreted against the one before on random inputs from
    `seed`; an `AssertionError` names the first pass that changed the result and
    the first element that differs. Returns the rewritten module."""
    module = build(subject) if not isinstance(subject, ModuleOp) else subject
    pipeline = _pipeline(passes, module)
    try:
        pipeline.run(module, check=True, seed=seed)
    except CheckFailure as e:
        raise AssertionError(str(e)) from None
    return module


def _pipeline(
    passes: ModulePass | str | Sequence[ModulePass | str] | Pipeline, module: ModuleOp
) -> Pipeline:
    if isinstance(passes, Pipeline):
        return passes
    if isinstance(passes, ModulePass | str):
        passes = [passes]
    out: list[ModulePass] = []
    for p in passes:
        out += Pipeline.for_module(p, module).passes if isinstance(p, str) else [p]
    return Pipeline(out)
