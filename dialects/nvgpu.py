"""The nvgpu dialect, as MLIR's: warp-level tensor-core ops and asynchronous copies.

These ops sit between the gpu level and NVVM: they still take memrefs and n-D vectors,
and each stands for one PTX instruction (`convert-nvgpu-to-nvvm` lowers them). The
names, custom syntax and types are MLIR's:

    %a = nvgpu.ldmatrix %sa[%row, %col] {numTiles = 4 : i32, transpose = false}
        : memref<16x16xf16, 3> -> vector<4x2xf16>
    %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]}
        : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
    %t = nvgpu.device_async_copy %src[%i, %j], %dst[%k, %l], 8, %valid
        : memref<64x64xf16> to memref<2x16x40xf16, 3>
    %g = nvgpu.device_async_create_group %t
    nvgpu.device_async_wait %g {numGroups = 1 : i32}

`ldmatrix` and `mma.sync` are warp-collective: the 32 lanes of a warp execute them
together, each lane holding a *fragment* (a few elements) of the warp's matrices. A
fragment is a 2-D vector `vector<R x E x T>`: R 32-bit registers of E elements each,
in the order of the PTX ISA's `a0, a1, ...` (`affinec.ir.mma_layouts` says which
lane holds which matrix element). The supported MMAs (`MMA_KINDS`):

| shape | operands | A | B | C and D |
|---|---|---|---|---|
| m16n8k16 | f16 | vector<4x2xf16> | vector<2x2xf16> | vector<2x2xf32> |
| m16n8k16 | bf16 | vector<4x2xbf16> | vector<2x2xbf16> | vector<2x2xf32> |
| m16n8k8 | f32 with `tf32Enabled` | vector<4x1xf32> | vector<2x1xf32> | vector<2x2xf32> |

Asynchronous copies (`cp.async`) copy 4, 8 or 16 bytes from global to shared memory
per thread without blocking it; each returns a `!nvgpu.device.async.token`.
`device_async_create_group` closes a group of the thread's pending copies, and
`device_async_wait {numGroups = N}` blocks until at most N of the thread's groups are
still in flight (0 when absent). With the optional source-elements operand a copy reads
only that many elements and fills the rest of the destination with zeros (padding
without a branch).

This module defines the dialect, the MMA kinds and the warp-level ops; the
asynchronous copies are in `nvgpu_async_copy`, the checks both share in
`nvgpu_common` (all re-exported here).

The verifiers run MLIR's checks first, in MLIR's order and words (so that an
`expected-error` written against mlir-opt meets affinec-opt), then affinec's own,
stricter where our lowering needs it: memrefs must be row-major (identity layout),
ldmatrix reads 16-bit elements only (the `m8n8.b16` form), mma.sync is one of
`MMA_KINDS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    UnitAttr,
    VectorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import (
    Attribute,
    Dialect,
    Operation,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.memory_effects import AccessesOperands
from affinec.dialects.nvgpu_async_copy import (
    COPY_BYTES,
    DeviceAsyncCopyOp,
    DeviceAsyncCreateGroupOp,
    DeviceAsyncWaitOp,
)
from affinec.dialects.nvgpu_common import (
    NOT_SHARED,
    SHARED_MEMORY_SPACE,
    DeviceAsyncTokenType,
    check_indices,
    check_row_major,
    element_bitwidth,
    memory_space_of,
)
from affinec.dialects.nvgpu_hopper import (
    HOPPER_OPS,
    HOPPER_TYPES,
    MBarrierArriveExpectTxOp,
    MBarrierArriveOp,
    MBarrierCreateOp,
    MBarrierInitOp,
    MBarrierTryWaitParityOp,
    TmaAsyncLoadOp,
    TmaCreateDescriptorOp,
    WarpgroupGenerateDescriptorOp,
    WarpgroupMmaInitAccumulatorOp,
    WarpgroupMmaOp,
    WarpgroupMmaStoreOp,
)
from affinec.dialects.nvgpu_hopper_types import (
    TENSOR_MAP_ALIGNMENT,
    TENSOR_MAP_BYTES,
    MBarrierGroupType,
    MBarrierTokenType,
    TensorMapDescriptorType,
    WarpgroupAccumulatorType,
    WarpgroupMatrixDescriptorType,
)
from affinec.hardware.chips import MMA_SHAPES, WARP_SIZE

# --------------------------------------------------------------------------------------
# MMA shapes and fragments
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MmaKind:
    """One supported `mma.sync`: its shape and the type of its A and B operands
    (`"f16"`, `"bf16"` or `"tf32"`; C and D are always f32)."""

    m: int
    n: int
    k: int
    operands: str

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    @property
    def operand_bits(self) -> int:
        return 32 if self.operands == "tf32" else 16

    @property
    def per_register(self) -> int:
        """Elements of A (or B) in one 32-bit register."""
        return 32 // self.operand_bits

    @property
    def a_fragment(self) -> tuple[int, int]:
        """The shape of a lane's A fragment: (registers, elements per register)."""
        return (self.m * self.k // (WARP_SIZE * self.per_register), self.per_register)

    @property
    def b_fragment(self) -> tuple[int, int]:
        return (self.k * self.n // (WARP_SIZE * self.per_register), self.per_register)

    @property
    def c_fragment(self) -> tuple[int, int]:
        """C and D: f32, two elements per 8x8 tile of the result."""
        return (self.m * self.n // (WARP_SIZE * 2), 2)

    def operand_type(self) -> Attribute:
        return {"f16": Float16Type(), "bf16": BFloat16Type(), "tf32": Float32Type()}[
            self.operands
        ]

    def describe(self) -> str:
        return f"m{self.m}n{self.n}k{self.k} {self.operands}"


MMA_KINDS = tuple(MmaKind(*shape, operands) for operands, shape in MMA_SHAPES.items())
"""The `mma.sync` forms affinec supports (f32 accumulation throughout)."""


def mma_kind(shape: Sequence[int], operand_type: Attribute, tf32: bool) -> MmaKind:
    """The supported MMA of this shape and A/B element type, or a `VerifyException`
    saying what is supported."""
    name = {Float16Type: "f16", BFloat16Type: "bf16"}.get(type(operand_type))
    if isinstance(operand_type, Float32Type):
        if not tf32:
            raise VerifyException(
                "f32 operands need tf32 tensor cores: set tf32Enabled (m16n8k8)"
            )
        name = "tf32"
    elif tf32:
        raise VerifyException(
            f"tf32Enabled is only for f32 operands, got {operand_type}"
        )
    for kind in MMA_KINDS:
        if kind.operands == name and kind.shape == tuple(shape):
            return kind
    supported = ", ".join(k.describe() for k in MMA_KINDS)
    raise VerifyException(
        f"unsupported mma.sync: shape {list(shape)} with {operand_type} operands "
        f"(supported: {supported})"
    )


# --------------------------------------------------------------------------------------
# ldmatrix
# --------------------------------------------------------------------------------------


@irdl_op_definition
class LdMatrixOp(IRDLOperation):
    """`nvgpu.ldmatrix`: the warp loads `numTiles` 8x8 matrices of 16-bit elements
    from shared memory, each lane receiving one 32-bit register (two elements) of each.

        %a = nvgpu.ldmatrix %sa[%row, %col] {numTiles = 4 : i32, transpose = false}
            : memref<16x16xf16, 3> -> vector<4x2xf16>

    Each lane gives the address of one row of one matrix (lanes 8i to 8i+7 the rows
    of matrix i); the row is 8 contiguous elements from `%sa[%row, %col]`, 16-byte
    aligned. With `transpose`, each lane receives a column pair instead of a row pair.
    """

    name = "nvgpu.ldmatrix"

    srcMemref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    transpose = prop_def(IntegerAttr)
    numTiles = prop_def(IntegerAttr)
    res = result_def(VectorType)

    traits = traits_def(AccessesOperands(reads=("srcMemref",)))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$srcMemref `[` $indices `]` attr-dict `:` type($srcMemref) `->` type($res)"
    )

    def __init__(
        self,
        memref: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
        num_tiles: int,
        transpose: bool = False,
    ):
        source = SSAValue.get(memref)
        t = source.type
        assert isinstance(t, MemRefType)
        super().__init__(
            operands=[source, [SSAValue.get(i) for i in indices]],
            properties={
                "transpose": IntegerAttr(int(transpose), i1),
                "numTiles": IntegerAttr(num_tiles, i32),
            },
            result_types=[VectorType(t.get_element_type(), [num_tiles, 2])],
        )

    @property
    def num_tiles(self) -> int:
        return self.numTiles.value.data

    @property
    def is_transposed(self) -> bool:
        return bool(self.transpose.value.data)

    def verify_(self) -> None:
        t = self.srcMemref.type
        assert isinstance(t, MemRefType)
        _mlir_ldmatrix_checks(t, self.res.type, self.num_tiles, self.is_transposed)
        # affinec's own limits, where MLIR accepts more than the lowering emits
        check_row_major("the source", t)
        check_indices("source", t, self.indices)
        element = t.get_element_type()
        if element_bitwidth(element) != 16:
            raise VerifyException(
                f"ldmatrix loads 16-bit elements (m8n8.b16), got {element}"
            )
        if self.num_tiles not in (1, 2, 4):
            raise VerifyException(f"numTiles must be 1, 2 or 4, got {self.num_tiles}")


def _mlir_ldmatrix_checks(
    source: MemRefType, result: Attribute, tiles: int, transposed: bool
) -> None:
    """MLIR's checks of `nvgpu.ldmatrix`, in its order and words."""
    assert isinstance(result, VectorType)
    element = result.get_element_type()
    if source.get_element_type() != element:
        raise VerifyException(
            "failed to verify that srcMemref and res have same element type"
        )
    if memory_space_of(source) != SHARED_MEMORY_SPACE:
        raise VerifyException(f"expected nvgpu.ldmatrix srcMemref {NOT_SHARED}")
    width = element_bitwidth(element)
    if width > 32:
        raise VerifyException("nvgpu.ldmatrix works for 32b or lower")
    if transposed and width != 16:
        raise VerifyException("nvgpu.ldmatrix transpose works only at 16b granularity")
    shape = result.get_shape()
    if len(shape) != 2:
        raise VerifyException("results must be 2 dimensional vector")
    if shape[1] != 32 // width:
        # a 32-bit register of each 8x8 tile per lane
        raise VerifyException(f"expected vector register shape[1] = {32 // width}")
    if shape[0] != tiles:
        raise VerifyException("expected vector register shape[0] and numTiles to match")


# --------------------------------------------------------------------------------------
# mma.sync
# --------------------------------------------------------------------------------------


def _mma_shape(mma_shape: ArrayAttr) -> tuple[int, ...]:
    """The integers of an MMA op's `mmaShape` ([m, n, k] once it verifies)."""
    return tuple(a.value.data for a in mma_shape.data if isinstance(a, IntegerAttr))


def _check_mma_shape(mma_shape: ArrayAttr) -> None:
    if len(_mma_shape(mma_shape)) != 3 or len(mma_shape.data) != 3:
        raise VerifyException(
            f"mmaShape must be three integers [m, n, k], got {mma_shape}"
        )


@irdl_op_definition
class MmaSyncOp(IRDLOperation):
    """`nvgpu.mma.sync`: the warp computes D = A x B + C for one m x n x k tile, each
    lane giving its fragments of A, B and C and receiving its fragment of D.

        %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]}
            : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>

    A is row-major (m x k) and B column-major (k x n): PTX's `.row.col`.
    """

    name = "nvgpu.mma.sync"

    matrixA = operand_def(VectorType)
    matrixB = operand_def(VectorType)
    matrixC = operand_def(VectorType)
    mmaShape = prop_def(ArrayAttr)
    tf32Enabled = opt_prop_def(UnitAttr)
    res = result_def(VectorType)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "`(` $matrixA `,` $matrixB `,` $matrixC `)` attr-dict `:` "
        "`(` type($matrixA) `,` type($matrixB) `,` type($matrixC) `)` `->` type($res)"
    )

    def __init__(
        self,
        a: SSAValue | Operation,
        b: SSAValue | Operation,
        c: SSAValue | Operation,
        shape: Sequence[int] = (16, 8, 16),
        tf32: bool = False,
    ):
        acc = SSAValue.get(c)
        super().__init__(
            operands=[SSAValue.get(a), SSAValue.get(b), acc],
            properties={
                "mmaShape": ArrayAttr([IntegerAttr(s, i64) for s in shape]),
                "tf32Enabled": UnitAttr() if tf32 else None,
            },
            result_types=[acc.type],
        )

    @property
    def shape(self) -> tuple[int, ...]:
        return _mma_shape(self.mmaShape)

    @property
    def kind(self) -> MmaKind:
        """The MMA this op performs (the op must verify)."""
        a = self.matrixA.type
        assert isinstance(a, VectorType)
        return mma_kind(self.shape, a.get_element_type(), self.tf32Enabled is not None)

    def verify_(self) -> None:
        _check_mma_shape(self.mmaShape)
        a, b, c = (v.type for v in (self.matrixA, self.matrixB, self.matrixC))
        assert isinstance(a, VectorType) and isinstance(b, VectorType)
        assert isinstance(c, VectorType)
        element = a.get_element_type()
        _mlir_mma_sync_checks(a, b, c, self.shape, self.tf32Enabled is not None)
        # affinec's own limits: the MMAs of MMA_KINDS, accumulating in f32
        kind = mma_kind(self.shape, element, self.tf32Enabled is not None)
        f32 = Float32Type()
        for what, t, elt, shape in (
            ("A", a, element, kind.a_fragment),
            ("B", b, element, kind.b_fragment),
            ("C", c, f32, kind.c_fragment),
        ):
            expected = VectorType(elt, shape)
            if t != expected:
                raise VerifyException(
                    f"{kind.describe()} takes {what} as {expected} per lane, got {t}"
                )
        if self.res.type != c:
            raise VerifyException(
                f"the result must have C's type {c}, got {self.res.type}"
            )


def _mlir_mma_sync_checks(
    a: VectorType,
    b: VectorType,
    c: VectorType,
    shape: Sequence[int],
    tf32: bool,
    sparse: bool = False,
) -> None:
    """MLIR's checks of `nvgpu.mma.sync` (and, `sparse`, of `nvgpu.mma.sp.sync`,
    whose A holds half the elements), in its order and words: the element counts
    of the warp's fragments, then the shapes of a lane's fragments in fundamental
    8 x 8 tiles (each 128 bits deep, 256 for f64). The words give A's full
    count and shape where a sparse A holds half, as MLIR's do."""
    element = a.get_element_type()
    if b.get_element_type() != element:
        raise VerifyException(
            "failed to verify that matrixA and matrixB have same element type"
        )
    halved = 2 if sparse else 1
    if sparse and isinstance(element, Float64Type):
        raise VerifyException("f64 is not supported for sparse mode")
    if isinstance(element, Float64Type):
        tile_k, per_register = 4, 1
    elif isinstance(element, Float16Type | BFloat16Type | Float32Type) or (
        isinstance(element, IntegerType) and element.width.data in (4, 8)
    ):
        width = element_bitwidth(element)
        tile_k, per_register = 128 // width, 32 // width
    else:
        raise VerifyException(
            "expected input data type (i4,i8,f16,bf16,tf32,f64) supported by "
            "nvgpu.mma.sync"
        )
    for what, t in (("A", a), ("B", b), ("C", c)):
        if len(t.get_shape()) != 2:
            raise VerifyException(f"matrix{what} must be 2 dimensional vector")
    m, n, k = shape
    for what, t, count, held in (
        ("A", a, m * k, m * k // halved),
        ("B", b, k * n, k * n),
        ("C", c, m * n, m * n),
    ):
        rows, columns = t.get_shape()
        if rows * columns * WARP_SIZE != held:
            raise VerifyException(f"expected {count} warp-wide matrix {what} elements")
    if tf32 and not isinstance(element, Float32Type):
        raise VerifyException("expected tf32 tensor cores only for F32 operands")
    tiles_m, tiles_n, tiles_k = m // 8, n // 8, k // tile_k
    for what, t, expected, held in (
        ("A", a, (tiles_m * tiles_k, per_register), tiles_m * tiles_k // halved),
        ("B", b, (tiles_k * tiles_n, per_register), tiles_k * tiles_n),
        ("C", c, (tiles_m * tiles_n, 2), tiles_m * tiles_n),
    ):
        if tuple(t.get_shape()) != (held, expected[1]):
            raise VerifyException(
                f"expected matrix {what} to be shaped ({expected[0]} x {expected[1]})"
            )


@irdl_op_definition
class MmaSparseSyncOp(IRDLOperation):
    """`nvgpu.mma.sp.sync`: `mma.sync` with a 2:4 structured-sparse A (half its
    elements, and `metadata` saying where they sit), as MLIR has it:

        %d = nvgpu.mma.sp.sync (%a, %b, %c) metadata(%m) {mmaShape = [16, 8, 32]}
            : (vector<4x2xf16>, vector<4x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>

    Read, verified (MLIR's checks) and printed back; affinec emits no sparse MMA:
    neither `convert-nvgpu-to-nvvm` nor the interpreter takes it."""

    name = "nvgpu.mma.sp.sync"

    matrixA = operand_def(VectorType)
    matrixB = operand_def(VectorType)
    matrixC = operand_def(VectorType)
    sparseMetadata = operand_def(VectorType(IntegerType(16), [2]))
    mmaShape = prop_def(ArrayAttr)
    sparsitySelector = opt_prop_def(IntegerAttr)
    """Which pair of threads gives the metadata (0 or 1); 0 when absent."""
    tf32Enabled = opt_prop_def(UnitAttr)
    res = result_def(VectorType)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "`(` $matrixA `,` $matrixB `,` $matrixC `)` `metadata` `(` $sparseMetadata "
        "`)` attr-dict `:` `(` type($matrixA) `,` type($matrixB) `,` "
        "type($matrixC) `)` `->` type($res)"
    )

    @property
    def shape(self) -> tuple[int, ...]:
        return _mma_shape(self.mmaShape)

    def verify_(self) -> None:
        selector = self.sparsitySelector
        if selector is not None and selector.value.data not in (0, 1):
            raise VerifyException("sparsity selector should be 0 or 1")
        _check_mma_shape(self.mmaShape)
        a, b, c = (v.type for v in (self.matrixA, self.matrixB, self.matrixC))
        assert isinstance(a, VectorType) and isinstance(b, VectorType)
        assert isinstance(c, VectorType)
        tf32 = self.tf32Enabled is not None
        _mlir_mma_sync_checks(a, b, c, self.shape, tf32, sparse=True)


NVGPU = Dialect(
    "nvgpu",
    [
        LdMatrixOp,
        MmaSyncOp,
        MmaSparseSyncOp,
        DeviceAsyncCopyOp,
        DeviceAsyncCreateGroupOp,
        DeviceAsyncWaitOp,
        *HOPPER_OPS,
    ],
    [DeviceAsyncTokenType, *HOPPER_TYPES],
)

__all__ = [
    "COPY_BYTES",
    "MMA_KINDS",
    "NVGPU",
    "SHARED_MEMORY_SPACE",
    "TENSOR_MAP_ALIGNMENT",
    "TENSOR_MAP_BYTES",
    "WARP_SIZE",
    "DeviceAsyncCopyOp",
    "DeviceAsyncCreateGroupOp",
    "DeviceAsyncTokenType",
    "DeviceAsyncWaitOp",
    "LdMatrixOp",
    "MBarrierArriveExpectTxOp",
    "MBarrierArriveOp",
    "MBarrierCreateOp",
    "MBarrierGroupType",
    "MBarrierInitOp",
    "MBarrierTokenType",
    "MBarrierTryWaitParityOp",
    "MmaKind",
    "MmaSparseSyncOp",
    "MmaSyncOp",
    "TensorMapDescriptorType",
    "TmaAsyncLoadOp",
    "TmaCreateDescriptorOp",
    "WarpgroupAccumulatorType",
    "WarpgroupGenerateDescriptorOp",
    "WarpgroupMatrixDescriptorType",
    "WarpgroupMmaInitAccumulatorOp",
    "WarpgroupMmaOp",
    "WarpgroupMmaStoreOp",
    "check_indices",
    "check_row_major",
    "element_bitwidth",
    "memory_space_of",
    "mma_kind",
]
