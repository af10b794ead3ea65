"""Errors that name the op and where it came from, as `file:line:col: error: ...`.

The parser (`affinec.base.locating_parser`) records each op's source position as
its `FileLineColLoc`, so a verifier failure or a pass refusing an op, however late
in a pipeline, points back at the line of the input the op (or its nearest located
ancestor) came from. Passes signal refusal with `PassError(op, reason)`.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    FileLineColLoc,
    ModuleOp,
    UnregisteredOp,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.printer import Printer
from xdsl.traits import SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import (
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)
from xdsl.utils.lexer import Span

from affinec.base import ir_walk, irdl_build, irdl_verify, op_traits
from affinec.base.mlir_wording import (
    UNPREFIXED,
    after_previous_token,
    parser_message,
    redefinitions,
    verifier_message,
)

irdl_verify.install()  # every op's IRDL check through its definition's plan
irdl_build.install()  # and every op built through it
ir_walk.install()  # walks through one generator, not one a level
op_traits.install()  # trait look-ups remembered per op class


class OpError(DiagnosticException):
    """An error about one op (or about the whole input, when `op` is None), which
    `format_exception` locates at the op's source."""

    names_op = True
    """Whether the message reads after `'op.name' op` (False for messages that
    describe the op themselves)."""

    notes: tuple[tuple[Operation, str], ...] = ()
    """MLIR's notes after the error: other ops it involves, and what each is."""

    def __init__(
        self,
        op: Operation | None,
        message: str,
        notes: tuple[tuple[Operation, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.op = op
        self.message = message
        if notes:
            self.notes = notes


class PassError(OpError, PassFailedException):
    """A pass refuses `op`: illegal options, an op it cannot handle, a shape that
    does not fit. Raised before the pass rewrites anything."""


class VerificationError(OpError, VerifyException):
    """The module does not verify; `op` is the first op that fails."""


@dataclass(frozen=True)
class SourceLocation:
    filename: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}"


# -- xDSL's failures as diagnostics ----------------------------------------------------------


def raised_by(error: BaseException, package: str) -> bool:
    """Whether `error` was raised inside `package`: its innermost frame outside
    Python's standard library is there (xDSL's parser raises through `enum` on an
    unknown predicate, llvmlite through `ctypes`)."""
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_globals.get("__name__", ""))
        tb = tb.tb_next
    for module in reversed(frames):
        if module.partition(".")[0] in sys.stdlib_module_names:
            continue
        return module == package or module.startswith(f"{package}.")
    return False


def raised_by_xdsl(error: BaseException) -> bool:
    """Whether `error` was raised inside xDSL (its innermost frame is xDSL's code).

    xDSL signals some input errors with exceptions that are not diagnostics: a
    `NotImplementedError` building a semi-affine map, a bare `Exception` from a
    verifier, a `KeyError` on a block it cannot find, an assertion in a printer.
    Those are the user's errors reported badly, and become located diagnostics; an
    exception raised in affinec's own code is affinec's bug and stays one.
    """
    return raised_by(error, "xdsl")


def is_user_error(error: BaseException) -> bool:
    """An error about the input: a diagnostic, or an xDSL failure on it."""
    return isinstance(error, DiagnosticException | ParseError) or (
        isinstance(error, Exception) and raised_by_xdsl(error)
    )


def xdsl_failure(error: BaseException) -> str:
    """The one-line message of an exception xDSL raised about the input."""
    text = _headline(str(error))
    if isinstance(error, DiagnosticException) or type(error) is Exception:
        return text or type(error).__name__  # a message meant for the user
    if isinstance(error, NotImplementedError):
        return f"not supported: {text}" if text else "not supported by xDSL"
    if isinstance(error, AssertionError):  # its text, when any, is xDSL's internals
        return "xDSL cannot handle this (an assertion failed)"
    what = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return f"xDSL cannot handle this ({what})"


_REMARKS: ContextVar[list[tuple[Operation, str]] | None] = ContextVar(
    "affinec_remarks", default=None
)


def remark(op: Operation, message: str) -> None:
    """Tell the user something a pass chose for them at `op` (a fallback, a knob it
    had to lower): `affinec-opt` and `affinec compile` print it located as
    `file:line:col: remark: ...`, `compile_to_ptx` keeps it in the kernel's
    `remarks`; `--verify-diagnostics` checks `expected-remark`."""
    sink = _REMARKS.get()
    if sink is not None:
        sink.append((op, message))


@contextmanager
def collecting_remarks() -> Iterator[list[tuple[Operation, str]]]:
    """The remarks the passes run inside the `with` make, in order."""
    sink: list[tuple[Operation, str]] = []
    token = _REMARKS.set(sink)
    try:
        yield sink
    finally:
        _REMARKS.reset(token)


def location_of(op: Operation | None) -> SourceLocation | None:
    """The source location of `op`, or of its nearest ancestor that has one."""
    while op is not None:
        loc = op.location
        if isinstance(loc, FileLineColLoc):
            return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
        op = op.parent_op()
    return None


DIALECT_ATTRIBUTE_CHECKS: dict[str, Callable[[Attribute], str | None]] = {}
"""What a dialect's discardable attributes must be, by name (MLIR's
`verifyOperationAttribute`): each check gives its message, or None. The dialects
register theirs (`affinec.dialects.gpu_common`)."""

OP_CHECKS: dict[type[Operation], Callable[[Operation], str | None]] = {}
"""MLIR's checks of ops whose xDSL definitions lack them, by op class: each gives
its message, or None (or raises its own `VerificationError`, to add MLIR's notes).
The dialects register theirs (`affinec.dialects.llvm`)."""

_TERMINATOR = "terminates block in"
"""xDSL's check that the op ending a block is a terminator (its text)."""


_VERIFICATION_MEMO: ContextVar[dict | None] = ContextVar(
    "verification_memo", default=None
)


def verification_memo() -> dict | None:
    """While `verify` runs, a dict in which op verifiers may keep what they learn
    of values for the rest of that verification (the IR does not change while it
    is verified: the answers for the ops that follow hold); None elsewhere, where
    the IR may change between two questions."""
    return _VERIFICATION_MEMO.get()


def verify(module: ModuleOp) -> None:
    """Verify `module`, raising `VerificationError` at the first op that fails (with
    a verifier's `VerifyException`, or any exception xDSL's verifiers raise), or
    that uses a value its definition does not dominate (MLIR checks that; xDSL
    does not, and the passes and the interpreter rely on it)."""
    token = _VERIFICATION_MEMO.set({})
    try:
        _verify_ops(module)
    finally:
        _VERIFICATION_MEMO.reset(token)


def _verify_ops(module: ModuleOp) -> None:
    dominance = _Dominance()
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except OpError as e:
            if e.op is None:
                raise VerificationError(op, e.message) from e
            raise VerificationError(e.op, e.message) from e
        except Exception as e:
            if not is_user_error(e):
                raise
            if _TERMINATOR in str(e):
                # MLIR checks an op before the block it ends: its own error first.
                try:
                    op.verify_()
                except Exception as own:
                    if not is_user_error(own):
                        raise
                    e = own
            message = verifier_message(op, xdsl_failure(e))
            if (twice := redefinitions(op, message)) is not None:
                note = (twice[0], "see existing symbol definition here")
                raise verification_error(twice[1], message, (note,)) from e
            raise verification_error(op, message) from e
        if op.attributes:
            for name, attr in op.attributes.items():
                check = DIALECT_ATTRIBUTE_CHECKS.get(name)
                if check is not None and (message := check(attr)) is not None:
                    raise VerificationError(op, message)
        if _is_symbol(type(op)) and not _in_symbol_table(op):
            raise VerificationError(
                op, "symbol's parent must have the SymbolTable trait"
            )
        op_check = OP_CHECKS.get(type(op))
        if op_check is not None and (message := op_check(op)) is not None:
            raise verification_error(op, message)
        branch = _BRANCHES.get(op.name)
        if branch is not None and (message := _successor_operands(op, branch)):
            raise verification_error(op, message)
        for k, operand in enumerate(op.operands):
            if not dominance.dominates(operand, op):
                raise VerificationError(op, f"operand #{k} does not dominate this use")


_SYMBOL_CLASSES: dict[type[Operation], bool] = {}


def _is_symbol(cls: type[Operation]) -> bool:
    """Whether ops of `cls` are symbols (asked once a class: verify's hot path). An
    unregistered op is not: xDSL gives it every trait, MLIR knows none of its."""
    known = _SYMBOL_CLASSES.get(cls)
    if known is None:
        symbol = cls.has_trait(SymbolOpInterface)
        known = _SYMBOL_CLASSES[cls] = symbol and not issubclass(cls, UnregisteredOp)
    return known


def _in_symbol_table(symbol: Operation) -> bool:
    """MLIR's rule that xDSL's verifiers lack: a symbol (a function, a global, a
    gpu.module) sits at the top or directly in a symbol table, not in a function."""
    parent = symbol.parent_op()
    return parent is None or parent.has_trait(SymbolTable)


def verification_error(
    op: Operation,
    message: str,
    notes: tuple[tuple[Operation, str], ...] = (),
    names_op: bool | None = None,
) -> VerificationError:
    """`op` fails with `message`, read after `'op.name' op` where `names_op` says
    (MLIR's `emitOpError`; False: its `emitError`) or, by default, where MLIR
    reads the message so (`UNPREFIXED`)."""
    error = VerificationError(op, message, notes)
    error.names_op = not UNPREFIXED.match(message) if names_op is None else names_op
    return error


_UNCONDITIONAL = (("successor", "arguments"),)
_CONDITIONAL = (("then_block", "then_arguments"), ("else_block", "else_arguments"))
_BRANCHES = {
    "cf.br": _UNCONDITIONAL,
    "llvm.br": _UNCONDITIONAL,
    "cf.cond_br": _CONDITIONAL,
    "llvm.cond_br": _CONDITIONAL,
}
"""The branches' successors and the operands each passes (MLIR's
`BranchOpInterface`), by the names of xDSL's accessors."""


def _successor_operands(
    op: Operation, branch: tuple[tuple[str, str], ...]
) -> str | None:
    """MLIR's check of what a branch passes its successors (xDSL's verifiers do
    not make it): as many values as each block takes, of its arguments' types."""
    for k, (block_name, operands_name) in enumerate(branch):
        block = getattr(op, block_name)
        operands = getattr(op, operands_name)
        if len(operands) != len(block.args):
            return (
                f"branch has {len(operands)} operands for successor #{k}, but "
                f"target block has {len(block.args)}"
            )
        for i, (value, arg) in enumerate(zip(operands, block.args, strict=True)):
            if value.type != arg.type:
                return f"type mismatch for bb argument #{i} of successor #{k}"
    return None


class _Dominance:
    """Does a value's definition dominate a use? Block dominators per region,
    computed once per region. As in MLIR, a block no path from its region's entry
    reaches is dominated by every block (and its edges count for nothing), and in a
    graph region (a symbol table's body: the module's, a gpu.module's) there is no
    order to respect."""

    def __init__(self) -> None:
        self._regions: dict[Region, dict[Block, set[Block]]] = {}
        self._positions: dict[Block, dict[Operation, int]] = {}
        self._graph: dict[Region, bool] = {}

    def dominates(self, value: SSAValue, user: Operation) -> bool:
        block = value.owner if isinstance(value, BlockArgument) else value.owner.parent
        if not isinstance(block, Block) or block.parent is None:
            return True  # a value of a detached op: not ours to judge
        region = block.parent
        if self._is_graph(region):
            return True
        # The user, or the ancestor of it, that sits in the definition's region.
        ancestor: Operation | None = user
        while ancestor is not None and ancestor.parent_region() is not region:
            ancestor = ancestor.parent_op()
        if ancestor is None or ancestor.parent is None:
            return False  # defined in a region that does not enclose the use
        if ancestor.parent is block:
            if isinstance(value, BlockArgument):
                return True
            order = self._order(block)
            return order[value.owner] < order[ancestor]
        dominators = self._dominators(region).get(ancestor.parent)
        return dominators is None or block in dominators

    def _is_graph(self, region: Region) -> bool:
        if region not in self._graph:
            owner = region.parent
            self._graph[region] = owner is not None and owner.has_trait(SymbolTable)
        return self._graph[region]

    def _order(self, block: Block) -> dict[Operation, int]:
        """Each op's position in `block` (xDSL's `is_before_in_block` walks the
        block: quadratic over a kernel's thousands of ops)."""
        if block not in self._positions:
            self._positions[block] = {op: k for k, op in enumerate(block.ops)}
        return self._positions[block]

    def _dominators(self, region: Region) -> dict[Block, set[Block]]:
        """The dominators of each block reachable from the entry."""
        if region not in self._regions:
            self._regions[region] = dominators(region)
        return self._regions[region]


def dominators(region: Region) -> dict[Block, set[Block]]:
    """Each reachable block's dominators, by the classic iteration (regions are
    small): a block is dominated by itself and by what dominates all of its
    reachable predecessors."""
    entry = region.blocks.first
    if entry is None:
        return {}
    order: list[Block] = []
    seen: set[Block] = set()
    work = [entry]
    while work:
        b = work.pop()
        if b in seen:
            continue
        seen.add(b)
        order.append(b)
        work += b.last_op.successors if b.last_op is not None else []
    preds: dict[Block, list[Block]] = {b: [] for b in order}
    for b in order:
        for s in b.last_op.successors if b.last_op is not None else []:
            preds[s].append(b)
    return dominance_sets(order, {entry}, preds)


def dominance_sets(
    order: list[Block], roots: set[Block], incoming: dict[Block, list[Block]]
) -> dict[Block, set[Block]]:
    """The classic iteration over `order`: a root is dominated by itself alone, any
    other block by itself and by what dominates all of its `incoming` blocks (its
    predecessors for dominators from an entry, its successors for post-dominators
    from the exits)."""
    dom = {b: set(order) for b in order}
    for r in roots:
        dom[r] = {r}
    changed = True
    while changed:
        changed = False
        for b in order:
            if b in roots:
                continue
            new = {b} | set.intersection(*(dom[p] for p in incoming[b]))
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


def unprintable_op(module: Operation) -> Operation | None:
    """The innermost op of `module` that xDSL's printer fails on, if any: xDSL
    parses some things it cannot print (an `f128` constant)."""
    found = None
    for op in module.walk():
        if found is not None and not found.is_ancestor(op):
            break
        try:
            Printer(stream=io.StringIO()).print_op(op)
        except Exception as e:
            if not is_user_error(e):
                raise
            found = op
    return found


def not_a_module(value: object) -> TypeError:
    """The error for `value` given where a module belongs."""
    return TypeError(f"expected a module (ModuleOp), got {type(value).__name__}")


class NotUtf8(ValueError):
    """An input file that is not UTF-8 text (`decode_source`)."""


def decode_source(data: bytes, name: str) -> str:
    """The text of an input file's bytes; a `NotUtf8` naming the file, the first
    byte that is not UTF-8 and its line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise NotUtf8(
            f"{name} is not UTF-8 text: byte 0x{data[e.start]:02x} at offset "
            f"{e.start} (line {line})"
        ) from None


def _headline(text: str) -> str:
    """The first line of `text`, and the next where it ends in `:` (xDSL's "operand
    'lhs' at position 0 does not verify:" gives its reason on the next line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}"
    return lines[0] if lines else text


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text


def format_error(
    message: str,
    location: SourceLocation | None,
    source: str | None = None,
    severity: str = "error",
) -> str:
    """`file:line:col: error: message`, then the source line and a caret."""
    if location is None:
        return f"{severity}: {message}"
    text = f"{location}: {severity}: {message}"
    if source is not None:
        lines = source.splitlines()
        if 0 < location.line <= len(lines):
            line = lines[location.line - 1]
            text += f"\n{line}\n{' ' * (location.column - 1)}^"
    return text


def locate_exception(
    error: BaseException, line_offset: int = 0
) -> tuple[SourceLocation | None, str]:
    """Where a user error happened (None: nowhere in the input) and its message.

    Parse errors point at their token, errors carrying an `op` (pass refusals,
    verifier failures) at that op's source, prefixed `'op' op`.
    """
    if isinstance(error, ParseError):
        message = parser_message(error.msg, error.span)
        where = error.span.get_location()
        line, col = where.line, where.col
        if message.startswith("expected"):
            line, col = after_previous_token(error.span, line, col)
        location = SourceLocation(where.file or "<stdin>", line + line_offset, col)
        return location, message
    if isinstance(error, OpError) and error.op is not None:
        if not error.names_op:  # the message describes the op itself
            return location_of(error.op), str(error)
        return location_of(error.op), f"'{error.op.name}' op {error.message}"
    if isinstance(error, OSError) and error.filename is not None:
        return None, f"cannot open '{error.filename}': {error.strerror}"
    message = error.message if isinstance(error, OpError) else first_line(str(error))
    return None, message


def format_exception(
    error: BaseException, sources: dict[str, str] | None = None, line_offset: int = 0
) -> str:
    """One located message for any error a user can cause (see `locate_exception`);
    `sources` maps file names to their text, for the quoted source line."""
    sources = sources or {}
    location, message = locate_exception(error, line_offset)
    source = None if location is None else sources.get(location.filename)
    if source is None and isinstance(error, ParseError) and line_offset == 0:
        content = error.span.input.content
        source = (
            content.decode("utf-8", "replace")
            if isinstance(content, bytes)
            else content
        )
    lines = [format_error(message, location, source)]
    for where, note in exception_notes(error):
        text = None if where is None else sources.get(where.filename)
        lines.append(format_error(note, where, text, severity="note"))
    return "\n".join(lines)


@dataclass
class NotedParseError(ParseError):
    """A parse error MLIR follows with notes, each at a place in the text (its
    "previously referenced here")."""

    notes: tuple[tuple[Span, str], ...] = ()


def exception_notes(
    error: BaseException, line_offset: int = 0
) -> list[tuple[SourceLocation | None, str]]:
    """The notes MLIR prints after `error` (see `OpError.notes` and
    `NotedParseError`), located (a parse error's lines `line_offset` further on,
    as `locate_exception` places them)."""
    if isinstance(error, NotedParseError):
        located = []
        for span, text in error.notes:
            where = span.get_location()
            place = SourceLocation(
                where.file or "<stdin>", where.line + line_offset, where.col
            )
            located.append((place, text))
        return located
    notes = error.notes if isinstance(error, OpError) else ()
    return [(location_of(op), text) for op, text in notes]


def format_op_error(
    op: Operation | None, message: str, sources: dict[str, str] | None = None
) -> str:
    """The error `message` about `op`, located where `op` came from."""
    prefix = f"'{op.name}' op " if op is not None else ""
    return format_error(prefix + message, *_located(op, sources))


def _located(
    op: Operation | None, sources: dict[str, str] | None
) -> tuple[SourceLocation | None, str | None]:
    """Where `op` came from, and the text of that file when `sources` has it."""
    location = location_of(op)
    source = None
    if location is not None and sources is not None:
        source = sources.get(location.filename)
    return location, source
