"""The parser behind every affinec tool: each op it parses carries the location of
its first token (a `FileLineColLoc`), so a diagnostic however late in a pipeline
points back at the input's line; it also reads what MLIR reads where xDSL's parser
refuses or hangs (semi-affine maps, an input of comments only, strings without
their closing quote), and turns what xDSL raises on malformed input into a parse
error at the op being parsed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from xdsl.context import Context
from xdsl.dialects.builtin import (
    FileLineColLoc,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StridedLayoutAttr,
    StringAttr,
    UnrankedMemRefType,
    UnregisteredOp,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap, AffineSet
from xdsl.parser import Parser
from xdsl.parser.core import ForwardDeclaredValue
from xdsl.parser.generic_parser import ParserState
from xdsl.utils.exceptions import MultipleSpansParseError, ParseError
from xdsl.utils.lexer import Input, Span
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRTokenKind

from affinec.base.diagnostics import NotedParseError, is_user_error, xdsl_failure
from affinec.base.mlir_wording import RESULT_LIST, in_custom_op
from affinec.base.semi_affine import MLIRAffineParser, fits_index


class LinearLexer(MLIRLexer):
    """xDSL's lexer with a string-literal pattern that cannot backtrack.

    xDSL's `"(?:[^"\\]+|\\.)*"` nests `+` in `*`: on a string without its closing
    quote, the regex engine tries every way of splitting the line before failing,
    which is exponential in the line's length (a hang). Matching one character per
    repetition accepts the same strings in linear time.
    """

    _unescaped_characters_regex = re.compile(
        r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
    )


_RESULT_LIST = re.compile(RESULT_LIST)


def _name_span(op_start: Span) -> Span:
    """Where the op that starts at `op_start` has its name, after the results it
    binds: MLIR's location of an op."""
    named = _RESULT_LIST.match(op_start.input.content, op_start.start)
    assert named is not None  # the pattern matches the empty string too
    return Span(named.end(), named.end() + 1, op_start.input)


class LocatingParser(Parser):
    """A parser that gives every op it parses the location of its first token.

    `line_offset` shifts the lines, for a chunk of a file split at `// -----`. It
    lexes with `LinearLexer`, and turns the exceptions xDSL raises on malformed
    input (`raised_by_xdsl`; a verifier's, building an attribute) into parse errors
    at the op being parsed. Where xDSL's parser and MLIR's disagree on what is an
    error, this one follows MLIR: semi-affine maps (`d0 mod s0`) are read
    (`affinec.base.semi_affine`); an input of only comments is an empty module; an op
    name that its (registered) dialect does not define is an error even with
    unregistered dialects allowed; a region's entry argument whose name was already
    used (`affine.for %i = 0 to %i`) is an error.
    """

    def __init__(
        self, ctx: Context, text: str, name: str = "<stdin>", line_offset: int = 0
    ) -> None:
        # xDSL's constructor lexes the first token of what it is given: give it
        # nothing, then the text through the linear lexer.
        super().__init__(ctx, "", name)
        self._parser_state = ParserState(LinearLexer(Input(text, name)))
        self.line_offset = line_offset
        self._op_start: Span | None = None
        self._first_uses: dict[str, Span] = {}
        """Where each value not yet defined was first used (for MLIR's error there)."""

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        if allow_implicit_module and self._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        start = self._current_token.span
        try:
            return super().parse_module(allow_implicit_module)
        except Exception as e:
            if (
                allow_implicit_module
                and isinstance(e, ParseError)
                and e.msg == "Could not parse entire input!"
                and self._current_token.kind == MLIRTokenKind.EOF
            ):
                # Alias definitions and nothing else: an empty module, as MLIR
                # reads it (xDSL wants at least one op).
                return ModuleOp([])
            undefined = isinstance(e, ParseError) and e.msg.startswith(
                "values used but not defined"
            )
            if undefined and (at_use := self._undefined_use()):
                raise at_use from None
            raise self._as_parse_error(e, start) from e

    def _parse_memref_attrs(self) -> MemRefType | UnrankedMemRefType:
        """xDSL's memref type, with MLIR's check that a strided layout has a
        stride for each dimension (xDSL's type does not check it, and every
        level would read the missing or extra strides its own way)."""
        after_keyword = self.pos
        memref = super()._parse_memref_attrs()
        layout = memref.layout if isinstance(memref, MemRefType) else None
        if isinstance(layout, StridedLayoutAttr) and len(layout.strides.data) != len(
            memref.get_shape()
        ):
            text = self._parser_state.lexer.input
            start = text.content.rfind("memref", 0, after_keyword)
            raise ParseError(
                Span(start, start + len("memref"), text),
                "expected the number of strides to match the rank",
            )
        return memref

    def parse_optional_builtin_int_or_float_attr(
        self,
    ) -> IntegerAttr | FloatAttr | None:
        """xDSL's, with MLIR's check that an `index` attribute fits 64 signed bits
        (xDSL's takes any integer, which every level would then read its own way)."""
        start = self.pos
        attr = super().parse_optional_builtin_int_or_float_attr()
        if (
            isinstance(attr, IntegerAttr)
            and isinstance(attr.type, IndexType)
            and not fits_index(value := attr.value.data)
        ):
            # MLIR points at the digits, after a sign
            at = start + 1 if value < 0 else start
            self.raise_error(
                "integer constant out of range for attribute",
                at,
                at + len(str(abs(value))),
            )
        return attr

    def resolve_operand(self, operand, type):
        if operand.operand_name not in self.ssa_values:
            self._first_uses.setdefault(operand.operand_name, operand.span)
        return super().resolve_operand(operand, type)

    def _undefined_use(self) -> ParseError | None:
        """MLIR's error for a value used and never defined, at its first use (xDSL
        reports the names at the end of the input)."""
        spans = [
            self._first_uses[name]
            for name in self.forward_ssa_references
            if name in self._first_uses
        ]
        if not spans:
            return None
        return ParseError(
            min(spans, key=lambda span: span.start), "use of undeclared SSA value name"
        )

    def parse_optional_operation(self) -> Operation | None:
        start = self._current_token.span
        self._op_start = start
        try:
            op = super().parse_optional_operation()
        except ParseError as e:
            raise in_custom_op(e, start) from e
        except Exception as e:
            # (a constraint of the op's declarative format, checked as it parses)
            error = self._as_parse_error(e, _name_span(start))
            if isinstance(error, ParseError):
                error = in_custom_op(error, start)
            raise error from e
        if op is None:
            return None
        if any(self._is_stale(v) for v in op.operands):
            self.raise_error(
                f"'{op.name}' uses a value defined in its own region", start
            )
        if not isinstance(op.location, FileLineColLoc):
            where = _name_span(start).get_location()
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
        """The op class of `name`; an unknown op refused in MLIR's words, at its
        name (xDSL's error is at the token after the name: for a name alone on its
        line, the next line)."""
        dialect, dot, _ = name.partition(".")
        op_type = self.ctx.get_optional_op(
            name, dialect_stack=self._parser_state.dialect_stack
        )
        known_dialect = dot and dialect in self.ctx.registered_dialect_names
        custom = self._custom_name_span(name)
        unknown = op_type is not None and issubclass(op_type, UnregisteredOp)
        if unknown and (known_dialect or custom is not None):
            # --allow-unregistered-dialect takes unknown ops in the generic form
            # only, and never of a dialect we have
            op_type = None
        if op_type is not None:
            return op_type
        if custom is not None:
            if known_dialect:
                message = f"custom op '{name}' is unknown"
            elif dot:
                message = f"Dialect `{dialect}' not found for custom op '{name}'"
            else:
                default = self._parser_state.dialect_stack[-1]
                message = (
                    f"custom op '{name}' is unknown (tried '{default}.{name}' as well)"
                )
            self.raise_error(message, custom)
        if known_dialect:
            self.raise_error(
                f"unregistered operation '{name}' found in dialect ('{dialect}') "
                "that does not allow unknown operations",
                self._op_start,
            )
        return super()._get_op_by_name(name)

    def _custom_name_span(self, name: str) -> Span | None:
        """The span of the op name just parsed, if the op is in its custom form (a
        bare name, not a string)."""
        at = _name_span(self._op_start)
        if not at.input.content.startswith(name, at.start):
            return None  # the generic form: `"name"(...)`
        return Span(at.start, at.start + len(name), at.input)

    def parse_optional_argument(self, expect_type: bool = True):  # pyright: ignore
        """xDSL's, with MLIR's refusal of a result number (`%i#0`) in an
        argument's name."""
        argument = super().parse_optional_argument(expect_type=False)
        if argument is None:
            return None
        follower = self._current_token
        if (
            follower.kind == MLIRTokenKind.HASH_IDENT
            and follower.span.start == argument.name.end
            and follower.text[1:].isdigit()
        ):
            self.raise_error(
                "result number not allowed in argument list", follower.span
            )
        if not expect_type:
            return argument
        self.parse_punctuation(":", " after block argument name!")
        return self.Argument(argument.name, self.parse_type())

    def parse_affine_map(self) -> AffineMap:
        return MLIRAffineParser(self._parser_state).parse_affine_map()

    def parse_affine_set(self) -> AffineSet:
        return MLIRAffineParser(self._parser_state).parse_affine_set()

    def parse_optional_region(
        self, arguments: Iterable[Parser.Argument] | None = None
    ) -> Region | None:
        for arg in arguments or ():
            name = arg.name.text[1:]
            if name in self.forward_ssa_references:
                message = f"region entry argument '{arg.name.text}' is already in use"
                first = self._first_uses.get(name)
                notes = (
                    () if first is None else ((first, "previously referenced here"),)
                )
                raise NotedParseError(arg.name, message, notes)
        try:
            return super().parse_optional_region(arguments)
        except MultipleSpansParseError as e:
            if not e.msg.startswith("region ends with missing block declarations"):
                raise
            # as MLIR: at the first reference, not at the region's end
            first = min((span for span, _ in e.refs), key=lambda span: span.start)
            raise ParseError(first, "reference to an undefined block") from None

    def parse_dimension_list(self) -> list[int]:
        """`4x?x8`, and as MLIR also `? x 8` (spaces around the `x`): xDSL's steps
        back one character over a delimiter it took too far, which misses the `x`
        when a space follows it."""
        dims: list[int] = []
        shape = (MLIRTokenKind.INTEGER_LIT, MLIRTokenKind.QUESTION)
        if self._current_token.kind not in shape:
            return dims
        dims.append(self.parse_shape_dimension())
        while True:
            delimiter = self._current_token.span.start
            if self._parse_optional_shape_delimiter() is None:
                return dims
            if self._current_token.kind not in shape:
                self._resume_from(delimiter)  # the `x` before the element type
                return dims
            dims.append(self.parse_shape_dimension())

    def _parse_block(self) -> Block:
        token = self._current_token
        # xDSL's own message here is " in block definition".
        if token.kind != MLIRTokenKind.CARET_IDENT:
            self.raise_error("expected an operation, a block label ('^bb1:') or '}'")
        # xDSL misses a second definition of a block used before its first one.
        name = token.text[1:]
        if name in self.blocks and name not in self.forward_block_references:
            self.raise_error(f"re-declaration of block '{name}'", token.span)
        self._label(name, token.span)
        return super()._parse_block()

    def parse_optional_successor(self) -> Block | None:
        token = self._current_token
        if token.kind == MLIRTokenKind.CARET_IDENT:
            self._label(token.text[1:], token.span)
        return super().parse_optional_successor()

    def _label(self, name: str, span: Span) -> None:
        """Make room for a label MLIR takes and xDSL's block names do not (`^0`,
        a number): its block, seen first here, keeps no name."""
        if name in self.blocks or Block.is_valid_name(name):
            return
        self.blocks[name] = (_UnnamedBlock(), None)
        self.forward_block_references[name].append(span)

    @staticmethod
    def _as_parse_error(error: Exception, at: Span) -> Exception:
        """`error` as a parse error `at` the op that was being parsed, when it is
        an input error (`error` itself otherwise, to be raised as it is)."""
        if isinstance(error, ParseError) or not is_user_error(error):
            return error
        return ParseError(at, xdsl_failure(error))


class _UnnamedBlock(Block):
    """A block whose label (`^0`) is no name xDSL takes: the printer numbers it."""

    @property
    def name_hint(self) -> str | None:
        return None

    @name_hint.setter
    def name_hint(self, name: str | None) -> None:
        pass


def parse_module(
    ctx: Context, text: str, filename: str = "<stdin>", line_offset: int = 0
) -> ModuleOp:
    """Parse `text` into a module whose ops know their source locations.

    Raises xDSL's `ParseError` (which carries a span) on malformed input.
    """
    return LocatingParser(ctx, text, filename, line_offset).parse_module()
