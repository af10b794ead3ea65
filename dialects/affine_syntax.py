"""MLIR's textual syntax for affine expressions, maps and sets, and for maps of SSA ids.

xDSL prints `affine_map<(d0) -> (((d0 * 2) + -3))>` where MLIR prints
`affine_map<(d0) -> (d0 * 2 - 3)>`, and parses `%A[%i, %j + 1]` into a map over
symbols only. This module owns both directions so that every affine op we print reads
like MLIR's and re-parses to the same map:

- `write_expr` prints an expression with the fewest parentheses that keep its tree,
  using subtraction where MLIR does (`d0 - 3`, `d0 - d1 * 2`, `-d0`); the format
  functions print it in MLIR's form (`affinec.base.semi_affine.mlir_form`: the tree
  MLIR holds, whoever built ours), so the text is the same as MLIR's and reads back
  to what it prints;
- `format_map` / `format_set` print whole maps and sets;
- `parse_ssa_expr_list` parses a list of expressions over SSA values in which a bare
  `%x` is a dimension and `symbol(%x)` a symbol, as in MLIR, semi-affine ones
  included (`%i mod symbol(%n)`; `affinec.base.semi_affine`);
- the pieces the affine ops' custom forms share (`affinec.dialects.affine`): map and
  set attributes with their operand lists (`affine_map<...>(%i)[%n]`), indexed
  memrefs (`%A[%i, %j + 1] : memref<...>`) and arrow type lists.

Printing is stable: parsing what `write_expr` printed and printing again gives the same
text (tests/test_affine_syntax.py checks it on random expressions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import AffineMapAttr, IndexType, MemRefType
from xdsl.ir import Attribute, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
    AffineSymExpr,
)
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineConstraintKind
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from affinec.base.semi_affine import (
    MLIRAffineParser,
    add,
    fits_index,
    mlir_form,
    multiply,
)

_ADD = 1
_MUL = 2
_ATOM = 3

_TOKENS = {
    AffineBinaryOpKind.Mul: "*",
    AffineBinaryOpKind.FloorDiv: "floordiv",
    AffineBinaryOpKind.CeilDiv: "ceildiv",
    AffineBinaryOpKind.Mod: "mod",
}

Emit = Callable[[str], None]
EmitOperand = Callable[[int], None]


def write_expr(
    expr: AffineExpr,
    emit: Emit,
    emit_dim: EmitOperand,
    emit_sym: EmitOperand,
    min_prec: int = 0,
) -> None:
    """Print `expr` through `emit`, with dims and symbols printed by the callbacks.

    `min_prec` is the binding strength the context needs: a sum printed where a product
    is expected gets parentheses.
    """

    def sub(e: AffineExpr, prec: int) -> None:
        write_expr(e, emit, emit_dim, emit_sym, prec)

    match expr:
        case AffineConstantExpr(value=value):
            emit(str(value))
        case AffineDimExpr(position=position):
            emit_dim(position)
        case AffineSymExpr(position=position):
            emit_sym(position)
        case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Add, lhs=lhs, rhs=rhs):
            if min_prec > _ADD:
                emit("(")
            sub(lhs, _ADD)
            if (
                isinstance(rhs, AffineBinaryOpExpr)
                and rhs.kind == AffineBinaryOpKind.Mul
                and isinstance(rhs.rhs, AffineConstantExpr)
                and rhs.rhs.value < 0
            ):
                emit(" - ")
                if rhs.rhs.value == -1:
                    sub(rhs.lhs, _ADD + 1)
                else:
                    sub(rhs.lhs, _MUL)
                    emit(f" * {-rhs.rhs.value}")
            elif isinstance(rhs, AffineConstantExpr) and rhs.value < 0:
                emit(f" - {-rhs.value}")
            else:
                emit(" + ")
                sub(rhs, _ADD + 1)
            if min_prec > _ADD:
                emit(")")
        case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Mul, lhs=lhs, rhs=rhs) if (
            isinstance(rhs, AffineConstantExpr) and rhs.value == -1
        ):
            if min_prec > _MUL:
                emit("(")
            emit("-")
            sub(lhs, _ATOM)
            if min_prec > _MUL:
                emit(")")
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            if min_prec > _MUL:
                emit("(")
            sub(lhs, _MUL)
            emit(f" {_TOKENS[kind]} ")
            sub(rhs, _ATOM)
            if min_prec > _MUL:
                emit(")")
        case _:
            raise ValueError(f"unexpected affine expression {expr}")


def format_expr(
    expr: AffineExpr,
    dim_names: Sequence[str] | None = None,
    sym_names: Sequence[str] | None = None,
) -> str:
    """The MLIR text of `expr` in MLIR's form (`mlir_form`), naming dims `d0...` and
    symbols `s0...` by default."""
    parts: list[str] = []
    write_expr(
        mlir_form(expr),
        parts.append,
        lambda i: parts.append(dim_names[i] if dim_names else f"d{i}"),
        lambda i: parts.append(sym_names[i] if sym_names else f"s{i}"),
    )
    return "".join(parts)


def _format_space(num_dims: int, num_symbols: int) -> str:
    dims = ", ".join(f"d{i}" for i in range(num_dims))
    if not num_symbols:
        return f"({dims})"
    return f"({dims})[{', '.join(f's{i}' for i in range(num_symbols))}]"


def format_map(m: AffineMap) -> str:
    """`(d0)[s0] -> (d0 + s0, 4)`: the body of an `affine_map<...>`."""
    results = ", ".join(format_expr(e) for e in m.results)
    return f"{_format_space(m.num_dims, m.num_symbols)} -> ({results})"


def format_set(s: AffineSet) -> str:
    """`(d0)[s0] : (d0 - 1 >= 0, s0 - d0 == 0)`: the body of an `affine_set<...>`,
    each constraint as MLIR keeps it (`e >= 0` or `e == 0`)."""
    constraints = ", ".join(
        f"{format_expr(e)} {kind.value} 0" for e, kind in map(_as_mlir, s.constraints)
    )
    return f"{_format_space(s.num_dims, s.num_symbols)} : ({constraints})"


def _as_mlir(c: AffineConstraintExpr) -> tuple[AffineExpr, AffineConstraintKind]:
    """A constraint as MLIR holds it: `lhs - rhs >= 0` (`rhs - lhs` for `<=`) or
    `lhs - rhs == 0`."""
    lhs, rhs, kind = c.lhs, c.rhs, c.kind
    if kind == AffineConstraintKind.le:
        lhs, rhs, kind = rhs, lhs, AffineConstraintKind.ge
    if isinstance(rhs, AffineConstantExpr) and rhs.value == 0:
        return lhs, kind
    return add(lhs, multiply(rhs, AffineExpr.constant(-1))), kind


class SSAOperandSpace:
    """The dims and symbols met while parsing expressions of SSA ids.

    A bare `%x` becomes the next dimension (or the one `%x` already is), `symbol(%x)`
    the next symbol. Several expression lists can share one space, as the bounds of an
    `affine.parallel` do.
    """

    def __init__(self) -> None:
        self.dims: dict[str, tuple[int, Span]] = {}
        self.syms: dict[str, tuple[int, Span]] = {}

    def map(self, results: Sequence[AffineExpr]) -> AffineMap:
        return AffineMap(len(self.dims), len(self.syms), tuple(results))

    def operands(self, parser: Parser) -> list[SSAValue]:
        """The SSA values of the space, dims first, resolved as `index` values."""
        spans = [span for _, span in self.dims.values()]
        spans += [span for _, span in self.syms.values()]
        return [
            parser.resolve_operand(UnresolvedOperand(span, 0), IndexType())
            for span in spans
        ]


def parse_optional_index_literal(parser: Parser, message: str) -> int | None:
    """An integer literal that an `index` holds (a loop bound, a step), if there is
    one; `message` at the literal, as MLIR words it, if it is out of the 64-bit
    range."""
    start = parser.pos
    value = parser.parse_optional_integer()
    if value is not None and not fits_index(value):
        # MLIR points at the digits, after a sign
        at = start + 1 if value < 0 else start
        parser.raise_error(message, at, at + len(str(abs(value))))
    return value


def parse_index_literal(parser: Parser, message: str) -> int:
    """`parse_optional_index_literal`, the literal required."""
    value = parse_optional_index_literal(parser, message)
    if value is None:
        parser.raise_error("Expected integer literal")
    return value


def parse_ssa_expr(parser: Parser, space: SSAOperandSpace) -> AffineExpr:
    """Parse one affine expression whose leaves are `%x`, `symbol(%x)` and integers."""
    affine_parser = MLIRAffineParser(parser._parser_state)  # pyright: ignore[reportPrivateUsage]

    def operand(table: dict[str, tuple[int, Span]], span: Span) -> int:
        if span.text not in table:
            table[span.text] = (len(table), span)
        return table[span.text][0]

    def parse_optional_leaf() -> AffineExpr | None:
        token = affine_parser._parse_optional_token(MLIRTokenKind.PERCENT_IDENT)  # pyright: ignore[reportPrivateUsage]
        if token is not None:
            return AffineExpr.dimension(operand(space.dims, token.span))
        if affine_parser._current_token.text == "symbol":  # pyright: ignore[reportPrivateUsage]
            affine_parser._consume_token()  # pyright: ignore[reportPrivateUsage]
            affine_parser.parse_punctuation("(")
            token = affine_parser._parse_token(  # pyright: ignore[reportPrivateUsage]
                MLIRTokenKind.PERCENT_IDENT, "expected an SSA value in symbol(...)"
            )
            affine_parser.parse_punctuation(")")
            return AffineExpr.symbol(operand(space.syms, token.span))
        return None

    return affine_parser._parse_affine_expr(parse_optional_leaf)  # pyright: ignore[reportPrivateUsage]


def parse_ssa_expr_list(
    parser: Parser,
    space: SSAOperandSpace,
    delimiter: Parser.Delimiter = Parser.Delimiter.SQUARE,
) -> list[AffineExpr]:
    """Parse `[%i, %j * 2 + symbol(%n)]` (or another delimiter) into `space`."""
    return parser.parse_comma_separated_list(
        delimiter, lambda: parse_ssa_expr(parser, space)
    )


def write_ssa_expr(
    expr: AffineExpr,
    emit: Emit,
    print_value: Callable[[SSAValue], object],
    operands: Sequence[SSAValue],
    num_dims: int,
) -> None:
    """Print `expr` with its dims as `%x` and its symbols as `symbol(%x)`."""

    def dim(i: int) -> None:
        print_value(operands[i])

    def sym(i: int) -> None:
        emit("symbol(")
        print_value(operands[num_dims + i])
        emit(")")

    write_expr(mlir_form(expr), emit, dim, sym)


# --------------------------------------------------------------------------------------
# Pieces of the affine ops' custom syntax
# --------------------------------------------------------------------------------------


def print_map_attr(printer: Printer, m: AffineMap) -> None:
    printer.print_string(f"affine_map<{format_map(m)}>")


def print_set_attr(printer: Printer, s: AffineSet) -> None:
    printer.print_string(f"affine_set<{format_set(s)}>")


def print_operand_lists(
    printer: Printer, operands: Sequence[SSAValue], num_dims: int
) -> None:
    """`(%d0, %d1)[%s0]`: the dim operands in parentheses, symbols in brackets."""
    with printer.in_parens():
        printer.print_list(operands[:num_dims], printer.print_ssa_value)
    if len(operands) > num_dims:
        with printer.in_square_brackets():
            printer.print_list(operands[num_dims:], printer.print_ssa_value)


OPERAND_COUNT_WORDS = {
    "affine.apply": ("dimension or symbol index mismatch",) * 2,
    "affine.for": (
        "dim operand count and affine map dim count must match",
        "symbol operand count and affine map symbol count must match",
    ),
    "affine.if": (
        "dim operand count and integer set dim count must match",
        "symbol operand count and integer set symbol count must match",
    ),
}
"""What MLIR's parser of each op says of a map or set given more or fewer dims
(first) or symbols (second) than it takes; the others say `OPERAND_COUNT`."""
OPERAND_COUNT = "operand count and affine map dimension and symbol count must match"


def parse_operand_lists(
    parser: Parser, num_dims: int, num_symbols: int, pos: int, op_name: str = ""
):
    dims = parser.parse_optional_comma_separated_list(
        Parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())
    )
    syms = parser.parse_optional_comma_separated_list(
        Parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
    )
    dims, syms = dims or [], syms or []
    if len(dims) != num_dims or len(syms) != num_symbols:
        words = OPERAND_COUNT_WORDS.get(op_name, (OPERAND_COUNT,) * 2)
        parser.raise_error(
            f"{words[len(dims) == num_dims]} (it takes {num_dims} dims and "
            f"{num_symbols} symbols, {len(dims)} and {len(syms)} were given)",
            pos,
        )
    return [*dims, *syms]


def parse_map_and_operands(
    parser: Parser, op_name: str = ""
) -> tuple[AffineMapAttr, list[SSAValue]]:
    """`affine_map<(d0)[s0] -> (...)>(%a)[%b]`, as affine.apply/min/max write it
    (`op_name` picks MLIR's words for a wrong operand count)."""
    pos = parser.pos
    attr = parser.parse_attribute()
    if not isinstance(attr, AffineMapAttr):
        parser.raise_error("expected an affine map", pos)
    m = attr.data
    return attr, parse_operand_lists(parser, m.num_dims, m.num_symbols, pos, op_name)


def parse_type_list(parser: Parser) -> list[Attribute]:
    """`(t1, t2)` or a single bare `t`, as MLIR's arrow type lists allow."""
    if parser.parse_optional_punctuation("(") is not None:
        if parser.parse_optional_punctuation(")") is not None:
            return []
        types = parser.parse_comma_separated_list(
            Parser.Delimiter.NONE, parser.parse_type
        )
        parser.parse_punctuation(")")
        return types
    single = parser.parse_optional_type()
    if single is None:
        parser.raise_error("expected non-function type")  # MLIR's words
    return [single]


def print_indexed(
    printer: Printer, memref: SSAValue, m: AffineMap, indices: Sequence[SSAValue]
) -> None:
    """`%A[%i, %j + symbol(%n)]`."""
    printer.print_ssa_value(memref)
    with printer.in_square_brackets():
        for k, result in enumerate(m.results):
            if k:
                printer.print_string(", ")
            write_ssa_expr(
                result,
                printer.print_string,
                printer.print_ssa_value,
                indices,
                m.num_dims,
            )


def parse_indexed(
    parser: Parser,
) -> tuple[UnresolvedOperand, AffineMap, list[SSAValue]]:
    """`%A[<exprs of %dims and symbol(%syms)>]`: the (unresolved) memref, the map and
    its operands."""
    unresolved = parser.parse_unresolved_operand()
    space = SSAOperandSpace()
    results = parse_ssa_expr_list(parser, space)
    return unresolved, space.map(results), space.operands(parser)


def parse_memref_type(parser: Parser) -> MemRefType:
    pos = parser.pos
    memref_type = parser.parse_type()
    if not isinstance(memref_type, MemRefType):
        parser.raise_error(f"expected a memref type, got {memref_type}", pos)
    return memref_type


def print_memref_access(
    printer: Printer,
    memref: SSAValue,
    m: AffineMap,
    indices: Sequence[SSAValue],
    attributes: dict[str, Attribute] | None = None,
) -> None:
    """`%A[%i, %j + symbol(%n)] {attrs} : memref<...>`."""
    print_indexed(printer, memref, m, indices)
    printer.print_op_attributes(attributes or {})
    printer.print_string(" : ")
    printer.print_attribute(memref.type)


def parse_memref_access(
    parser: Parser,
) -> tuple[SSAValue, AffineMap, list[SSAValue], MemRefType, dict[str, Attribute]]:
    """Parse `%A[<exprs of %dims and symbol(%syms)>] {attrs} : memref<...>`."""
    unresolved, m, indices = parse_indexed(parser)
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    memref_type = parse_memref_type(parser)
    memref = parser.resolve_operand(unresolved, memref_type)
    return memref, m, indices, memref_type, attrs
