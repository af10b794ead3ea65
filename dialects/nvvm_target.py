"""What an NVIDIA kernel is compiled for: the names of the attributes that mark an
`llvm.func` as a kernel and bound its launches (`nvvm.kernel`, `nvvm.maxntid`,
`nvvm.minctasm`), and `#nvvm.target`, the target of a `gpu.module`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Operation, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition, param_def
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from affinec.base.diagnostics import OpError
from affinec.dialects.target_options import parse_target_options, print_target_options
from affinec.hardware.chips import Chip, chip

KERNEL = "nvvm.kernel"
"""Unit attribute marking an `llvm.func` as a kernel entry point (MLIR's name)."""

MAXNTID = "nvvm.maxntid"
"""Attribute on a kernel `llvm.func`: the most threads per block it is launched with."""

GRID_CONSTANT = "nvvm.grid_constant"
"""Unit attribute on a kernel `llvm.func`'s by-value argument: read where the launch
put it (PTX `cvta.param`), never copied to local memory, never written."""

BYVAL = "llvm.byval"
"""A pointer argument's attribute naming the type it passes by value (LLVM's
`byval(T)`); with `llvm.align`, the parameter's alignment."""

MINCTASM = "nvvm.minctasm"
"""Integer attribute on a kernel `llvm.func`: the fewest blocks per multiprocessor
the kernel must allow (PTX `.minnctapersm`). With `.maxntid` alone ptxas may cap the
registers for an occupancy of its own choosing and spill a register tile; saying
one block is enough lets it keep the tile in registers."""


_TARGET_DEFAULTS: dict[str, Attribute] = {
    "O": IntAttr(2),
    "triple": StringAttr("nvptx64-nvidia-cuda"),
    "chip": StringAttr("sm_50"),
    "features": StringAttr(""),
    "flags": DictionaryAttr({}),
    "link": ArrayAttr([]),
    "verifyTarget": IntAttr(1),
}
"""MLIR's `#nvvm.target` options, in its order, with its defaults."""


@irdl_attr_definition
class TargetAttr(ParametrizedAttribute):
    """`#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">`: what a
    `gpu.module` is compiled for (MLIR's attribute; options left out take MLIR's
    defaults and are not printed)."""

    name = "nvvm.target"

    opt_level: IntAttr = param_def()
    """MLIR's `O`."""
    triple: StringAttr = param_def()
    chip: StringAttr = param_def()
    features: StringAttr = param_def()
    flags: DictionaryAttr = param_def()
    link: ArrayAttr = param_def()
    verifyTarget: IntAttr = param_def()

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def parse_value(key: str, pos: int) -> Attribute:
            if key == "verifyTarget":
                return IntAttr(int(parser.parse_boolean()))
            value = parser.parse_attribute()
            if not isinstance(value, type(_TARGET_DEFAULTS[key])):
                parser.raise_error(f"unexpected value for '{key}'", pos)
            return value

        return parse_target_options(
            parser,
            _TARGET_DEFAULTS,
            "unexpected or repeated option '{key}'",
            parse_value,
        )

    def print_parameters(self, printer: Printer) -> None:
        print_target_options(
            printer, _TARGET_DEFAULTS, self.parameters, booleans=("verifyTarget",)
        )


TARGET = "affinec.target"
"""`#nvvm.target` on the builtin module: the chip every pass plans for, before the
kernel's `gpu.module` exists to carry it (outlining copies it there)."""

DEFAULT_CHIP = "sm_80"
"""The chip of IR that names none (PTX for sm_80 runs on every newer GPU)."""


def target_attr(
    chip_name: str, features: str = "+ptx80", opt_level: int = 3
) -> TargetAttr:
    """`#nvvm.target<O = opt_level, chip = chip_name, features = features>`."""
    defaults = dict(_TARGET_DEFAULTS)
    defaults |= {
        "O": IntAttr(opt_level),
        "chip": StringAttr(chip_name),
        "features": StringAttr(features),
    }
    return TargetAttr(*defaults.values())


def chip_name_of(op: Operation) -> str:
    """The chip `op` is compiled for: its `gpu.module`'s first `#nvvm.target`, else the
    enclosing builtin module's `affinec.target`, else `DEFAULT_CHIP`."""
    node: Operation | None = op
    while node is not None:
        # by name: gpu.module's own module imports this one (its kernels' attributes)
        targets = node.properties.get("targets") if node.name == "gpu.module" else None
        if isinstance(targets, ArrayAttr):
            for t in targets.data:
                if isinstance(t, TargetAttr):
                    return t.chip.data
        target = node.attributes.get(TARGET)
        if isinstance(target, TargetAttr):
            return target.chip.data
        node = node.parent_op()
    return DEFAULT_CHIP


def chip_of(op: Operation) -> Chip:
    """The `Chip` (`affinec.hardware.chips`) `op` is compiled for (see `chip_name_of`); a
    located error for a chip affinec does not know."""
    try:
        return chip(chip_name_of(op))
    except ValueError as e:
        raise OpError(op, str(e)) from None
