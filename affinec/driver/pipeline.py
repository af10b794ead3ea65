"""Pass pipelines: build them in code or from the text `affinec-opt -p` takes, run them
with the verifier after every pass, and optionally prove every pass on the spot.

    from affinec.driver.pipeline import Pipeline
    pipeline = Pipeline.parse("affine-loop-tile{tile-sizes=1,64,16,16},affinec-split")
    pipeline.run(module, check=True)   # interprets after each pass, names the culprit

The text accepts xdsl-opt's flat lists (`a,b{opt=1 2}`) and MLIR's nested form
(`builtin.module(func.func(a),b)`); the nesting only scopes passes in MLIR, and every
affinec pass works on the whole module, so it is flattened. A name in
`affinec.driver.pipeline_names.NAMED_PIPELINES` stands for its whole pipeline.
"""

from __future__ import annotations

import difflib
import gc
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, fields
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError

from affinec.base.diagnostics import (
    PassError,
    not_a_module,
    raised_by_xdsl,
    verify,
    xdsl_failure,
)
from affinec.base.spec import Spec
from affinec.driver.pipeline_names import NAMED_PIPELINES, pipeline_text
from affinec.ir.affine_exprs import semi_affine_op
from affinec.ir.context import dialects_checked_once, make_context


class PipelineError(Exception):
    """A pipeline that cannot be built: an unknown pass, an illegal option, bad text."""


class CheckFailure(Exception):
    """A pass changed what the module computes (found by `Pipeline.run(check=True)`)."""

    def __init__(self, pass_: ModulePass, message: str) -> None:
        super().__init__(f"pass '{pass_}' changed the result: {message}")
        self.pass_ = pass_


def available_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass a pipeline may name: xDSL's, with ours in place of same-named ones."""
    from xdsl.transforms import get_all_passes as xdsl_passes

    from affinec.passes import get_all_passes

    return xdsl_passes() | get_all_passes()


def flatten_nesting(text: str) -> str:
    """`builtin.module(func.func(a{x=1}),b)` -> `a{x=1},b`.

    An op-anchored group is a name containing a dot (or `any`) followed by `(`; its
    parentheses are dropped. Braces (pass options) are copied as they are.
    """
    out: list[str] = []
    depth_braces = 0
    i = 0
    opened: list[bool] = []
    while i < len(text):
        ch = text[i]
        if depth_braces:
            depth_braces += {"{": 1, "}": -1}.get(ch, 0)
            out.append(ch)
        elif ch == "{":
            depth_braces = 1
            out.append(ch)
        elif ch == "(":
            word_start = len(out)
            while word_start > 0 and (
                out[word_start - 1].isalnum() or out[word_start - 1] in "._-"
            ):
                word_start -= 1
            anchor = "".join(out[word_start:])
            if "." in anchor or anchor == "any":
                del out[word_start:]
                opened.append(True)
            else:
                raise PipelineError(
                    f"unexpected '(' after '{anchor}' in pipeline {text!r}"
                )
        elif ch == ")":
            if not opened:
                raise PipelineError(f"unbalanced ')' in pipeline {text!r}")
            opened.pop()
        else:
            out.append(ch)
        i += 1
    if opened or depth_braces:
        raise PipelineError(f"unbalanced brackets in pipeline {text!r}")
    return "".join(out).strip().strip(",")


def _bare_flags_true(spec: ArgSpec, cls: type[ModulePass]) -> ArgSpec:
    """`pass{separate}` as MLIR reads it: a bool option named without a value is
    true (xDSL's parser gives it no value at all)."""
    booleans = {
        f.name.replace("_", "-")
        for f in fields(cls)  # pyright: ignore[reportArgumentType]
        if f.type in (bool, "bool")
    }
    parameters = {
        k: ((True,) if v == () and k in booleans else v)
        for k, v in spec.parameters.items()
    }
    return ArgSpec(spec.name, parameters)


def check_options(spec: ArgSpec, cls: type, kind: str = "pass") -> None:
    """Each option of `spec` one that `cls` (a pass, or a `kind` of its own: an
    `affinec-opt` target) has, with values of its type, or a `PipelineError` in the
    spelling users type (`tile-sizes`, not `tile_sizes`)."""
    options = {
        f.name.replace("_", "-"): f.type
        for f in fields(cls)  # pyright: ignore[reportArgumentType]
        if not f.name.startswith("_")
    }
    for key, values in spec.parameters.items():
        name = key.replace("_", "-")
        if name not in options:
            close = difflib.get_close_matches(name, list(options), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            listed = ", ".join(options) or "none"
            raise PipelineError(
                f"{kind} '{spec.name}' has no option '{name}'{hint} (its options: "
                f"{listed})"
            )
        annotation = str(options[name])
        given = ",".join(map(str, values)) if values else "nothing"
        if annotation in ("bool", "<class 'bool'>"):
            wanted, ok = (
                "true or false",
                len(values) == 1 and isinstance(values[0], bool),
            )
        elif annotation in ("int", "<class 'int'>"):
            wanted = "an integer"
            ok = len(values) == 1 and type(values[0]) is int
        elif "tuple[int" in annotation:
            wanted = "integers separated by commas"
            ok = all(type(v) is int for v in values)
        elif annotation in ("str", "<class 'str'>"):
            wanted, ok = "a string", len(values) == 1 and isinstance(values[0], str)
        else:
            continue
        if not ok:
            raise PipelineError(
                f"{kind} '{spec.name}': option '{name}' takes {wanted}, got '{given}'"
            )


@dataclass
class Pipeline:
    """An ordered list of configured passes."""

    passes: list[ModulePass] = field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.passes, str):
            raise TypeError(
                "Pipeline takes a list of passes: Pipeline.parse(text) reads a "
                f"pipeline's text ({self.passes!r})"
            )
        try:
            self.passes = list(self.passes)
        except TypeError:
            raise TypeError(
                f"Pipeline takes a list of passes, got {type(self.passes).__name__}"
            ) from None
        for k, p in enumerate(self.passes):
            if not isinstance(p, ModulePass):
                raise TypeError(
                    f"pass #{k} of the pipeline is not a pass: a {type(p).__name__}"
                )

    @staticmethod
    def parse(text: str, spec: Spec | None = None, splits: int = 1) -> Pipeline:
        """The pipeline `text` describes, its named pipelines built for a module of
        `spec` (`affinec-default` configures itself from it) whose reduction is
        split in `splits` (or by an `affinec-split-reduction` before them); a
        `PipelineError` naming what is wrong."""
        flat = flatten_nesting(text.strip())
        if not flat:
            return Pipeline([])
        try:
            args = list(parse_pipeline(flat))
        except ArgSpecParseError as e:
            raise PipelineError(f"malformed pipeline {text!r}: {e}") from None
        registry = available_passes()
        passes: list[ModulePass] = []
        for arg in args:
            if arg.name in NAMED_PIPELINES:
                if arg.parameters:
                    raise PipelineError(f"named pipeline '{arg.name}' takes no options")
                # the recipes load here: `-p some-pass` loads that pass alone
                from affinec.driver.pipelines import named_passes

                passes += named_passes(arg.name, spec, splits)
                continue
            if arg.name not in registry:
                close = difflib.get_close_matches(
                    arg.name, [*registry, *NAMED_PIPELINES], n=1
                )
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise PipelineError(
                    f"unknown pass '{arg.name}'{hint}; `affinec-opt --list-passes` "
                    "lists them"
                )
            cls = registry[arg.name]()
            arg = _bare_flags_true(arg, cls)
            check_options(arg, cls)
            try:
                passes.append(cls.from_pass_spec(arg))
            except (ValueError, TypeError) as e:
                raise PipelineError(f"pass '{arg.name}': {e}") from None
            splits = getattr(passes[-1], "splits", splits)
        return Pipeline(passes)

    def __str__(self) -> str:
        return pipeline_text(self.passes)

    @staticmethod
    def for_module(text: str, module: ModuleOp) -> Pipeline:
        """`parse(text)` for `module`: a named pipeline built from its spec reads
        the `affinec.spec` attribute (a `PipelineError` if it is invalid), or, on a
        module that records none, the spec of its named linalg op (which
        `affinec-lower-linalg` will record)."""
        if not flatten_nesting(text.strip()):
            return Pipeline([])
        # affinec's dialect loads with the first pipeline that reads the module:
        # a command that only parses and prints need not build it
        from affinec.dialects.affinec import SpecAttributeError, read_spec, split_count

        spec = None
        if Pipeline.depends_on_spec(text):
            try:
                spec = read_spec(module, required=False)
            except SpecAttributeError as e:
                raise PipelineError(str(e)) from None
            if spec is None:
                from affinec.transforms.affine.linalg_import import module_spec

                spec = module_spec(module)
        return Pipeline.parse(text, spec, split_count(module))

    @staticmethod
    def depends_on_spec(text: str) -> bool:
        """Whether `text` names a pipeline built from the module's spec (so the
        passes are known only with the module)."""
        flat = flatten_nesting(text.strip())
        try:
            names = [a.name for a in parse_pipeline(flat)] if flat else []
        except ArgSpecParseError:
            return False
        return any(n in NAMED_PIPELINES and NAMED_PIPELINES[n].per_spec for n in names)

    def run(
        self,
        module: ModuleOp,
        *,
        ctx: Context | None = None,
        verify_each: bool = True,
        check: bool = False,
        callback: Callable[[ModulePass, ModuleOp, float], None] | None = None,
        seed: int = 0,
    ) -> ModuleOp:
        """Apply the passes to `module` in place and return it.

        With `verify_each`, the verifier runs after every pass (the first op that
        fails raises `VerificationError`), and so do the GPU passes' checks of
        shared-memory hazards; without, the verifier is the caller's to run and the
        hazards are checked once, by `gpu-kernel-outlining`. With `check`, the module is interpreted on
        random inputs before the first pass and after every pass, and the first pass
        whose result differs raises `CheckFailure` naming it: bit for bit, since
        affinec passes keep the order of summation. A pass that may reorder it (one
        whose `changes_rounding` attribute is true, such as
        `affine-loop-tile{reassociate=true}`) is held instead to the dtype's tolerance
        against the float64 reference, and later passes to its result, bit for bit.
        `callback(pass, module, seconds)` is called after each pass.
        """
        if not isinstance(module, ModuleOp):
            raise not_a_module(module)
        ctx = ctx or make_context()
        checker = None
        if check:
            from affinec.dialects.affinec import SpecAttributeError, read_spec

            try:
                spec = read_spec(module)
            except SpecAttributeError as e:
                raise PipelineError(f"checking needs a spec: {e}") from None
            assert spec is not None
            # the interpreter loads when a run checks: not for every affinec-opt
            from affinec.driver.checking import Checker

            checker = Checker(spec, seed)
            first = checker.check("input", module)
            if not first.ok:
                raise PipelineError(f"the input does not check: {first.message}")
        hazard_scope = nullcontext
        dialect_scope = nullcontext
        if not verify_each:
            # loaded where it is used: not for every affinec-opt run (numpy and
            # ml_dtypes come with it)
            from affinec.transforms.gpu.shared_memory_hazards import (
                hazards_checked_once as hazard_scope,
            )

            # the module's dialects checked once, again after a pass not ours
            dialect_scope = dialects_checked_once
        with collector_paused(), dialect_scope() as forget:
            for p in self.passes:
                if forget is not None and not _is_affinec_pass(p):
                    forget()
                start = time.perf_counter()
                try:
                    with hazard_scope():
                        p.apply(ctx, module)
                except Exception as e:
                    raise pass_failure(p, module, e) from e
                seconds = time.perf_counter() - start
                if verify_each:
                    verify(module)
                if callback is not None:
                    callback(p, module, seconds)
                if checker is not None:
                    result = checker.check_pass(p, module)
                    if not result.ok:
                        raise CheckFailure(p, result.message)
        return module


def _is_affinec_pass(p: ModulePass) -> bool:
    """Whether `p` is one of affinec's passes (which build affinec's ops only)."""
    return type(p).__module__.startswith("affinec.")


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused within (and left as it was found).

    A pass builds thousands of ops that all live until it ends, and every pass of
    the collector over its youngest generation walks them again (and a full one the
    whole heap): about 5 % of a compile. The cycles a pipeline leaves behind are
    few (some 20 thousand objects a compile, a megabyte or two), and are collected
    after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def pass_failure(p: ModulePass, module: ModuleOp, error: Exception) -> Exception:
    """What to raise for `error` from running `p`: a `PassError` when xDSL raised it
    (building a map it cannot, such as a semi-affine one, located at the first op
    that has one), else `error` itself (a diagnostic, or affinec's own bug)."""
    if isinstance(error, DiagnosticException | ParseError) or not raised_by_xdsl(error):
        return error
    op = semi_affine_op(module) if isinstance(error, NotImplementedError) else None
    if op is not None:
        return PassError(
            op, f"{p.name} cannot take a semi-affine map ({xdsl_failure(error)})"
        )
    return PassError(None, f"{p.name} failed inside xDSL: {xdsl_failure(error)}")


def print_ir_after_each(
    stream: IO[str] | None = None,
) -> Callable[[ModulePass, ModuleOp, float], None]:
    """A `Pipeline.run` callback that prints the IR after every pass, headed as
    `mlir-opt --mlir-print-ir-after-all` heads it."""

    def callback(p: ModulePass, module: ModuleOp, seconds: float) -> None:
        out = stream or sys.stdout
        print(f"// -----// IR Dump After {p.name} //----- //", file=out)
        print(module, file=out)
        print(file=out)

    return callback


def run_pipeline(
    module: ModuleOp, passes: str | Sequence[ModulePass], **kwargs
) -> ModuleOp:
    """`Pipeline.parse(passes, the module's spec).run(module, ...)`, also taking a
    list of passes."""
    if not isinstance(passes, str):
        return Pipeline(list(passes)).run(module, **kwargs)
    return Pipeline.for_module(passes, module).run(module, **kwargs)
