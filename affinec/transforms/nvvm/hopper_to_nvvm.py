"""nvgpu's Hopper ops as nvvm ops, in place, at the gpu level: the Hopper part of
`convert-nvgpu-to-nvvm`.

A kernel using them changes in four ways before its ops are rewritten:

- a tensor map parameter stays one (the launch passes it), and a TMA load takes
  it cast to `!llvm.ptr` (`builtin.unrealized_conversion_cast`, as MLIR's pass):
  `convert-gpu-to-nvvm` makes the parameter what the launch passes, the 128-byte
  CUtensorMap by value, `!llvm.ptr {llvm.align = 64 : i64, llvm.byval =
  !llvm.array<128 x i8>, nvvm.grid_constant}`, and the cast that pointer;
- a barrier group (`nvgpu.mbarrier.create`) becomes a workgroup buffer of i64, one
  element a barrier;
- a warpgroup accumulator becomes `!llvm.struct<(struct<(f32, ...)>, ...)>`: per 64
  rows, the N/2 registers of a thread, as `nvvm.wgmma.mma_async` takes them; a matrix
  descriptor becomes the i64 of its tile's start address field (`(address &
  0x3FFFF) >> 4`), to which each MMA adds its sub-tile's offset and ORs the fields of
  the operand it is (A K-major, B MN-major: `affinec.hardware.wgmma_layouts`);
- each TMA destination starts on 8 × its swizzle span (`affinec.shared_alignments`).

Then each op becomes its nvvm op on `affinec.element_pointer`s:

    nvgpu.warpgroup.mma %a, %b, %c        nvvm.wgmma.fence.aligned
        (A 64x64, B 64xN)                 %c0 = llvm.extractvalue %c[0]
                                          %a0 = arith.ori %a, <A's fields>
                                          %d0 = nvvm.wgmma.mma_async %a0, %b0, %c0, ...
                                          ... one per 16 of K ...
                                          %d = llvm.insertvalue %d3, %c[0]
                                          nvvm.wgmma.commit.group.sync.aligned
                                          nvvm.wgmma.wait.group.sync.aligned 1
                                          (its waitGroup: groups left in flight)

A kernel whose chip lacks the instructions (`wgmma`: sm_90a; TMA and transaction
counts: sm_90) is refused here, with the op and the chip named, before LLVM sees
them (LLVM would stop the whole process).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    DenseArrayBase,
    Float32Type,
    IndexType,
    IntAttr,
    IntegerAttr,
    MemRefType,
    UnrealizedConversionCastOp,
    i32,
    i64,
)
from xdsl.dialects.llvm import (
    ExtractValueOp,
    InsertValueOp,
    LLVMPointerType,
    LLVMStructType,
    PtrToIntOp,
    UndefOp,
    ZeroOp,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import Rewriter

from affinec.base.diagnostics import PassError
from affinec.dialects import gpu, nvgpu, nvvm
from affinec.dialects.affinec import (
    SHARED_ALIGNMENTS,
    SHARED_OFFSETS,
    ElementPointerOp,
    shared_alignments,
)
from affinec.dialects.gpu_common import WORKGROUP_ATTRIBUTIONS
from affinec.dialects.llvm import AddrSpaceCastOp
from affinec.dialects.nvgpu_common import element_bitwidth
from affinec.dialects.nvvm_target import chip_name_of
from affinec.hardware.chips import chip
from affinec.hardware.wgmma_layouts import (
    WARPGROUP_SIZE,
    WGMMA_M,
    TileLayout,
    swizzle_alignment,
)
from affinec.ir.shared_memory_layout import layout_bytes

_INDEX = IndexType()
_WGMMA_K = 16


def uses_hopper(op: Operation) -> bool:
    """A Hopper op this lowering rewrites (a tensor map is made on the host, and
    stays)."""
    kind = type(op)
    known = _HOPPER_KINDS.get(kind)
    if known is None:  # once a class: ops are ABCs, each isinstance a Python call
        known = _HOPPER_KINDS[kind] = issubclass(
            kind, nvgpu.HOPPER_OPS
        ) and not issubclass(kind, nvgpu.TmaCreateDescriptorOp)
    return known


_HOPPER_KINDS: dict[type, bool] = {}


def lower_hopper(module: Operation) -> None:
    """Lower the Hopper ops of every kernel of `module`."""
    kernels = [
        f
        for f in module.walk()
        if isinstance(f, gpu.FuncOp) and any(uses_hopper(o) for o in f.walk())
    ]
    for op in module.walk():
        if uses_hopper(op) and not any(k.is_ancestor(op) for k in kernels):
            raise PassError(op, "lowers only inside a gpu.func (outline it first)")
    for kernel in kernels:
        _HopperKernel(kernel).lower()


def accumulator_type(t: nvgpu.WarpgroupAccumulatorType) -> LLVMStructType:
    m, n = t.shape
    return LLVMStructType.from_type_list([nvvm.accumulator_struct(n)] * (m // WGMMA_M))


class _HopperKernel:
    def __init__(self, func: gpu.FuncOp):
        self.func = func
        self.barriers: dict[SSAValue, SSAValue] = {}

    def lower(self) -> None:
        self._check_target()
        # What the types say, read before they change.
        self.layouts = {
            op.descriptor: op.layout()
            for op in self.func.walk()
            if isinstance(op, nvgpu.WarpgroupGenerateDescriptorOp)
        }
        self.shapes = {
            op: op.shapes()
            for op in self.func.walk()
            if isinstance(op, nvgpu.WarpgroupMmaOp)
        }
        self._align_tma_destinations()
        self._barriers_in_shared_memory()
        self._retype()
        ops = [o for o in self.func.walk() if uses_hopper(o)]
        for op in reversed(ops):  # users first
            if isinstance(op, nvgpu.MBarrierCreateOp):
                continue
            new_ops, results = getattr(self, "_" + type(op).__name__)(op)
            Rewriter.replace_op(op, new_ops, results or [None] * len(op.results))
        for op in ops:
            if isinstance(op, nvgpu.MBarrierCreateOp):
                Rewriter.erase_op(op)
        for op in list(self.func.walk()):  # views only TMA loads took
            if (
                isinstance(op, memref.SubviewOp | memref.ReinterpretCastOp)
                and not op.result.uses
            ):
                Rewriter.erase_op(op)

    # -- the kernel -------------------------------------------------------------------

    def _check_target(self) -> None:
        name = chip_name_of(self.func)
        target = chip(name)
        for op in self.func.walk():
            feature = nvvm.required_feature(op)
            if feature is not None and not target.has(feature):
                needs = "sm_90a" if feature == "wgmma" else "sm_90 or sm_90a"
                raise PassError(
                    op,
                    f"needs {needs} ({feature}); the kernel is compiled for {name} "
                    "(set the target with nvvm-attach-target{chip=sm_90a} or "
                    "--arch sm_90a)",
                )
            if (
                isinstance(op, nvgpu.MBarrierInitOp | nvgpu.MBarrierArriveExpectTxOp)
                and op.predicate is not None
            ):
                raise PassError(op, "a predicate is not lowered yet: use scf.if")
            if isinstance(op, nvgpu.TmaAsyncLoadOp) and (
                op.predicate is not None or op.multicastMask is not None
            ):
                raise PassError(op, "predicated or multicast TMA loads are not lowered")

    def _barriers_in_shared_memory(self) -> None:
        func = self.func
        entry = func.body.blocks[0]
        for op in func.walk():
            if not isinstance(op, nvgpu.MBarrierCreateOp):
                continue
            if op.parent_block() is not entry:
                raise PassError(op, "creates barriers outside the kernel's entry block")
            t = op.barriers.type
            assert isinstance(t, nvgpu.MBarrierGroupType)
            position = len(func.arguments) + func.num_workgroup
            planned = func.attributes.get(SHARED_OFFSETS)
            if isinstance(planned, DenseArrayBase):
                # the planner placed the buffers: the barriers go past them all
                offsets = list(planned.get_values())
                types = [a.type for a in func.workgroup_args]
                end = layout_bytes(types, offsets)  # pyright: ignore[reportArgumentType]
                func.attributes[SHARED_OFFSETS] = DenseArrayBase.from_list(
                    i64, [*offsets, -(-end // 16) * 16]
                )
            buffer = entry.insert_arg(
                MemRefType(i64, [t.count], memory_space=_SHARED), position
            )
            buffer.name_hint = op.barriers.name_hint or "barriers"
            func.attributes[WORKGROUP_ATTRIBUTIONS] = IntegerAttr(
                func.num_workgroup + 1, i64
            )
            if alignments := shared_alignments(func):
                alignments.insert(position - len(func.arguments), 16)
                func.attributes[SHARED_ALIGNMENTS] = DenseArrayBase.from_list(
                    i64, alignments
                )
            self.barriers[op.barriers] = buffer

    def _align_tma_destinations(self) -> None:
        func = self.func
        workgroup = list(func.workgroup_args)
        alignments = [16] * len(workgroup)
        for op in func.walk():
            if isinstance(op, nvgpu.TmaAsyncLoadOp):
                buffer, offset, _ = _destination(op, workgroup)
                k = workgroup.index(buffer)
                need = max(swizzle_alignment(op.map_type.swizzle_span), 128)
                if offset % need:
                    raise PassError(
                        op,
                        f"loads {offset} bytes into %{buffer.name_hint or 'its buffer'}"
                        f": a TMA tile swizzled so starts on a multiple of {need}",
                    )
                alignments[k] = max(alignments[k], need)
        if any(a != 16 for a in alignments):
            func.attributes[SHARED_ALIGNMENTS] = DenseArrayBase.from_list(
                i64, alignments
            )

    def _retype(self) -> None:
        """Accumulators and descriptors take their lowered types everywhere (block
        arguments of loops, results of `scf.if`), before their ops are rewritten."""

        def lowered(t: Attribute) -> Attribute | None:
            if isinstance(t, nvgpu.WarpgroupAccumulatorType):
                return accumulator_type(t)
            if isinstance(t, nvgpu.WarpgroupMatrixDescriptorType):
                return i64
            return None

        for op in self.func.walk():
            for value in op.results:
                if (new := lowered(value.type)) is not None:
                    value._type = new  # pyright: ignore
            for region in op.regions:
                for block in region.blocks:
                    for value in block.args:
                        if (new := lowered(value.type)) is not None:
                            value._type = new  # pyright: ignore

    # -- mbarriers --------------------------------------------------------------------

    def _barrier(self, barriers: SSAValue, index: SSAValue) -> ElementPointerOp:
        buffer = self.barriers.get(barriers)
        if buffer is None:
            raise PassError(
                barriers.owner if isinstance(barriers.owner, Operation) else self.func,
                "a barrier group the kernel does not create itself",
            )
        return ElementPointerOp(buffer, [index])

    def _MBarrierInitOp(self, op: nvgpu.MBarrierInitOp):
        pointer = self._barrier(op.barriers, op.mbarId)
        count = arith.IndexCastOp(op.count, i32)
        return [pointer, count, nvvm.MBarrierInitOp(pointer.result, count.result),
                nvvm.FenceMBarrierInitOp()], []  # fmt: skip

    def _MBarrierArriveExpectTxOp(self, op: nvgpu.MBarrierArriveExpectTxOp):
        pointer = self._barrier(op.barriers, op.mbarId)
        tx = arith.IndexCastOp(op.txcount, i32)
        return [
            pointer,
            tx,
            nvvm.MBarrierArriveExpectTxOp(pointer.result, tx.result),
        ], []

    def _MBarrierArriveOp(self, op: nvgpu.MBarrierArriveOp):
        pointer = self._barrier(op.barriers, op.mbarId)
        arrive = nvvm.MBarrierArriveOp(pointer.result)
        return [pointer, arrive], [arrive.res]

    def _MBarrierTryWaitParityOp(self, op: nvgpu.MBarrierTryWaitParityOp):
        pointer = self._barrier(op.barriers, op.mbarId)
        parity = arith.ExtUIOp(op.phaseParity, i32)
        ticks = arith.IndexCastOp(op.ticks, i32)
        wait = nvvm.MBarrierTryWaitParityOp(pointer.result, parity.result, ticks.result)
        return [pointer, parity, ticks, wait], []

    # -- TMA ----------------------------------------------------------------------------

    def _TmaAsyncLoadOp(self, op: nvgpu.TmaAsyncLoadOp):
        tensor_map = op.tensorMapDescriptor
        if tensor_map not in self.func.arguments:
            raise PassError(op, "the tensor map must be a parameter of the kernel")
        buffer, offset, at = _destination(op, list(self.func.workgroup_args))
        t = buffer.type
        assert isinstance(t, MemRefType)
        if at is None:
            element = offset * 8 // element_bitwidth(t.get_element_type())
            at = []
            for n in reversed(t.get_shape()):  # the element's indices, innermost last
                element, i = divmod(element, n)
                at.insert(0, i)
        indices = [
            arith.ConstantOp(IntegerAttr(i, _INDEX)) for i in at if isinstance(i, int)
        ]
        constants = iter(indices)
        dst = ElementPointerOp(
            buffer,
            [i if isinstance(i, SSAValue) else next(constants).result for i in at],
        )
        cluster = AddrSpaceCastOp(dst.result, LLVMPointerType(IntAttr(7)))
        barrier = self._barrier(op.barriers, op.mbarId)
        casts = [arith.IndexCastOp(c, i32) for c in op.coordinates]
        pointer = UnrealizedConversionCastOp.get([tensor_map], [LLVMPointerType()])
        load = nvvm.CpAsyncBulkTensorGlobalToSharedClusterOp(
            cluster.res, pointer.results[0], barrier.result, [c.result for c in casts]
        )
        return [*indices, dst, cluster, barrier, *casts, pointer, load], []

    # -- warpgroup MMA ------------------------------------------------------------------

    def _WarpgroupGenerateDescriptorOp(self, op: nvgpu.WarpgroupGenerateDescriptorOp):
        zero = arith.ConstantOp(IntegerAttr(0, _INDEX))
        tile = ElementPointerOp(op.tensor, [zero.result, zero.result])
        address = PtrToIntOp(tile.result, i64)
        mask = _i64(0x3FFFF)
        masked = arith.AndIOp(address.output, mask.result)
        four = _i64(4)
        start = arith.ShRUIOp(masked.result, four.result)
        return [zero, tile, address, mask, masked, four, start], [start.result]

    def _WarpgroupMmaInitAccumulatorOp(self, op: nvgpu.WarpgroupMmaInitAccumulatorOp):
        zero = ZeroOp(result_types=[op.matrixC.type])
        return [zero], [zero.res]

    def _WarpgroupMmaOp(self, op: nvgpu.WarpgroupMmaOp):
        a_type, _, (m, n) = self.shapes[op]
        layout_a = self._layout(op.descriptorA)
        layout_b = self._layout(op.descriptorB)
        kind = "bf16" if isinstance(a_type.get_element_type(), BFloat16Type) else "f16"
        ops: list[Operation] = [nvvm.WgmmaFenceAlignedOp()]
        fields_a = _i64(layout_a.k_major().encode())
        fields_b = _i64(layout_b.mn_major().encode())
        ops += [fields_a, fields_b]
        result = op.matrixC
        block_type = nvvm.accumulator_struct(n)
        # From zeros, the first MMA of each block computes D = A x B (scale-d 0) on
        # undefined registers: no instruction writes the accumulator between the
        # fence and the MMAs (ptxas would serialize them, C7519).
        from_zero = isinstance(op.matrixC.owner, nvgpu.WarpgroupMmaInitAccumulatorOp)
        for block in range(m // WGMMA_M):
            if from_zero:
                start = UndefOp(block_type)
            else:
                start = ExtractValueOp(
                    DenseArrayBase.from_list(i64, [block]), op.matrixC, block_type
                )
            ops.append(start)
            c = start.results[0]
            # The descriptors first, then the MMAs one after the other: a run the
            # emitter writes as one inline PTX statement (`nvvm.accumulation_run`).
            mmas: list[Operation] = []
            for k0 in range(0, layout_a.cols, _WGMMA_K):
                offset_a = layout_a.m_offset(block * WGMMA_M) + layout_a.k_offset(
                    k0, True
                )
                offset_b = layout_b.k_offset(k0, False)
                a, a_ops = _descriptor(op.descriptorA, offset_a, fields_a.result)
                b, b_ops = _descriptor(op.descriptorB, offset_b, fields_b.result)
                mma = nvvm.WgmmaMmaAsyncOp(
                    a, b, c, n, kind, accumulate=not (from_zero and k0 == 0)
                )
                ops += [*a_ops, *b_ops]
                mmas.append(mma)
                c = mma.res
            ops += mmas
            insert = InsertValueOp(DenseArrayBase.from_list(i64, [block]), result, c)
            ops.append(insert)
            result = insert.res
        ops += [
            nvvm.WgmmaGroupSyncAlignedOp(),
            nvvm.WgmmaWaitGroupSyncOp(op.groups_in_flight),
        ]
        return ops, [result]

    def _layout(self, descriptor: SSAValue) -> TileLayout:
        layout = self.layouts.get(descriptor)
        if layout is None:
            raise PassError(
                self.func,
                "a wgmma operand's descriptor must come straight from "
                "nvgpu.warpgroup.generate.descriptor in the kernel",
            )
        return layout

    def _WarpgroupMmaStoreOp(self, op: nvgpu.WarpgroupMmaStoreOp):
        """Each thread's registers to their rows and columns (the fragment of
        `wgmma_layouts.accumulator_table`), one `memref.store` each."""
        t = op.dstMemref.type
        assert isinstance(t, MemRefType)
        m, n = t.get_shape()
        ops: list[Operation] = [nvvm.WgmmaWaitGroupSyncOp(0)]  # every group done

        def index(value: int) -> SSAValue:
            c = arith.ConstantOp(IntegerAttr(value, _INDEX))
            ops.append(c)
            return c.result

        def binary(cls, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
            o = cls(lhs, rhs)
            ops.append(o)
            return o.result

        tid = gpu.ThreadIdOp("x")
        ops.append(tid)
        thread = binary(arith.RemUIOp, tid.result, index(WARPGROUP_SIZE))
        warp = binary(arith.DivUIOp, thread, index(32))
        lane = binary(arith.RemUIOp, thread, index(32))
        row0 = binary(
            arith.AddiOp,
            binary(arith.MuliOp, warp, index(16)),
            binary(arith.DivUIOp, lane, index(4)),
        )
        col0 = binary(arith.MuliOp, binary(arith.RemUIOp, lane, index(4)), index(2))
        for block in range(m // WGMMA_M):
            for j in range(n // 2):
                row = binary(
                    arith.AddiOp, row0, index(block * WGMMA_M + 8 * ((j // 2) % 2))
                )
                col = binary(arith.AddiOp, col0, index(8 * (j // 4) + j % 2))
                value = ExtractValueOp(
                    DenseArrayBase.from_list(i64, [block, j]), op.matrixD, Float32Type()
                )
                ops += [value, memref.StoreOp.get(value.res, op.dstMemref, [row, col])]
        return ops, []


_SHARED = IntegerAttr(3, i64)


def _i64(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, i64))


def _destination(
    op: nvgpu.TmaAsyncLoadOp, workgroup: list
) -> tuple[SSAValue, int, list[SSAValue | int] | None]:
    """The workgroup buffer a TMA load writes and the byte offset it starts at: the
    buffer itself, or a static `memref.subview` or `memref.reinterpret_cast` of it
    (whose first element is where the box goes, as MLIR's lowering takes it); a
    subview of dynamic offsets gives its offsets (the element where the box goes)
    and the bytes its static ones add, each dynamic one's stride checked to keep
    the alignment the static part has."""
    dst = op.dst
    offset = 0
    view = dst.owner
    if (
        isinstance(view, memref.SubviewOp)
        and view.source in workgroup
        and (DYNAMIC_INDEX in view.static_offsets.get_values())
    ):
        t = view.source.type
        assert isinstance(t, MemRefType)
        shape = t.get_shape()
        dynamic = iter(view.offsets)
        indices: list[SSAValue | int] = []
        strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
        bits = element_bitwidth(t.get_element_type())
        need = max(swizzle_alignment(op.map_type.swizzle_span), 128)
        for o, stride in zip(view.static_offsets.get_values(), strides, strict=True):
            if o == DYNAMIC_INDEX:
                indices.append(next(dynamic))
                if stride * bits // 8 % need:
                    raise PassError(
                        op,
                        f"loads into a view whose dynamic offset moves it by "
                        f"{stride * bits // 8} bytes, no multiple of {need}",
                    )
            else:
                indices.append(o)
                offset += o * stride * bits // 8
        return view.source, offset, indices
    if (
        isinstance(view, memref.ReinterpretCastOp)
        and view.source in workgroup
        and DYNAMIC_INDEX in view.static_offsets.get_values()
    ):
        # a box of more dimensions than the buffer's tile at a dynamic element
        t = view.source.type
        assert isinstance(t, MemRefType)
        (at,) = view.offsets
        need = max(swizzle_alignment(op.map_type.swizzle_span), 128)
        step = _multiple_of(at) * element_bitwidth(t.get_element_type()) // 8
        if step % need:
            raise PassError(
                op,
                f"loads into a view whose dynamic offset moves it by multiples of "
                f"{step} bytes, not of {need}",
            )
        return view.source, 0, [*[0] * (t.get_num_dims() - 1), at]
    if isinstance(view, memref.SubviewOp | memref.ReinterpretCastOp) and (
        view.source in workgroup
    ):
        statics = list(view.static_offsets.get_values())
        if DYNAMIC_INDEX in statics:
            raise PassError(op, "loads into a view of dynamic offsets")
        t = view.source.type
        assert isinstance(t, MemRefType)
        flat = statics[0] if isinstance(view, memref.ReinterpretCastOp) else 0
        if isinstance(view, memref.SubviewOp):
            for o, n in zip(statics, t.get_shape(), strict=True):
                flat = flat * n + o
        dst, offset = view.source, flat * element_bitwidth(t.get_element_type()) // 8
    if dst not in workgroup:
        raise PassError(
            op, "loads into a workgroup buffer of the kernel, or a view of one"
        )
    return dst, offset, None


def _multiple_of(v: SSAValue) -> int:
    """A number every value of the integer `v` is a multiple of (0: it is 0), from
    the constants, products and sums that compute it (1 where it cannot tell)."""
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return abs(op.value.value.data)
    if isinstance(op, arith.MuliOp):
        return _multiple_of(op.lhs) * _multiple_of(op.rhs)
    if isinstance(op, arith.AddiOp):
        return math.gcd(_multiple_of(op.lhs), _multiple_of(op.rhs))
    if isinstance(op, arith.IndexCastOp | arith.ExtUIOp | arith.ExtSIOp):
        return _multiple_of(op.input)
    return 1


def _descriptor(
    start: SSAValue, offset: int, fields: SSAValue
) -> tuple[SSAValue, Sequence[Operation]]:
    """The descriptor of the sub-tile `offset` bytes into the tile whose start field
    is `start`: start + offset/16, with the operand's fields."""
    ops: list[Operation] = []
    value = start
    if offset:
        step = _i64(offset >> 4)
        add = arith.AddiOp(value, step.result)
        ops += [step, add]
        value = add.result
    full = arith.OrIOp(value, fields)
    ops.append(full)
    return full.result, ops


__all__ = ["accumulator_type", "lower_hopper", "uses_hopper"]
