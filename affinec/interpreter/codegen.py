"""Decode each function once into Python source, then run that.

xDSL's interpreter dispatches on every op it executes, about 10k multiply-adds a
second on a convolution. Here every op is visited once, by an emitter that writes the
Python statement doing its work: an `affine.for` becomes a `for` over a `range`, an
`affine.load` an indexing of a numpy array behind a bounds check, an `arith.addf` a `+`
of two numpy float32 scalars (which rounds like the GPU). The text is compiled with
`compile` and runs at the speed of plain Python.

Emitters are registered per op class with `@emits(OpClass)`; each receives the op and
the `FunctionWriter` and writes lines. Ops with regions emit their blocks through
`writer.emit_block`, which hands back the terminator for the op to handle.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from xdsl.ir import Block, Operation, Region, SSAValue

from affinec.interpreter.support import InterpreterError, StepBudget, errors_at
from affinec.ir.affine_exprs import Interval
from affinec.ir.op_table import OpTable

Emitter = Callable[[Operation, "FunctionWriter"], None]

EMITTERS: OpTable[Emitter] = OpTable("interpreter emitter")
"""The emitter of each op kind, registered by the `*_ops` modules with `@emits`."""

emits = EMITTERS.register


def emitter_for(op: Operation) -> Emitter:
    emitter = EMITTERS.lookup(op)
    if emitter is None:
        raise InterpreterError("the interpreter does not implement this op", op)
    return emitter


FILENAME = "<affinec interpreter>"
"""The file name of the generated code, in tracebacks."""


@dataclass(frozen=True)
class Source:
    """One generated function: its text, and the op each line was written for
    (None for lines of no op, such as the `def`)."""

    text: str
    ops: tuple[Operation | None, ...]


class ProgramWriter:
    """The Python module being written: one function per IR function, and the
    namespace of constants and helpers they share."""

    def __init__(
        self, budget: StepBudget, lanes: bool = True, lockstep: bool = True
    ) -> None:
        self.lanes = lanes
        """Whether bands whose bodies allow it run all their iterations at once
        (`affinec.interpreter.lanes`); else iteration by iteration."""
        self.lockstep = lockstep
        """Whether kernels that allow it run a block's threads together
        (`affinec.interpreter.lockstep`); else thread by thread."""
        self.kernel_plans: dict[Operation, Any] = {}
        """Each kernel's lockstep plan (or None), made once."""
        self.namespace: dict[str, Any] = {}
        self.sources: list[str] = []
        self.line_ops: list[Operation | None] = []
        """The op of each line of the program (0-based), to locate run-time errors."""
        self._counter = itertools.count()
        self.budget = budget
        """The steps a run may take; the generated code charges its loops to it."""
        self.budget_name = self.global_name(budget, "budget")
        self.spend = self.global_name(budget.spend, "spend")
        self.tick = self.global_name(budget.tick, "tick")

    def global_name(self, obj: Any, hint: str) -> str:
        """Put `obj` in the namespace and return the name the code can use."""
        name = f"{_identifier(hint).upper()}_{next(self._counter)}"
        self.namespace[name] = obj
        return name

    def add_source(self, source: Source) -> None:
        if self.sources:
            self.line_ops.append(None)  # the blank line `build` puts between
        self.sources.append(source.text)
        self.line_ops += source.ops

    def build(self) -> dict[str, Any]:
        """Compile every function written so far into the namespace."""
        source = "\n\n".join(self.sources)
        try:
            code = compile(source, FILENAME, "exec")
        except (SyntaxError, RecursionError, MemoryError) as e:
            # Python's own limits: 20 nested blocks, the parser's recursion depth.
            raise InterpreterError(
                "the module nests its regions too deeply to be interpreted "
                f"({type(e).__name__}: {e})",
                self.op_at_line(getattr(e, "lineno", None)),
            ) from None
        exec(code, self.namespace)
        return self.namespace

    def op_at_line(self, lineno: int | None) -> Operation | None:
        """The op the program's line `lineno` (1-based) was written for."""
        if lineno is None or not 0 < lineno <= len(self.line_ops):
            return None
        return self.line_ops[lineno - 1]

    def op_at(self, tb: TracebackType | None) -> Operation | None:
        """The op whose generated line raised, innermost first, from a traceback."""
        found = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == FILENAME:
                found = self.op_at_line(tb.tb_lineno) or found
            tb = tb.tb_next
        return found

    @property
    def source(self) -> str:
        return "\n\n".join(self.sources)


class FunctionWriter:
    """Writes the Python function for one IR function, line by line."""

    def __init__(self, program: ProgramWriter) -> None:
        self.program = program
        self.lines: list[str] = []
        self._indent = 1
        self._names: dict[SSAValue, str] = {}
        self._next: dict[str, int] = {}
        """The next number of each name's stem: `v_0`, `v_1`, ... never meet `w_0`,
        nor a stem's names another's (a name is its stem, `_`, its number)."""
        self.ranges: dict[SSAValue, Interval] = {}
        """Known value ranges of index values (from loop bounds), to elide checks."""
        self.generator = False
        """Set by an emitter that yields (a barrier): the function is a coroutine."""
        self.gpu_context: str | None = None
        """In a kernel (one GPU thread's function): the name of the thread's context."""
        self.symbols: dict[str, str] = {}
        """Module-level symbols (shared globals) by name: the locals holding them."""
        self.line_ops: list[Operation | None] = []
        """The op each line was written for (the innermost being emitted)."""
        self._emitting: list[Operation] = []

    # -- text ---------------------------------------------------------------------------

    def line(self, text: str) -> None:
        self.lines.append("    " * self._indent + text)
        self.line_ops.append(self._emitting[-1] if self._emitting else None)

    def function(self, header: str) -> Source:
        """The function written: `header` (its `def` line), then the lines."""
        return Source("\n".join([header, *self.lines]), (None, *self.line_ops))

    def for_range(self, iv: str, bounds: str) -> AbstractContextManager[None]:
        """`for iv in range(bounds):`, the trip count charged to the step budget
        (`bounds`: lower, upper and optionally step, as `range` takes them)."""
        return self.indented(f"for {iv} in {self.program.spend}({bounds}):")

    @contextmanager
    def while_true(self) -> Iterator[None]:
        """`while True:`, each iteration charged to the step budget."""
        with self.indented("while True:"):
            self.tick()
            yield

    def tick(self) -> None:
        """Charge one step (a backward branch) to the step budget."""
        self.line(f"{self.program.tick}()")

    @contextmanager
    def indented(self, header: str) -> Iterator[None]:
        """Write `header` (a compound statement's first line) and indent under it."""
        self.line(header)
        self._indent += 1
        start = len(self.lines)
        yield
        if len(self.lines) == start:
            self.line("pass")
        self._indent -= 1

    # -- names --------------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        """A new local name, never used before in this function."""
        base = _identifier(hint)
        k = self._next.get(base, 0)
        self._next[base] = k + 1
        return f"{base}_{k}"

    def define(self, value: SSAValue) -> str:
        """The local name that will hold `value` (defined by the caller's line)."""
        name = self.fresh(value.name_hint or "v")
        self._names[value] = name
        return name

    def alias(self, value: SSAValue, expr: str) -> None:
        """Let uses of `value` read `expr` directly (a global, another local)."""
        self._names[value] = expr

    def __getitem__(self, value: SSAValue) -> str:
        try:
            return self._names[value]
        except KeyError:
            raise InterpreterError(
                f"value {value.name_hint or value} is used before it is defined"
            ) from None

    def names(self, values: Any) -> list[str]:
        return [self[v] for v in values]

    def global_(self, obj: Any, hint: str = "c") -> str:
        return self.program.global_name(obj, hint)

    def op_ref(self, op: Operation) -> str:
        """A name through which the generated code can mention `op` in errors."""
        return self.global_(op, "op")

    # -- ops ----------------------------------------------------------------------------

    def emit_op(self, op: Operation) -> None:
        """Write `op`'s lines."""
        with self.at(op):
            emitter_for(op)(op, self)

    @contextmanager
    def at(self, op: Operation) -> Iterator[None]:
        """Lines written here are `op`'s (for run-time errors), and so is an error
        raised here without an op (a terminator's, written by its region's op)."""
        self._emitting.append(op)
        try:
            with errors_at(op):
                yield
        finally:
            self._emitting.pop()

    def emit_block(self, block: Block) -> Operation | None:
        """Emit the ops of `block` but its terminator, which is returned."""
        term = block.last_op
        for op in block.ops:
            if op is term and _is_terminator(op):
                return op
            self.emit_op(op)
        return None

    def assign(self, targets: list[str], values: list[str]) -> None:
        """`a, b = x, y`, simultaneously (so swaps through loop-carried values work)."""
        if targets:
            self.line(f"{', '.join(targets)} = {', '.join(values)}")

    def single_block(self, region: Region) -> Block:
        if len(region.blocks) != 1:
            raise InterpreterError(  # pyright: ignore
                "must have a single-block region", region.parent_op()
            )
        return region.block


def _is_terminator(op: Operation) -> bool:
    from xdsl.traits import IsTerminator

    return op.has_trait(IsTerminator, value_if_unregistered=False)


def _identifier(hint: str) -> str:
    name = re.sub(r"\W", "_", hint)
    return name if name and not name[0].isdigit() else f"v{name}"
