"""xDSL's generic verifier and parser messages in MLIR's words.

MLIR's `expected-error` lines (and users who know MLIR) look for MLIR's text: an
operand of the wrong type is "operand #0 must be index, but got 'i32'" where xDSL
says "operand 'mapOperands' at position 0 does not verify: ...", a missing
property is "requires attribute 'kernel'", a misplaced op "expects parent op
'gpu.module'". `verifier_message` rewrites the messages of xDSL's own checks (the
ones every op gets from its IRDL definition and traits); `parser_message` the
parser's (`Expected '='` is "expected '='"). The dialects' own verifiers are
written in MLIR's words where MLIR has one, so they pass through unchanged. Where a
parse error is reported follows MLIR too: an op's own parser's errors carry
`custom op 'name'` (`in_custom_op`), a missing token is reported at the end of the
line that lacks it (`after_previous_token`).
"""

from __future__ import annotations

import dataclasses
import re
import sys

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    IndexType,
    IntegerType,
    MemRefType,
    Signedness,
    SignednessAttr,
    StringAttr,
    TensorType,
    VectorType,
)
from xdsl.ir import Attribute, Operation, TypeAttribute
from xdsl.irdl import (
    AnyOf,
    BaseAttr,
    EqAttrConstraint,
    OptOperandDef,
    ParamAttrConstraint,
    RangeLengthConstraint,
    RangeOf,
    SingleOf,
    VarConstraint,
    VarOperandDef,
)
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Span

_ARGUMENT = re.compile(
    r"^(?P<kind>operand|result) '(?P<name>\w+)' at positions? (?P<first>\d+)"
    r"(?: to (?P<last>\d+))? does not verify"
)
_MISSING = re.compile(r"^(?:property|attribute) '(?P<name>\w+)' expected in operation")
_SEGMENTS = re.compile(r"^expected \d+ values in operandSegmentSizes")
_PARENT = re.compile(r"^'[\w.]+' (?P<rest>expects parent op .*)")
_REDEFINED_SYMBOL = re.compile(r'^Redefinition of symbol "(?P<name>.*)"$')
_REDEFINITION = re.compile(r"^redefinition of symbol named '(?P<name>.*)'$")

_DESCRIPTIONS: dict[type[Attribute], str] = {
    IndexType: "index",
    IntegerType: "integer",
    MemRefType: "memref",
    VectorType: "vector",
}
"""What MLIR's operand definitions say of the types xDSL's constraints name."""

_LLVM_DESCRIPTIONS = {"LLVMPointerType": "LLVM pointer"}
"""The same, for types of xDSL's `llvm` dialect (looked up by name: a constraint
can name one only once that dialect is loaded, which most commands never do)."""


def _type_description(attr: type) -> str | None:
    if (words := _DESCRIPTIONS.get(attr)) is not None:
        return words
    llvm = sys.modules.get("xdsl.dialects.llvm")
    name = getattr(attr, "__name__", "")
    if llvm is not None and getattr(llvm, name, None) is attr:
        return _LLVM_DESCRIPTIONS.get(name)
    return None


def verifier_message(op: Operation, text: str) -> str:
    """`text`, a message of one of xDSL's generic checks of `op`, in MLIR's words
    where there is a rule for it (else `text`)."""
    if text.lower().rstrip(".") == "expected an index for each dimension":
        return _index_count_message(op) or text
    if text.startswith("op dimension operand count does not equal memref dynamic"):
        return _dynamic_sizes_message(op) or text
    if text.startswith("Expected arguments to have the same types as the function"):
        return _return_message(op) or text
    if text.startswith("Expected entry block arguments to have the same types"):
        return _entry_block_message(op) or text
    if match := _PARENT.match(text):
        return match["rest"]
    if text.endswith("are cast incompatible") and op.operands and op.results:
        # (xDSL's `arith.index_cast` names its operand's type twice, after its name)
        return (
            f"operand type '{op.operands[0].type}' and result type "
            f"'{op.results[0].type}' are cast incompatible"
        )
    if match := _REDEFINED_SYMBOL.match(text):
        return f"redefinition of symbol named '{match['name']}'"
    if match := _MISSING.match(text):
        return f"requires attribute '{match['name']}'"
    if match := _ARGUMENT.match(text):
        if op.name in _SAME_TYPE and "expected from variable" in text:
            return _SAME_TYPE[op.name]
        return _argument_message(op, match) or text
    if _SEGMENTS.match(text):
        return _too_few_operands(op) or text
    return text


_SAME_TYPE = {
    "affine.store": "value to store must have the same type as memref element type",
}
"""MLIR's words, by op, where xDSL's definition ties a value's type to a memref's
element type (a constraint variable) and MLIR's verifier checks it by hand."""


UNPREFIXED = re.compile(
    r"^(?:type of return operand |branch has \d+ operands|type mismatch for bb arg"
    r"|redefinition of symbol named )"
)
"""Verifier messages MLIR reports without `'op.name' op` before them."""


def redefinitions(op: Operation, message: str) -> tuple[Operation, Operation] | None:
    """The first and second definitions of the symbol `message` says symbol table
    `op` defines twice (MLIR reports the second, with a note at the first; xDSL's
    check fails the table, which has no location when it is the implicit module);
    None for any other message."""
    match = _REDEFINITION.match(message)
    if match is None:
        return None
    named = [
        child
        for child in op.regions[0].blocks[0].ops
        if isinstance(symbol := child.get_attr_or_prop("sym_name"), StringAttr)
        and symbol.data == match["name"]
    ]
    return (named[0], named[1]) if len(named) > 1 else None


def _index_count_message(op: Operation) -> str | None:
    stores = op.name in ("memref.store", "vector.store")
    memref = op.operands[1 if stores else 0].type
    if not isinstance(memref, MemRefType):
        return None
    rank = memref.get_num_dims()
    if op.name.startswith("vector."):
        return f"requires {rank} indices"
    if stores:
        return "store index operand count not equal to memref rank"
    given = len(op.operands) - 1
    return f"incorrect number of indices for load, expected {rank} but got {given}"


def _dynamic_sizes_message(op: Operation) -> str | None:
    """MLIR's count of an allocation's sizes against its type's dynamic dims."""
    memref = op.results[0].type if op.results else None
    sizes = getattr(op, "dynamic_sizes", None)
    if not isinstance(memref, MemRefType) or sizes is None:
        return None
    expected = sum(1 for d in memref.get_shape() if d == DYNAMIC_INDEX)
    return f"incorrect number of dynamic sizes, has {len(sizes)}, expected {expected}"


def _return_message(op: Operation) -> str | None:
    """MLIR's `func.return` checks: as many operands as the function's results,
    then each of the result's type."""
    function = op.parent_op()
    function_type = getattr(function, "function_type", None)
    name = getattr(function, "sym_name", None)
    if function_type is None or name is None:
        return None
    results = function_type.outputs.data
    if len(op.operands) != len(results):
        return (
            f"has {len(op.operands)} operands, but enclosing function "
            f"(@{name.data}) returns {len(results)}"
        )
    for k, (value, result) in enumerate(zip(op.operands, results, strict=True)):
        if value.type != result:
            return (
                f"type of return operand {k} ('{value.type}') doesn't match "
                f"function result type ('{result}') in function @{name.data}"
            )
    return None


def _entry_block_message(op: Operation) -> str | None:
    """MLIR's check of a function's entry block against its signature: as many
    arguments, then each of the signature's type."""
    function_type = getattr(op, "function_type", None)
    if function_type is None or not op.regions or not op.regions[0].blocks:
        return None
    inputs, args = function_type.inputs.data, op.regions[0].blocks[0].args
    if len(args) != len(inputs):
        return (
            f"entry block must have {len(inputs)} arguments to match function signature"
        )
    for k, (arg, t) in enumerate(zip(args, inputs, strict=True)):
        if arg.type != t:
            return (
                f"type of entry block argument #{k}('{arg.type}') must match the type "
                f"of the corresponding argument in function signature('{t}')"
            )
    return None


def _too_few_operands(op: Operation) -> str | None:
    """MLIR's first check of an op with operand segments: at least one operand for
    each operand that is neither variadic nor optional."""
    required = sum(
        1
        for _, definition in op.get_irdl_definition().operands
        if not isinstance(definition, VarOperandDef | OptOperandDef)
    )
    if len(op.operands) >= required:
        return None
    return f"expected {required} or more operands, but found {len(op.operands)}"


def _argument_message(op: Operation, match: re.Match[str]) -> str | None:
    """`operand #k must be <description>, but got '<type>'`, for the first value of
    the failing definition whose type the constraint refuses."""
    kind = match["kind"]
    definition = op.get_irdl_definition()
    defs = dict(definition.operands if kind == "operand" else definition.results)
    constraint = defs[match["name"]].constr
    variadic = isinstance(constraint, RangeOf)
    if isinstance(constraint, RangeLengthConstraint):
        constraint = constraint.constraint  # a single value, as a range of one
    single = constraint.constr if isinstance(constraint, RangeOf | SingleOf) else None
    description = _description(single)
    if single is None or description is None:
        return None
    if variadic:
        description = f"variadic of {description}"
    values = op.operands if kind == "operand" else op.results
    first, last = int(match["first"]), int(match["last"] or match["first"])
    for k in range(first, min(last + 1, len(values))):
        if not single.verifies(values[k].type):
            return f"{kind} #{k} must be {description}, but got '{values[k].type}'"
    return None


def _description(constraint: object) -> str | None:
    """MLIR's words for the types a constraint admits ("signless integer or vector
    of signless integer"), where the constraint is built of parts with words."""
    if isinstance(constraint, VarConstraint):
        return _description(constraint.constraint)
    if isinstance(constraint, AnyOf):
        choices = constraint.attr_constrs
        floats = [c for c in choices if _is_float(c)]
        parts = ["floating-point"] if len(floats) > 1 else []
        parts += [
            _description(c) for c in choices if len(floats) < 2 or c not in floats
        ]
        return None if None in parts else " or ".join(parts)  # pyright: ignore
    if isinstance(constraint, ParamAttrConstraint):
        return _parametrized_description(constraint)
    if isinstance(constraint, BaseAttr):
        if _is_float(constraint):
            return constraint.attr.name
        return _type_description(constraint.attr)
    if isinstance(constraint, EqAttrConstraint):  # one type: its name (`i1`)
        return (
            str(constraint.attr) if isinstance(constraint.attr, TypeAttribute) else None
        )
    return None


def _is_float(constraint: object) -> bool:
    return isinstance(constraint, BaseAttr) and issubclass(constraint.attr, AnyFloat)


_ELEMENT_PARAMETER = {VectorType: (0, "vector"), TensorType: (1, "tensor")}
"""Which parameter of a shaped type is its element type, and the type's word."""


def _parametrized_description(constraint: ParamAttrConstraint) -> str | None:
    base, params = constraint.base_attr, constraint.param_constrs
    if base is IntegerType and len(params) == 2:
        signedness = params[1]
        if isinstance(signedness, EqAttrConstraint) and signedness.attr == (
            SignednessAttr(Signedness.SIGNLESS)
        ):
            return "signless integer"
    if base in _ELEMENT_PARAMETER:
        k, word = _ELEMENT_PARAMETER[base]
        element = _description(params[k]) if k < len(params) else None
        if element is not None and " or " in element:
            element = f"({element})"
        return None if element is None else f"{word} of {element}"
    return None


_CUSTOM_OP = re.compile(r"^(?P<prefix>custom op '[^']*' )(?P<rest>.*)$", re.DOTALL)
_EXPECTED = re.compile(r"^Expected (?P<rest>.*?)!?$")
_REDEFINED = re.compile(r"^SSA value (?P<name>%\S+) is already defined")
_QUOTED_EXPECTED = re.compile(r"^(?P<token>'[^']*') expected$")
_USED_WITH = re.compile(
    r"^operand is used with type (?P<now>.+), but has been previously used or "
    r"defined with type (?P<before>.+)$"
)
_BIND = re.compile(r"^Operation has (?P<has>\d+) results, but was given (?P<given>\d+)")
_PARSER_WORDS = {
    "Expected region": "expected '{' to begin a region",
    "Expected primary expression": "expected affine expression",
    "Expected integer literal": "expected attribute value",
    "attribute expected": "expected attribute value",
    "Expected block argument": "expected SSA operand",
}


def parser_message(text: str, span: Span | None = None) -> str:
    """A message of xDSL's parser in MLIR's words: `'[' expected` and
    `Expected '='` are "expected '['" and "expected '='" (`span`: where the
    error is, for the messages that name what is there)."""
    if match := _REDEFINED.match(text):
        return f"redefinition of SSA value '{match['name']}'"
    if (match := _USED_WITH.match(text)) and span is not None:
        return (
            f"use of value '{span.text}' expects different type than prior uses: "
            f"'{match['now']}' vs '{match['before']}'"
        )
    if match := _BIND.match(text):
        if match["has"] == "0":
            return "cannot name an operation with no results"
        return (
            f"operation defines {match['has']} results but was provided "
            f"{match['given']} to bind"
        )
    if match := _CUSTOM_OP.match(text):
        return match["prefix"] + parser_message(match["rest"], span)
    stripped = text.rstrip("!").rstrip(".")
    if stripped in _PARSER_WORDS:
        return _PARSER_WORDS[stripped]
    if stripped.startswith("Expected one of `>=`, `<=`, `==`"):
        return (
            "expected '== affine-expr' or '>= affine-expr' at end of affine constraint"
        )
    if match := _QUOTED_EXPECTED.match(stripped):
        return f"expected {match['token']}"
    if match := _EXPECTED.match(text):
        return f"expected {match['rest']}"
    return text


# -- where and how a parse error is reported ---------------------------------------


RESULT_LIST = r"(?:%[\w$.-]+(?::\d+)?\s*(?:,\s*%[\w$.-]+(?::\d+)?\s*)*=\s*)?"
"""The results an op binds (`%a, %b:2 = `), before its name (a pattern)."""
_CUSTOM_OP_NAME = re.compile(RESULT_LIST + r"(?P<name>[A-Za-z_][\w$]*\.[\w$.]+)")
_GENERIC_EXPECTATION = re.compile(r"^Expected |.* expected!?$")
"""The parser's own token checks (`Expected '='`, `'[' expected`), which MLIR's
parser reports as they are, where an op's parser adds `custom op 'name'`."""
_NOT_THE_OPS_OWN = (
    "unregistered operation",
    "use of undeclared",
    "region entry argument",
    "result number not allowed",
    "redefinition of",
    "SSA value %",
    "custom op '",
    "Dialect `",
    "operand is used with type",  # a use's, and MLIR's parser's own
    "Operation has",
    "reference to an undefined block",
    "expected the number of strides",  # a type's
    "constant too large for index",  # an affine expression's literal
    "integer constant out of range for attribute",  # an attribute's
)


def in_custom_op(error: ParseError, op_start: Span) -> ParseError:
    """`error`, raised while parsing the op at `op_start`, prefixed `custom op
    'name'` as MLIR prefixes what an op's own parser reports, when the op is
    written in its custom form (the innermost such op: outer ones see the prefix)."""
    if error.msg.startswith(_NOT_THE_OPS_OWN) or _GENERIC_EXPECTATION.match(error.msg):
        return error
    match = _CUSTOM_OP_NAME.match(op_start.input.content, op_start.start)
    if match is None:
        return error
    # `replace` keeps what a subclass carries (a NotedParseError's notes)
    return dataclasses.replace(error, msg=f"custom op '{match['name']}' {error.msg}")


def after_previous_token(span: Span, line: int, col: int) -> tuple[int, int]:
    """Where MLIR reports a missing token that the next line's first token stands
    in for: just after the last token before it (comments and blank lines skipped),
    so that the error names the line that lacks it."""
    text = span.input.content
    line_start = text.rfind("\n", 0, span.start) + 1
    if text[line_start : span.start].strip():
        return line, col
    lines = text[:line_start].split("\n")[:-1]
    for k in range(len(lines) - 1, -1, -1):
        code = lines[k].split("//", 1)[0].rstrip()
        if code:
            return k + 1, len(code) + 1
    return line, col
