"""The numerical checker: is a module, at any level, still the computation its spec
describes?

One `Checker` holds one set of random inputs, drawn from the module's spec
(`affinec.spec`, see `read_spec`), and the float64 reference on them. Each `check`
interprets a module on those inputs and compares its output with the previous
stage's, bit for bit, and with the reference, within the dtype's tolerance:

    checker = Checker(spec, seed=0)
    checker.check("input", module)                    # the first stage
    pipeline_pass.apply(ctx, module)
    result = checker.check("affinec-split", module)   # bit-identical to the input?
    result.ok, result.versus, result.error, result.message

A stage that may change the rounding (a pass whose `changes_rounding` is true,
such as `affine-loop-tile{reassociate=true}`) is held to the tolerance only, and the
stages after it to its output, bit for bit. `Pipeline.run(check=True)`, `affinec
check` and the demo all check with this class.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from affinec.base.diagnostics import OpError
from affinec.base.spec import Spec
from affinec.dialects.affinec import function_named, workspace_types
from affinec.driver.pipeline_names import pass_text
from affinec.frontend.contraction import contraction_of
from affinec.frontend.reference import (
    TOLERANCE,
    host_bytes,
    poisoned_output,
    random_inputs,
    reference,
    relative_error,
)
from affinec.interpreter import Interpreter, InterpreterError
from affinec.interpreter.support import memref_shape, numpy_dtype, poisoned

BIT_IDENTICAL = "bit-identical"
REORDERED = "differs (the pass changes the rounding)"
DIFFERS = "DIFFERS"
FIRST = "-"


@dataclass(frozen=True)
class StageResult:
    """What one stage computed, compared with the reference and the stage before."""

    stage: str
    error: float
    """‖out − ref‖ / ‖ref‖ against the float64 reference (NaN when it did not run)."""
    versus: str
    """Against the previous stage: `-` (first), bit-identical, reordered, DIFFERS."""
    ok: bool
    message: str = ""
    """Why the stage failed, when it did: the first differing element, or the
    interpreter's error."""
    stopped: InterpreterError | None = None
    """The interpreter's error, when it could not run the stage (it knows the op)."""

    def row(self) -> str:
        """The stage's line in a check table."""
        return f"{self.stage:<44} {self.error:>10.2e}  {self.versus}"


def arithmetic_tolerance(dtype: str, passes: Sequence[ModulePass]) -> float:
    """The relative error a kernel made by `passes` from a `dtype` spec is held to:
    the dtype's, or a looser one a pass's arithmetic needs (`tolerance`: tf32)."""
    return max([TOLERANCE[dtype], *(t for p in passes if (t := _pass_tolerance(p)))])


def _pass_tolerance(p: ModulePass) -> float | None:
    return getattr(p, "tolerance", None)


MAX_CHECK_BYTES = 1 << 30
"""The memory a check may hold for its inputs, output and float64 reference."""

MAX_CHECK_POINTS = 1 << 26
"""The work (multiply-adds plus elements of the operands) a check may interpret per
stage: about half a minute of interpretation each."""

STEPS_PER_POINT = 64
"""The steps (loop iterations, simulated threads) one stage may take per point of
its spec's work: far more than any pass needs (partial tiles, idle threads), far
less than a loop that does not end."""

MIN_STEPS = 1_000_000
"""The step budget of a stage of a tiny spec (a second or so of interpretation)."""


class CheckTooLarge(OpError):
    """A spec too large to check by interpretation (said before allocating)."""


def check_limits(spec: Spec) -> int:
    """The step budget of one stage of checking `spec`; `CheckTooLarge` when its
    buffers or its work are over the limits."""
    c = contraction_of(spec)
    operands = c.operands
    elements = sum(math.prod(a.shape) for a in operands)
    size = host_bytes(spec)
    if size > MAX_CHECK_BYTES:
        raise CheckTooLarge(
            None,
            f"checking {spec.to_text()} needs about {size:,} bytes for its inputs, "
            f"output and float64 reference; the limit is {MAX_CHECK_BYTES:,}",
        )
    points = spec.flops // 2 + elements
    if points > MAX_CHECK_POINTS:
        raise CheckTooLarge(
            None,
            f"checking {spec.to_text()} interprets {points:,} multiply-adds and "
            f"elements per stage; the limit is {MAX_CHECK_POINTS:,}",
        )
    return max(MIN_STEPS, STEPS_PER_POINT * points)


class Checker:
    """Interprets each stage of a module on one set of random inputs (see module
    docstring)."""

    def __init__(self, spec: Spec, seed: int = 0) -> None:
        self.spec = spec
        self.max_steps = check_limits(spec)
        self.function = contraction_of(spec).name
        self.inputs = random_inputs(spec, np.random.default_rng(seed))
        self.expected = reference(spec, *self.inputs)
        self.tolerance = TOLERANCE[spec.dtype]
        self.precision = spec.dtype
        """What the tolerance is for: the storage type, or a pass's arithmetic."""
        self.previous: np.ndarray | None = None
        """The output of the last stage that ran."""

    def run(self, module: Operation) -> np.ndarray:
        """The module's output on the checker's inputs (a poisoned buffer first)."""
        out = poisoned_output(self.spec)
        why = f"{STEPS_PER_POINT} per point of the spec's work, at least {MIN_STEPS:,}"
        interpreter = Interpreter(module, self.max_steps, why)  # pyright: ignore
        inputs = [x.copy() for x in self.inputs]
        function = spec_function(module, self.function)
        interpreter.run(function, *inputs, out, *workspaces(module, function))
        return out

    def check_pass(self, p: ModulePass, module: Operation) -> StageResult:
        """`check` the module a pass left, as the pass says: whether it may change
        the rounding (`changes_rounding`), and a looser tolerance its arithmetic
        needs (`tolerance`: tf32 tensor cores), which then holds for every later
        stage."""
        tolerance = _pass_tolerance(p)
        if tolerance is not None and tolerance > self.tolerance:
            self.tolerance = tolerance
            self.precision = getattr(p, "precision", self.precision)
        reorders = getattr(p, "changes_rounding", False)
        return self.check(pass_text(p), module, reorders)

    def check(
        self, stage: str, module: Operation, reorders: bool = False
    ) -> StageResult:
        """Interpret `module` and compare it; `reorders` says the stage may change
        the order of summation (so bit-identity with the previous is not expected)."""
        try:
            got = self.run(module)
        except InterpreterError as e:
            return StageResult(
                stage, float("nan"), DIFFERS, False, f"the interpreter stops: {e}", e
            )
        error = relative_error(got, self.expected)
        within = error <= self.tolerance
        message = ""
        if not within:
            message = (
                f"its relative error against the float64 reference is {error:.3g}, "
                f"over the {self.precision} tolerance {self.tolerance:g}"
            )
        previous, self.previous = self.previous, got
        if previous is None:
            return StageResult(stage, error, FIRST, within, message)
        if np.array_equal(got, previous, equal_nan=True):
            return StageResult(stage, error, BIT_IDENTICAL, within, message)
        if reorders:
            if message:
                message += " (it may change the rounding, so it is held to the "
                message += "tolerance, not bit for bit)"
            return StageResult(stage, error, REORDERED, within, message)
        return StageResult(
            stage, error, DIFFERS, False, _first_difference(got, previous)
        )

    def verdict(self, ok: bool) -> str:
        word = "ok" if ok else "FAILED"
        return f"{word}: every stage within {self.tolerance:g} of float64 ({self.precision})"


def spec_function(module: Operation, name: str) -> str:
    """The name of the function computing the spec: `name` (the frontend's), or the
    module's one host function (`affinec-lower-linalg` keeps the name linalg's
    function had)."""
    if function_named(module, name) is not None:
        return name
    region = module.regions[0] if module.regions else None
    hosts = [
        op.sym_name.data
        for op in (region.block.ops if region is not None and region.blocks else ())
        if isinstance(op, func.FuncOp)
    ]
    return hosts[0] if len(hosts) == 1 else name


def workspaces(module: Operation, function: str) -> list[np.ndarray]:
    """Fresh buffers for the workspace arguments of `@function` (a split reduction's
    partial sums), poisoned: a read of what no kernel wrote shows in the output."""
    fn = function_named(module, function)
    if fn is None:
        return []
    return [
        poisoned(memref_shape(t), numpy_dtype(t.get_element_type()))
        for t in workspace_types(fn)
    ]


def _first_difference(got: np.ndarray, was: np.ndarray) -> str:
    diff = np.abs(got.astype(np.float64) - was.astype(np.float64))
    where = np.unravel_index(
        np.nanargmax(np.where(np.isnan(diff), np.inf, diff)), diff.shape
    )
    count = int(np.sum(~((got == was) | (np.isnan(got) & np.isnan(was)))))
    return (
        f"output{list(map(int, where))} is {got[where]}, was {was[where]} "
        f"({count} of {got.size} elements differ)"
    )
