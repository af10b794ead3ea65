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
from contextlib import contextmanager
from typing import Any

from xdsl.ir import Block, Operation, Region, SSAValue

from affinec.interpreter.support import InterpreterError, describe
from affinec.ir.affine_exprs import Interval
from affinec.ir.op_table import OpTable

Emitter = Callable[[Operation, "FunctionWriter"], None]

EMITTERS: OpTable[Emitter] = OpTable("interpreter emitter")
"""The emitter of each op kind, registered by the `*_ops` modules with `@emits`."""

emits = EMITTERS.register


def emitter_for(op: Operation) -> Emitter:
    emitter = EMITTERS.lookup(op)
    if emitter is None:
        raise InterpreterError(f"the interpreter does not implement {describe(op)}")
    return emitter


class ProgramWriter:
    """The Python module being written: one function per IR function, and the
    namespace of constants and helpers they share."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {}
        self.sources: list[str] = []
        self._counter = itertools.count()

    def global_name(self, obj: Any, hint: str) -> str:
        """Put `obj` in the namespace and return the name the code can use."""
        name = f"{_identifier(hint).upper()}_{next(self._counter)}"
        self.namespace[name] = obj
        return name

    def add_source(self, source: str) -> None:
        self.sources.append(source)

    def build(self) -> dict[str, Any]:
        """Compile every function written so far into the namespace."""
        source = "\n\n".join(self.sources)
        code = compile(source, "<affinec interpreter>", "exec")
        exec(code, self.namespace)
        return self.namespace

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
        self._used: set[str] = set()
        self.ranges: dict[SSAValue, Interval] = {}
        """Known value ranges of index values (from loop bounds), to elide checks."""
        self.generator = False
        """Set by an emitter that yields (a barrier): the function is a coroutine."""
        self.gpu_context: str | None = None
        """In a kernel (one GPU thread's function): the name of the thread's context."""
        self.symbols: dict[str, str] = {}
        """Module-level symbols (shared globals) by name: the locals holding them."""

    # -- text ---------------------------------------------------------------------------

    def line(self, text: str) -> None:
        self.lines.append("    " * self._indent + text)

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
        for k in itertools.count():
            name = f"{base}_{k}"
            if name not in self._used:
                self._used.add(name)
                return name
        raise AssertionError

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
        emitter_for(op)(op, self)

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
            raise InterpreterError(
                f"{describe(region.parent_op())} must have a single-block region"  # pyright: ignore
            )
        return region.block


def _is_terminator(op: Operation) -> bool:
    from xdsl.traits import IsTerminator

    return op.has_trait(IsTerminator, value_if_unregistered=False)


def _identifier(hint: str) -> str:
    name = re.sub(r"\W", "_", hint)
    return name if name and not name[0].isdigit() else f"v{name}"
