"""affinec's own ops and attribute names.

`affinec.padded_load` is the reference design's `affine.padded.load`: an affine load
whose out-of-bounds accesses read zero, so zero padding of a convolution needs no
pre-padded copy of its input:

    %a = affinec.padded_load %in[%n, %c, %oh * 2 + %r - 3, %ow * 2 + %s - 3]
        : memref<1x4x224x224xf16>

`affinec.element_pointer` is the address of one element of a row-major memref, as an
LLVM pointer in the memref's memory space (global memory, space 0 at the gpu level,
is `!llvm.ptr<1>`): what `convert-nvgpu-to-nvvm` gives the nvvm ops that take
pointers, while the rest of the kernel still uses memrefs. `convert-gpu-to-nvvm`
lowers it like any memref access, to a `getelementptr`:

    %p = affinec.element_pointer %tile[%i, %j] : memref<16x16xf16, 3> -> !llvm.ptr<3>

Attribute names that passes read and write:

- `affinec.mapping` on an `affine.parallel`: `"grid"` (one iteration per GPU block),
  `"block"` (iterations the threads of a block share, set by tiling) or `"thread"`
  (one iteration per thread of the block, set by `affinec-map-threads`).
- `affinec.tile` on an `affine.for`: a loop over the tiles of a reduction dimension,
  made by tiling.
- `affinec.unroll` on a loop: unroll it fully (set by the GPU mapping).
- `affinec.spec` on the module: the spec the frontend built it from, so a checker can
  rebuild the float64 reference (`read_spec`).
- `affinec.launch` on a kernel function: its launch record (`LaunchRecord`).
- `affinec.splits` on an `affine.parallel`: its leading dimension is the split of
  its reduction (`affinec-split-reduction`); `affinec.workspace` on a function's
  argument: a buffer the caller provides for the kernels' partial results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StringAttr,
    i64,
)
from xdsl.dialects.llvm import LLVMPointerType
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from affinec.base.diagnostics import OpError, PassError
from affinec.base.spec import Spec, parse_spec
from affinec.dialects.affine import AffineLoadBase
from affinec.dialects.affinec_wgmma import WGMMA_STEP_OPS

if TYPE_CHECKING:
    import numpy as np

MAPPING = "affinec.mapping"
"""Attribute on `affine.parallel`: which level of the GPU its iterations map to."""

GRID = "grid"
BLOCK = "block"
THREAD = "thread"
MAPPING_LEVELS = (GRID, BLOCK, THREAD)

TILE = "affinec.tile"
"""Unit attribute `affine-loop-tile` puts on the `affine.for` loops that step over the
tiles of a reduction (`%c0`, `%r0`, `%s0`), as opposed to the point loops within a tile:
`affinec-sink` moves the block-level loop below these, and shared-memory promotion
copies one tile's footprint per iteration of them."""

UNROLL = "affinec.unroll"
"""Unit attribute on a loop: unroll it fully. `affinec-map-threads` sets it on a
thread's turn loop over a phase that uses thread-private buffers (indexed by the
turn, they stay in registers only once every index is a constant), or whose block
band carries it (`affinec-stage-output`'s copy-out: a thread's stores go out
together); `lower-affine` and `convert-scf-to-cf` keep it on the loop's back edge and
the emitter hands it to LLVM as `llvm.loop.unroll.full`."""

OVERLAY = "affinec.overlay"
"""Unit attribute on a shared `memref.alloc`: every access to the buffer follows a
barrier after the last access to the block's other shared buffers (their copies
landed), so it may take their bytes (`affinec-mma-sync`'s staged output). The launch
and the kernel carry it as the list of such workgroup attributions' positions;
`affinec-plan-shared-memory` may give it the offset of another buffer
(`affinec.ir.shared_memory_layout`)."""

SHARED_OFFSET = "affinec.shared_offset"
"""`i64` on a shared `memref.alloc`: its byte offset in the block's dynamic shared
memory, as `affinec-plan-shared-memory` decided (a block without it keeps its
buffers in static shared memory)."""

SHARED_OFFSETS = "affinec.shared_offsets"
"""`array<i64>` on a `gpu.launch` and its kernel: the `SHARED_OFFSET`s of its
workgroup attributions, in their order, for `convert-gpu-to-nvvm` to follow."""

SHARED_ALIGNMENTS = "affinec.shared_alignments"
"""`array<i64>` on a kernel: the bytes each workgroup attribution must start on, in
their order (16 when absent); a tile TMA swizzles needs 8 times its swizzle span."""


def shared_alignments(op: Operation) -> list[int]:
    """The `SHARED_ALIGNMENTS` of a kernel, or [] (16 bytes for every buffer)."""
    marked = op.attributes.get(SHARED_ALIGNMENTS)
    return list(marked.get_values()) if isinstance(marked, DenseArrayBase) else []  # pyright: ignore


INDEX_BITWIDTH = "affinec.index_bitwidth"
"""Integer attribute on a kernel `gpu.func`: the width its `index` values may be
lowered to (`affinec-narrow-indices` proves 32 where it can;
`convert-gpu-to-nvvm{index-bitwidth=0}` follows it, 64 without)."""

SPLITS = "affinec.splits"
"""Integer attribute on the `affine.parallel` of partial sums that
`affinec-split-reduction` makes: how many splits its leading dimension counts.
`affine-loop-tile` tiles that dimension by 1 (one split a block) and the others by
its `tile-sizes`, as it tiles the band that combines the splits."""


def split_count(module: Operation) -> int:
    """How many partial sums `module`'s reduction is split into (1: unsplit)."""
    for op in module.walk():
        attr = op.attributes.get(SPLITS)
        if isinstance(attr, IntegerAttr):
            return attr.value.data
    return 1


WORKSPACE = "affinec.workspace"
"""Unit attribute on a function argument (`func.func`'s `arg_attrs`): a buffer of
intermediate results, not an input or the output — the split reduction's partial
sums. Whoever runs the function provides it, uninitialized (the interpreter's
checker and the runtime allocate it; `workspace_types` lists them)."""


def function_named(module: Operation, name: str) -> Operation | None:
    """The `func.func` `@name` at the top of `module` (with a body), if any."""
    for op in module.regions[0].block.ops:
        if op.name == "func.func" and op.properties["sym_name"] == StringAttr(name):
            return op if op.regions[0].blocks else None
    return None


def workspace_flags(fn: Operation) -> list[bool]:
    """Per argument of the function `fn`: whether it is a workspace (`WORKSPACE`)."""
    args = fn.regions[0].blocks[0].args if fn.regions[0].blocks else ()
    attrs = fn.properties.get("arg_attrs") or fn.attributes.get("arg_attrs")
    marks = attrs.data if isinstance(attrs, ArrayAttr) else ()
    flags = [isinstance(d, DictionaryAttr) and WORKSPACE in d.data for d in marks]
    return (flags + [False] * len(args))[: len(args)]


def workspace_types(fn: Operation) -> list[MemRefType]:
    """The types of `fn`'s workspace arguments (`WORKSPACE`), which come last."""
    args = fn.regions[0].blocks[0].args if fn.regions[0].blocks else ()
    return [
        a.type  # pyright: ignore[reportReturnType]
        for a, flag in zip(args, workspace_flags(fn), strict=True)
        if flag
    ]


SPEC = "affinec.spec"
"""Module attribute recording the spec the frontend built the module from, as the
spec's one-line text form (`"conv n=1 c=8 h=8 ... dtype=f32 epilogue=none"`, see
`affinec.base.spec.parse_spec`). It survives every pass, so a checker at any level can
rebuild the random inputs and the float64 reference. Read it with `read_spec`."""


class SpecAttributeError(ValueError):
    """The module has no `affinec.spec` attribute, or one that is not a valid spec."""


def write_spec(module: Operation, spec: Spec) -> None:
    """Record `spec` on `module` (the frontend does, for every module it builds)."""
    module.attributes[SPEC] = StringAttr(spec.to_text())


def read_spec(module: Operation, *, required: bool = True) -> Spec | None:
    """The spec recorded on `module`: the one reader of the attribute.

    A module without the attribute is an error when `required` (the message says how
    to get one), else None; an attribute that is not a valid spec is always an error.
    """
    attr = module.attributes.get(SPEC)
    if attr is None:
        if not required:
            return None
        raise SpecAttributeError(
            f"the module has no '{SPEC}' attribute, so there is no spec to check "
            "against (generate the IR with `affinec gen`, which records it)"
        )
    if not isinstance(attr, StringAttr):
        raise SpecAttributeError(f"'{SPEC}' must be a string, got {attr}")
    try:
        return parse_spec(attr.data)
    except ValueError as e:
        raise SpecAttributeError(
            f"the module's '{SPEC}' attribute is invalid: {e}"
        ) from None


def required_spec(module: Operation, pass_name: str) -> Spec:
    """The spec recorded on `module`, for a pass that needs it: a `PassError` located
    at the module when it records none, or one that is not a valid spec."""
    try:
        spec = read_spec(module)
    except SpecAttributeError as e:
        raise PassError(module, f"{pass_name} needs the module's spec: {e}") from None
    assert spec is not None
    return spec


def mapping_of(op: Operation) -> str | None:
    """The GPU level an `affine.parallel` is mapped to, if any; a located error for a
    mapping attribute that names no level."""
    attr = op.attributes.get(MAPPING)
    if attr is None:
        return None
    if not isinstance(attr, StringAttr) or attr.data not in MAPPING_LEVELS:
        levels = ", ".join(f'"{m}"' for m in MAPPING_LEVELS)
        raise OpError(op, f"'{MAPPING}' must be one of {levels}, got {attr}")
    return attr.data


def enclosing_mappings(op: Operation) -> list[str]:
    """The mappings of the mapped `affine.parallel` bands around `op`, innermost
    first."""
    found: list[str] = []
    parent = op.parent_op()
    while parent is not None:
        if parent.name == "affine.parallel" and (m := mapping_of(parent)):
            found.append(m)
        parent = parent.parent_op()
    return found


def in_grid_band(op: Operation) -> bool:
    """Whether `op` lies in a band mapped to the grid (not yet to threads)."""
    return GRID in enclosing_mappings(op)


@irdl_op_definition
class PaddedLoadOp(AffineLoadBase):
    """An `affine.load` that reads zero wherever the access falls outside the memref.

    `{in_bounds = array<i64: 0>}` (as MLIR's `vector.transfer_read` says it) lists
    the dimensions whose index is known to lie inside: those are never tested. A
    kernel cannot test an index against a size it is not told (the dynamic batch
    of a bare-pointer memref), so such a dimension must be listed; the interpreter
    checks the claim on every access."""

    name = "affinec.padded_load"

    def __init__(
        self,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap | None = None,
        in_bounds: Sequence[int] = (),
    ):
        super().__init__(memref, indices, m)
        if in_bounds:
            self.attributes[IN_BOUNDS] = DenseArrayBase.from_list(
                i64, sorted(in_bounds)
            )

    @property
    def in_bounds(self) -> frozenset[int]:
        """The dimensions whose index is known to be inside the memref."""
        attr = self.attributes.get(IN_BOUNDS)
        if not isinstance(attr, DenseArrayBase):
            return frozenset()
        return frozenset(attr.get_values())  # pyright: ignore[reportArgumentType]

    def verify_(self) -> None:
        super().verify_()
        attr = self.attributes.get(IN_BOUNDS)
        if attr is None:
            return
        rank = len(self.map.data.results)
        if not isinstance(attr, DenseArrayBase) or not all(
            isinstance(d, int) and 0 <= d < rank for d in attr.get_values()
        ):
            raise VerifyException(
                f"{IN_BOUNDS} must be an array<i64> of dimensions below {rank}, got {attr}"
            )


IN_BOUNDS = "in_bounds"


GLOBAL_POINTER_SPACE = 1
"""The LLVM address space of a memref without a memory space (global memory)."""


def pointer_space(t: MemRefType) -> int:
    """The LLVM address space a memref's elements live in."""
    space = t.memory_space
    if isinstance(space, IntegerAttr) and space.value.data:
        return space.value.data
    return GLOBAL_POINTER_SPACE


@irdl_op_definition
class ElementPointerOp(IRDLOperation):
    """`affinec.element_pointer %buf[%i, %j] : memref<...> -> !llvm.ptr<N>`: the
    address of one element of a row-major memref, statically shaped but perhaps for
    its outermost size. Computing it
    reads nothing (like `getelementptr`, the indices are not bounds-checked)."""

    name = "affinec.element_pointer"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(LLVMPointerType)

    traits = traits_def(Pure())

    assembly_format = (
        "$memref `[` $indices `]` attr-dict `:` type($memref) `->` type($result)"
    )

    def __init__(self, memref: SSAValue | Operation, indices):
        ref = SSAValue.get(memref)
        assert isinstance(ref.type, MemRefType)
        super().__init__(
            operands=[ref, [SSAValue.get(i) for i in indices]],
            result_types=[LLVMPointerType(IntAttr(pointer_space(ref.type)))],
        )

    def verify_(self) -> None:
        t = self.memref.type
        assert isinstance(t, MemRefType)
        # the outermost size may be dynamic (a batch): no stride depends on it
        if not isinstance(t.layout, NoneAttr) or any(d < 0 for d in t.get_shape()[1:]):
            raise VerifyException(
                "expected a row-major memref, statically shaped but for its "
                f"outermost size, got {t}"
            )
        if len(self.indices) != t.get_num_dims():
            raise VerifyException(
                f"expected {t.get_num_dims()} indices for {t}, got {len(self.indices)}"
            )
        expected = LLVMPointerType(IntAttr(pointer_space(t)))
        if self.result.type != expected:
            raise VerifyException(
                f"the elements of {t} are at {expected}, got {self.result.type}"
            )


def _batch_grid(attr: Attribute | None) -> AffineMap | None:
    if attr is None:
        return None
    if not isinstance(attr, AffineMapAttr) or (
        attr.data.num_dims,
        attr.data.num_symbols,
        len(attr.data.results),
    ) != (1, 0, 1):
        raise ValueError(f"batch_grid must be a map (d0) -> (blocks), got {attr}")
    return attr.data


# -- the launch record ------------------------------------------------------------------
# The launch record: what the host needs to launch a kernel, kept in the IR.

# `gpu-kernel-outlining` writes it on the kernel (`gpu.func`, then the `llvm.func` it
# lowers to) as one dictionary attribute, so that it survives every later level and
# `affinec-opt` shows it:

#    affinec.launch = {kernel = "conv_kernel", host = "conv",
#                      grid = array<i64: 98, 1, 1>, block = array<i64: 256, 1, 1>,
#                      dynamic_shared_memory = 0 : i64,
#                      arguments = ["input", "filter", "output"],
#                      argument_types = [memref<1x4x28x28xf32>, ...],
#                      outputs = ["output"]}

# `LaunchRecord` reads and writes that attribute. The kernel's parameters are the host
# function's arguments named in `arguments`, in that order, each passed as a pointer to
# its (C-contiguous) buffer; `outputs` names those the kernel writes.
#
LAUNCH = "affinec.launch"
"""The attribute holding the launch record, on the kernel function."""


@dataclass(frozen=True)
class KernelArgument:
    """A kernel parameter: the host argument it takes, and that buffer's shape."""

    name: str
    type: MemRefType

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.type.get_shape())

    @property
    def dtype(self) -> np.dtype:
        from affinec.base.dtypes import numpy_dtype

        return numpy_dtype(self.type.get_element_type())


@dataclass(frozen=True)
class LaunchRecord:
    """How to launch one kernel: entry point, geometry, shared memory, parameters."""

    kernel: str
    """The kernel's name: the PTX entry point."""
    host: str
    """The host function the kernel was outlined from (`conv`)."""
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_memory: int
    """Bytes of dynamic shared memory per block (static shared memory is in the PTX)."""
    arguments: tuple[KernelArgument, ...]
    outputs: tuple[str, ...] = ()
    """The arguments the kernel writes (the others it only reads)."""
    tensor_map_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """A tensor-map argument's view of its array where it is not the array's own
    shape (the same bytes, C-contiguous): (argument, shape)."""
    batch_grid: AffineMap | None = None
    """For a kernel of any batch (the outermost size of its dynamic arguments): the
    grid's blocks along x as a function of the batch (`(d0) -> (d0 * 36)`); `grid`
    then holds 0 there."""

    @property
    def grid_text(self) -> str:
        """The grid as the command lines print it: `(36, 1, 1)`, or with the
        batch's share spelled out (`(batch * 36, 1, 1)`)."""
        if self.batch_grid is None:
            return str(self.grid)
        (x,) = self.batch_grid.results
        blocks = str(x).replace("d0", "batch")
        return f"({blocks}, {self.grid[1]}, {self.grid[2]})"

    def grid_for(self, batch: int | None) -> tuple[int, int, int]:
        """The grid of a launch over `batch` images (None: the kernel's own)."""
        if self.batch_grid is None:
            return self.grid
        if batch is None:
            raise ValueError(f"kernel {self.kernel} needs a batch to size its grid")
        (blocks,) = self.batch_grid.eval([batch], [])
        return (blocks, self.grid[1], self.grid[2])

    def to_attribute(self) -> DictionaryAttr:
        return DictionaryAttr(
            {
                "kernel": StringAttr(self.kernel),
                "host": StringAttr(self.host),
                "grid": DenseArrayBase.from_list(i64, self.grid),
                "block": DenseArrayBase.from_list(i64, self.block),
                "dynamic_shared_memory": IntegerAttr(self.dynamic_shared_memory, i64),
                "arguments": ArrayAttr([StringAttr(a.name) for a in self.arguments]),
                "argument_types": ArrayAttr([a.type for a in self.arguments]),
                "outputs": ArrayAttr([StringAttr(n) for n in self.outputs]),
                **(
                    {
                        "tensor_map_shapes": DictionaryAttr(
                            {
                                name: DenseArrayBase.from_list(i64, shape)
                                for name, shape in self.tensor_map_shapes
                            }
                        )
                    }
                    if self.tensor_map_shapes
                    else {}
                ),
                **(
                    {"batch_grid": AffineMapAttr(self.batch_grid)}
                    if self.batch_grid is not None
                    else {}
                ),
            }
        )

    @staticmethod
    def from_attribute(attr: Attribute) -> LaunchRecord:
        if not isinstance(attr, DictionaryAttr):
            raise ValueError(f"'{LAUNCH}' must be a dictionary, got {attr}")
        d = attr.data
        try:
            names = [a.data for a in d["arguments"].data]  # pyright: ignore
            types = list(d["argument_types"].data)  # pyright: ignore
            return LaunchRecord(
                kernel=d["kernel"].data,  # pyright: ignore
                host=d["host"].data,  # pyright: ignore
                grid=tuple(d["grid"].get_values()),  # pyright: ignore
                block=tuple(d["block"].get_values()),  # pyright: ignore
                dynamic_shared_memory=d["dynamic_shared_memory"].value.data,  # pyright: ignore
                arguments=tuple(
                    KernelArgument(n, t) for n, t in zip(names, types, strict=True)
                ),
                outputs=tuple(a.data for a in d["outputs"].data),  # pyright: ignore
                tensor_map_shapes=tuple(
                    (name, tuple(shape.get_values()))  # pyright: ignore
                    for name, shape in (
                        d["tensor_map_shapes"].data.items()  # pyright: ignore
                        if "tensor_map_shapes" in d
                        else ()
                    )
                ),
                batch_grid=_batch_grid(d.get("batch_grid")),
            )
        except (KeyError, AttributeError, TypeError, ValueError) as e:
            raise ValueError(f"malformed '{LAUNCH}' attribute {attr}: {e}") from None

    @staticmethod
    def of(kernel: Operation) -> LaunchRecord | None:
        """The record on a kernel function, if it has one."""
        attr = kernel.attributes.get(LAUNCH)
        return None if attr is None else LaunchRecord.from_attribute(attr)


Affinec = Dialect("affinec", [PaddedLoadOp, ElementPointerOp, *WGMMA_STEP_OPS], [])
