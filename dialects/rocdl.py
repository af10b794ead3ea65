"""`#rocdl.target`, the target attribute of a `gpu.module` compiled for AMD GPUs.

affinec emits no AMD code; it reads and prints the attribute as MLIR does, so that a
`gpu.module @m [#nvvm.target, #rocdl.target<chip = "gfx90a">]` (a module compiled
for both vendors) round-trips. Its options are MLIR's, printed in MLIR's order:
`O`, `triple`, `chip`, `features` and `abi` take MLIR's defaults when left out (and
are printed only when they differ from them); `flags` and `link` are printed when
given, even empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntAttr,
    NoneAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition, param_def
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from affinec.dialects.target_options import parse_target_options, print_target_options

_DEFAULTS: dict[str, Attribute] = {
    "O": IntAttr(2),
    "triple": StringAttr("amdgcn-amd-amdhsa"),
    "chip": StringAttr("gfx900"),
    "features": StringAttr(""),
    "abi": StringAttr("600"),
    "flags": NoneAttr(),
    "link": NoneAttr(),
}
"""MLIR's options in its order; `NoneAttr` stands for an option not given."""

_KINDS: dict[str, type[Attribute]] = {"flags": DictionaryAttr, "link": ArrayAttr}


@irdl_attr_definition
class RocdlTargetAttr(ParametrizedAttribute):
    """`#rocdl.target<O = 3, chip = "gfx90a", flags = {fast}>`: MLIR's target
    attribute for AMD GPUs, read and printed back."""

    name = "rocdl.target"

    opt_level: IntAttr = param_def()
    """MLIR's `O`."""
    triple: StringAttr = param_def()
    chip: StringAttr = param_def()
    features: StringAttr = param_def()
    abi: StringAttr = param_def()
    flags: DictionaryAttr | NoneAttr = param_def()
    link: ArrayAttr | NoneAttr = param_def()

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def parse_value(key: str, pos: int) -> Attribute:
            value = parser.parse_attribute()
            if not isinstance(value, _KINDS[key]):
                parser.raise_error(
                    f"failed to parse ROCDLTargetAttr parameter '{key}'", pos
                )
            if isinstance(value, DictionaryAttr):
                # MLIR keeps a dictionary's entries sorted
                value = DictionaryAttr(dict(sorted(value.data.items())))
            return value

        return parse_target_options(
            parser,
            _DEFAULTS,
            "duplicate or unknown struct parameter name: {key}",
            parse_value,
        )

    def print_parameters(self, printer: Printer) -> None:
        print_target_options(printer, _DEFAULTS, self.parameters)


ROCDL = Dialect("rocdl", [], [RocdlTargetAttr])
"""Only the target attribute of MLIR's `rocdl` dialect."""

__all__ = ["ROCDL", "RocdlTargetAttr"]
