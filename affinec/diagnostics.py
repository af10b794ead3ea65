"""Errors that name the op and where it came from, as `file:line:col: error: ...`.

The parser here records each op's source position as its `FileLineColLoc`, so a
verifier failure or a pass refusing an op, however late in a pipeline, points back
at the line of the input the op (or its nearest located ancestor) came from. Passes
signal refusal with `PassError(op, reason)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    StringAttr,
    UnregisteredOp,
)
from xdsl.ir import Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap, AffineSet
from xdsl.parser import Parser
from xdsl.parser.core import ForwardDeclaredValue
from xdsl.utils.exceptions import (
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from affinec.semi_affine import MLIRAffineParser


class OpError(DiagnosticException):
    """An error about one op (or about the whole input, when `op` is None), which
    `format_exception` locates at the op's source."""

    def __init__(self, op: Operation | None, message: str) -> None:
        super().__init__(message)
        self.op = op
        self.message = message


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


class LocatingParser(Parser):
    """A parser that gives every op it parses the location of its first token.

    `line_offset` shifts the lines, for a chunk of a file split at `// -----`. Where
    xDSL's parser and MLIR's disagree on what is an error, this one follows MLIR:
    semi-affine maps (`d0 mod s0`) are read (`affinec.semi_affine`); an input of
    only comments is an empty module; an op name that its (registered)
    dialect does not define is an error even with unregistered dialects allowed;
    a region's entry argument whose name was already used (`affine.for %i = 0 to
    %i`) is an error.
    """

    def __init__(
        self, ctx: Context, text: str, name: str = "<stdin>", line_offset: int = 0
    ) -> None:
        super().__init__(ctx, text, name)
        self.line_offset = line_offset
        self._op_start: Span | None = None

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        if allow_implicit_module and self._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        return super().parse_module(allow_implicit_module)

    def parse_optional_operation(self) -> Operation | None:
        start = self._current_token.span
        self._op_start = start
        op = super().parse_optional_operation()
        if op is None:
            return None
        if any(self._is_stale(v) for v in op.operands):
            self.raise_error(
                f"'{op.name}' uses a value defined in its own region", start
            )
        if not isinstance(op.location, FileLineColLoc):
            where = start.get_location()
            op.location = FileLineColLoc(
                StringAttr(where.file or "<stdin>"),
                IntAttr(where.line + self.line_offset),
                IntAttr(where.col),
            )
        return op

    def _is_stale(self, value: SSAValue) -> bool:
        """A forward reference that a definition inside the op itself took away."""
        return isinstance(value, ForwardDeclaredValue) and not any(
            value is v
            for refs in self.forward_ssa_references.values()
            for v in refs.values()
        )

    def _get_op_by_name(self, name: str) -> type[Operation]:
        dialect, dot, _ = name.partition(".")
        if dot and dialect in self.ctx.registered_dialect_names:
            op_type = self.ctx.get_optional_op(
                name, dialect_stack=self._parser_state.dialect_stack
            )
            if op_type is None or issubclass(op_type, UnregisteredOp):
                self.raise_error(
                    f"unregistered operation '{name}' found in dialect ('{dialect}') "
                    "that does not allow unknown operations",
                    self._op_start,
                )
        return super()._get_op_by_name(name)

    def parse_affine_map(self) -> AffineMap:
        return MLIRAffineParser(self._parser_state).parse_affine_map()

    def parse_affine_set(self) -> AffineSet:
        return MLIRAffineParser(self._parser_state).parse_affine_set()

    def parse_optional_region(
        self, arguments: Iterable[Parser.Argument] | None = None
    ) -> Region | None:
        for arg in arguments or ():
            if arg.name.text[1:] in self.forward_ssa_references:
                self.raise_error(
                    f"region entry argument '{arg.name.text}' is already in use",
                    arg.name,
                )
        return super().parse_optional_region(arguments)


def parse_module(
    ctx: Context, text: str, filename: str = "<stdin>", line_offset: int = 0
) -> ModuleOp:
    """Parse `text` into a module whose ops know their source locations.

    Raises xDSL's `ParseError` (which carries a span) on malformed input.
    """
    return LocatingParser(ctx, text, filename, line_offset).parse_module()


def location_of(op: Operation | None) -> SourceLocation | None:
    """The source location of `op`, or of its nearest ancestor that has one."""
    while op is not None:
        loc = op.location
        if isinstance(loc, FileLineColLoc):
            return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
        op = op.parent_op()
    return None


def verify(module: ModuleOp) -> None:
    """Verify `module`, raising `VerificationError` at the first op that fails."""
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            raise VerificationError(op, first_line(str(e))) from e


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
        where = error.span.get_location()
        location = SourceLocation(
            where.file or "<stdin>", where.line + line_offset, where.col
        )
        return location, error.msg
    if isinstance(error, OpError) and error.op is not None:
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
    return format_error(message, location, source)


def format_op_error(
    op: Operation | None, message: str, sources: dict[str, str] | None = None
) -> str:
    """The error `message` about `op`, located where `op` came from."""
    location = location_of(op)
    source = None
    if location is not None and sources is not None:
        source = sources.get(location.filename)
    prefix = f"'{op.name}' op " if op is not None else ""
    return format_error(prefix + message, location, source)
