"""An nvvm dialect named after MLIR's: NVIDIA's special registers and barriers.

Each op stands for one LLVM intrinsic, named in the op class's `INTRINSIC` (the emitter
calls it; nothing else needs to know):

    %tid = nvvm.read.ptx.sreg.tid.x : i32      // llvm.nvvm.read.ptx.sreg.tid.x
    nvvm.barrier0                              // llvm.nvvm.barrier.cta.sync.aligned.all(0)

Later levels add `mma.sync`, `ldmatrix` and `cp.async`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntAttr,
    IntegerType,
    StringAttr,
    i32,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    param_def,
    result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer


class SpecialRegisterOp(IRDLOperation):
    """`%r = nvvm.read.ptx.sreg.<name> : i32`: a PTX special register, as an i32."""

    INTRINSIC: ClassVar[str]
    UPPER_BOUND: ClassVar[int | None] = None
    """The register's values lie in `[0, upper_bound)` (LLVM knows it too).."""

    res = result_def(IntegerType)
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self):
        super().__init__(result_types=[i32])


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """`nvvm.barrier0`: `bar.sync 0`, CUDA's `__syncthreads()`."""

    name = "nvvm.barrier0"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.barrier.cta.sync.aligned.all"
    INTRINSIC_ARGS: ClassVar[tuple[int, ...]] = (0,)
    """Constant i32 arguments the intrinsic takes: barrier 0."""

    assembly_format = "attr-dict"


def _sreg(register: str, bound: int | None) -> type[SpecialRegisterOp]:
    name = f"nvvm.read.ptx.sreg.{register}"

    class Op(SpecialRegisterOp):
        INTRINSIC: ClassVar[str] = f"llvm.{name}"
        UPPER_BOUND: ClassVar[int | None] = bound

    Op.name = name  # pyright: ignore[reportAttributeAccessIssue]
    Op.__name__ = Op.__qualname__ = (
        "".join(p.capitalize() for p in register.split(".")) + "Op"
    )
    Op.__doc__ = f"`%r = {name} : i32`."
    return irdl_op_definition(Op)


KERNEL = "nvvm.kernel"
"""Unit attribute marking an `llvm.func` as a kernel entry point (MLIR's name)."""

MAXNTID = "nvvm.maxntid"
"""Attribute on a kernel `llvm.func`: the most threads per block it is launched with."""

MINCTASM = "nvvm.minctasm"
"""Integer attribute on a kernel `llvm.func`: the fewest blocks per multiprocessor
the kernel must allow (PTX `.minnctapersm`). With `.maxntid` alone ptxas may cap the
registers for an occupancy of its own choosing and spill a register tile; saying
one block is enough lets it keep the tile in registers."""

_MAX_BLOCK = 1024
_MAX_GRID = (1 << 31) - 1

ThreadIdXOp = _sreg("tid.x", _MAX_BLOCK)
ThreadIdYOp = _sreg("tid.y", _MAX_BLOCK)
ThreadIdZOp = _sreg("tid.z", 64)
BlockDimXOp = _sreg("ntid.x", _MAX_BLOCK + 1)
BlockDimYOp = _sreg("ntid.y", _MAX_BLOCK + 1)
BlockDimZOp = _sreg("ntid.z", 65)
BlockIdXOp = _sreg("ctaid.x", _MAX_GRID)
BlockIdYOp = _sreg("ctaid.y", 65535)
BlockIdZOp = _sreg("ctaid.z", 65535)
GridDimXOp = _sreg("nctaid.x", _MAX_GRID + 1)
GridDimYOp = _sreg("nctaid.y", 65536)
GridDimZOp = _sreg("nctaid.z", 65536)
LaneIdOp = _sreg("laneid", 32)
WarpSizeOp = _sreg("warpsize", 33)

SPECIAL_REGISTERS: dict[tuple[str, str], type[SpecialRegisterOp]] = {
    ("thread_id", "x"): ThreadIdXOp,
    ("thread_id", "y"): ThreadIdYOp,
    ("thread_id", "z"): ThreadIdZOp,
    ("block_dim", "x"): BlockDimXOp,
    ("block_dim", "y"): BlockDimYOp,
    ("block_dim", "z"): BlockDimZOp,
    ("block_id", "x"): BlockIdXOp,
    ("block_id", "y"): BlockIdYOp,
    ("block_id", "z"): BlockIdZOp,
    ("grid_dim", "x"): GridDimXOp,
    ("grid_dim", "y"): GridDimYOp,
    ("grid_dim", "z"): GridDimZOp,
}
"""The register behind each gpu id/size op, by (gpu op kind, dimension)."""


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
        given: dict[str, Attribute] = {}

        def parse_option() -> None:
            pos = parser.pos
            key = parser.parse_identifier()
            if key not in _TARGET_DEFAULTS or key in given:
                parser.raise_error(f"unexpected or repeated option '{key}'", pos)
            parser.parse_punctuation("=")
            if key == "O":
                given[key] = IntAttr(parser.parse_integer(allow_boolean=False))
            elif key == "verifyTarget":
                given[key] = IntAttr(int(parser.parse_boolean()))
            elif key in ("flags", "link"):
                value = parser.parse_attribute()
                if not isinstance(value, type(_TARGET_DEFAULTS[key])):
                    parser.raise_error(f"unexpected value for '{key}'", pos)
                given[key] = value
            else:
                given[key] = StringAttr(parser.parse_str_literal())

        opened = parser.parse_optional_punctuation("<") is not None
        if opened and parser.parse_optional_punctuation(">") is None:
            parser.parse_comma_separated_list(parser.Delimiter.NONE, parse_option)
            parser.parse_punctuation(">")
        return tuple(given.get(k, d) for k, d in _TARGET_DEFAULTS.items())

    def print_parameters(self, printer: Printer) -> None:
        options = [
            (key, value)
            for (key, default), value in zip(
                _TARGET_DEFAULTS.items(), self.parameters, strict=True
            )
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
                text = str(value.data)
                if key == "verifyTarget":
                    text = "true" if value.data else "false"
                printer.print_string(text)
            else:
                printer.print_attribute(value)
        printer.print_string(">")


NVVM = Dialect(
    "nvvm",
    [
        BarrierOp,
        *SPECIAL_REGISTERS.values(),
        LaneIdOp,
        WarpSizeOp,
    ],
    [TargetAttr],
)
