"""The option list of MLIR's GPU target attributes, `#nvvm.target<O = 3, chip =
"sm_90">` and `#rocdl.target<chip = "gfx90a">`: `key = value` pairs in any order,
each key at most once, printed back in the attribute's order and only where they
differ from its defaults."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Attribute
from xdsl.parser import AttrParser
from xdsl.printer import Printer


def parse_target_options(
    parser: AttrParser,
    defaults: Mapping[str, Attribute],
    bad_key: str,
    parse_other: Callable[[str, int], Attribute],
) -> tuple[Attribute, ...]:
    """The attribute's parameters, in the order of `defaults` (an option left out
    takes its default), from an optional `<key = value, ...>`.

    `O` is an integer and an option whose default is a string is a string literal;
    `parse_other(key, pos)` reads the value of any other option, `pos` being where
    its key starts. `bad_key` is the error for an unknown or repeated key, with
    `{key}` standing for it."""
    given: dict[str, Attribute] = {}

    def parse_option() -> None:
        pos = parser.pos
        key = parser.parse_identifier()
        if key not in defaults or key in given:
            parser.raise_error(bad_key.format(key=key), pos)
        parser.parse_punctuation("=")
        if key == "O":
            given[key] = IntAttr(parser.parse_integer(allow_boolean=False))
        elif isinstance(defaults[key], StringAttr):
            given[key] = StringAttr(parser.parse_str_literal())
        else:
            given[key] = parse_other(key, pos)

    opened = parser.parse_optional_punctuation("<") is not None
    if opened and parser.parse_optional_punctuation(">") is None:
        parser.parse_comma_separated_list(parser.Delimiter.NONE, parse_option)
        parser.parse_punctuation(">")
    return tuple(given.get(key, default) for key, default in defaults.items())


def print_target_options(
    printer: Printer,
    defaults: Mapping[str, Attribute],
    values: Sequence[Attribute],
    booleans: Collection[str] = (),
) -> None:
    """`<key = value, ...>` for the options whose value differs from its default,
    in the order of `defaults`; nothing when none does. An integer option in
    `booleans` prints as `true` or `false`."""
    options = [
        (key, value)
        for (key, default), value in zip(defaults.items(), values, strict=True)
        if value != default
    ]
    if not options:
        return
    printer.print_string("<")
    for k, (key, value) in enumerate(options):
        if k:
            printer.print_string(", ")
        printer.print_string(f"{key} = ")
        if isinstance(value, IntAttr):
            if key in booleans:
                printer.print_string("true" if value.data else "false")
            else:
                printer.print_string(str(value.data))
        else:
            printer.print_attribute(value)
    printer.print_string(">")
