"""Errors that name the op and where it came from, as `file:line:col: error: ...`.

The parser here records each op's source position as its `FileLineColLoc`, so a
verifier failure or a pass refusing an op, however late in a pipeline, points back
at the line of the input the op (or its nearest located ancestor) came from. Passes
signal refusal with `PassError(op, reason)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import (
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)


class OpError(DiagnosticException):
    """An error about one op (or about the whole input, when `op` is None), which
    `format_exception` locates at the op's source."""

    names_op = True
    """Whether the message reads after `'op.name' op` (False for messages that
    describe the op themselves)."""

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

    `line_offset` shifts the lines, for a chunk of a file split at `// -----`.
    """

    def __init__(
        self, ctx: Context, text: str, name: str = "<stdin>", line_offset: int = 0
    ) -> None:
        super().__init__(ctx, text, name)
        self.line_offset = line_offset

    def parse_optional_operation(self) -> Operation | None:
        start = self._current_token.span  # pyright: ignore[reportPrivateUsage]
        op = super().parse_optional_operation()
        if op is not None and not isinstance(op.location, FileLineColLoc):
            where = start.get_location()
            op.location = FileLineColLoc(
                StringAttr(where.file or "<stdin>"),
                IntAttr(where.line + self.line_offset),
                IntAttr(where.col),
            )
        return op


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
) -> str:
    """`file:line:col: error: message`, then the source line and a caret."""
    if location is None:
        return f"error: {message}"
    text = f"{location}: error: {message}"
    if source is not None:
        lines = source.splitlines()
        if 0 < location.line <= len(lines):
            line = lines[location.line - 1]
            text += f"\n{line}\n{' ' * (location.column - 1)}^"
    return text


def format_exception(
    error: BaseException, sources: dict[str, str] | None = None, line_offset: int = 0
) -> str:
    """One located message for any error a user can cause.

    Parse errors point at their token, errors carrying an `op` (pass refusals,
    verifier failures) at that op's source; anything else is `error: <message>`.
    `sources` maps file names to their text, for the quoted source line.
    """
    sources = sources or {}
    if isinstance(error, ParseError):
        where = error.span.get_location()
        location = SourceLocation(
            where.file or "<stdin>", where.line + line_offset, where.col
        )
        source = sources.get(location.filename)
        if source is None and line_offset == 0:
            content = error.span.input.content
            source = (
                content.decode("utf-8", "replace")
                if isinstance(content, bytes)
                else content
            )
        return format_error(error.msg, location, source)
    if isinstance(error, OpError) and error.op is not None:
        if not error.names_op:
            return format_error(str(error), *_located(error.op, sources))
        return format_op_error(error.op, error.message, sources)
    message = error.message if isinstance(error, OpError) else first_line(str(error))
    if isinstance(error, OSError) and error.filename is not None:
        return f"error: cannot open '{error.filename}': {error.strerror}"
    return f"error: {message}"


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
