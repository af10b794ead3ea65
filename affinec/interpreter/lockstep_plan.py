"""Which kernels run in lockstep (`affinec.interpreter.lockstep`), and what differs
between their threads.

A kernel, a `gpu.launch` body or a thread-mapped grid band runs in lockstep when
every op in it has a lockstep form and the block's threads reach each barrier,
copy group and wait together: no such op in a branch some threads skip, no loop
whose bounds differ between threads. The plan records the values that differ
between threads (`varying`: the thread ids and what is computed from them), the
shared buffers, the buffers private to each thread and the global arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, llvm, memref, scf, vector
from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.traits import is_side_effect_free

from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import BLOCK, THREAD, PaddedLoadOp, mapping_of
from affinec.dialects.affinec_wgmma import (
    WarpgroupMmaRegistersOp,
    WarpgroupMmaStepOp,
)
from affinec.interpreter.arith_ops import INT_BINARY_OPS
from affinec.interpreter.cfg_structure import (
    Branch,
    Exit,
    Jump,
    Loop,
    Run,
    blocks_of,
    structure,
)
from affinec.interpreter.lanes import (
    ELEMENTWISE,
    MAX_PRIVATE_BYTES_PER_LANE,
    LanePlan,
    buffer_bytes,
    indices_fit,
)
from affinec.interpreter.lockstep_llvm import takes as llvm_takes
from affinec.interpreter.lockstep_nvvm import takes as nvvm_takes
from affinec.interpreter.support import MAX_GRID_BLOCKS, MAX_THREADS_PER_BLOCK
from affinec.ir import ranges
from affinec.ir.affine_exprs import Interval


@dataclass
class KernelPlan(LanePlan):
    """A `LanePlan` over a block's threads, with the kernel's shared buffers and
    its global arrays (the kernel's arguments)."""

    shared: set[SSAValue] = field(default_factory=set)
    arrays: set[SSAValue] = field(default_factory=set)
    known: dict[SSAValue, Interval] = field(default_factory=dict)
    """The ranges of thread and block ids that say nothing of their own (the
    limits of any launch), for `indices_fit`."""
    threads: int = 0
    """A thread-mapped grid band's block size (its thread bands' iterations)."""
    tree: list | None = None
    """A kernel of several blocks: its loops and branches (`cfg_structure`)."""


def plan_lockstep(kernel: gpu.FuncOp) -> KernelPlan | None:
    """The lockstep plan of `kernel`, or None where it runs thread by thread."""
    tree = structure(kernel.body)
    if tree is None:
        return None
    plan = KernelPlan(
        private=set(kernel.private_args),
        shared=set(kernel.workgroup_args),
        arrays={a for a in kernel.arguments if isinstance(a.type, MemRefType)},
    )
    if any(not _small(a.type) for a in kernel.private_args):
        return None
    for op in kernel.walk():
        ids = isinstance(op, gpu.ThreadIdOp | gpu.BlockIdOp | gpu.GlobalIdOp)
        if ids and ranges.value_range(op.result) is None:
            plan.known[op.result] = _ID_RANGES[type(op)]
    plan.tree = tree
    return plan if items_take(tree, plan, False) else None


def plan_llvm_lockstep(kernel: llvm.FuncOp) -> KernelPlan | None:
    """The lockstep plan of a kernel `llvm.func` (the llvm level), or None where
    it runs thread by thread. Its pointer arguments are global memory."""
    if not kernel.body.blocks:
        return None
    tree = structure(kernel.body)
    if tree is None:
        return None
    args = kernel.body.blocks[0].args
    plan = KernelPlan(
        arrays={a for a in args if isinstance(a.type, llvm.LLVMPointerType)}, tree=tree
    )
    return plan if items_take(tree, plan, False) else None


def items_take(items: list, plan: KernelPlan, divergent: bool) -> bool:
    """Whether a region of blocks (`cfg_structure`'s items) runs in lockstep, as
    `_op_takes` says of ops: loops whose condition every thread shares, branches
    taken apart only around ops that allow it; a block argument differs between
    threads where a value it takes does, or where the branches into it part.
    Passes over the whole region until no more block arguments differ (a loop's
    arguments may learn it from its last block; nothing else is used before it is
    defined): a pass a level of nesting would take two to the depth."""
    arguments = {a for b in blocks_of(items) for a in b.args}
    while True:
        before = len(arguments & plan.varying)
        if not _items_take_once(items, plan, divergent):
            return False
        if len(arguments & plan.varying) == before:
            return True


def _items_take_once(items: list, plan: KernelPlan, divergent: bool) -> bool:
    for item in items:
        match item:
            case Run():
                ops = list(item.block.ops)[:-1]
                if not all(_op_takes(op, plan, divergent) for op in ops):
                    return False
            case Jump():
                for arg, value in zip(item.target.args, item.values, strict=True):
                    if value in plan.varying:
                        plan.varying.add(arg)
            case Loop():
                ops = list(item.header.ops)[:-1]
                if not all(_op_takes(op, plan, divergent) for op in ops):
                    return False
                if plan.differ((item.condition,)):
                    return False
                assert item.exit is not None
                if not _items_take_once([*item.body, item.exit], plan, divergent):
                    return False
            case Branch():
                differs = plan.differ((item.condition,))
                if not all(
                    _items_take_once(arm, plan, divergent or differs)
                    for arm in item.arms
                ):
                    return False
                if differs:
                    if any(
                        isinstance(a.type, llvm.LLVMPointerType) for a in item.join.args
                    ):
                        return False  # no scattered form of pointers
                    plan.varying.update(item.join.args)
            case Exit():
                returns = isinstance(item.op, gpu.ReturnOp | llvm.ReturnOp)
                if not returns or item.op.operands:
                    return False
    return True


def plan_mapped_grid(
    grid: affine.ParallelOp, shared: Sequence[SSAValue]
) -> KernelPlan | None:
    """The lockstep plan of a thread-mapped grid band (its body a block, `shared`
    its workgroup buffers), or None where it runs thread by thread
    (`mapped_ops`)."""
    plan = KernelPlan(
        shared=set(shared),
        arrays={v for v in captured(grid) if isinstance(v.type, MemRefType)},
    )
    sizes = {
        math.prod(thread_extents(band) or (0,))
        for band in grid.walk()
        if isinstance(band, affine.ParallelOp) and mapping_of(band) == THREAD
    }
    if len(sizes) != 1 or 0 in sizes:
        return None
    plan.threads = sizes.pop()
    return plan if _block_takes(grid.body.block, plan, False) else None


def plan_launch(launch: gpu.LaunchOp) -> KernelPlan | None:
    """The lockstep plan of a `gpu.launch`'s body, or None where it runs thread by
    thread."""
    if len(launch.body.blocks) != 1 or launch.private_args:
        return None
    block = launch.body.block
    if not isinstance(block.last_op, gpu.TerminatorOp):
        return None
    plan = KernelPlan(
        shared=set(launch.workgroup_args),
        arrays={v for v in captured(launch) if isinstance(v.type, MemRefType)},
    )
    ids = block.args[:12]
    plan.varying.update(ids[3:6])
    for k, arg in enumerate(ids):
        if ranges.value_range(arg) is None:
            plan.known[arg] = _LAUNCH_ARG_RANGES[k // 3]
    return plan if _block_takes(block, plan, False) else None


def captured(root: Operation | Block | Sequence[Block]) -> set[SSAValue]:
    """The values the ops in `root` (an op, a block, or blocks) use and do not
    define (their own results and block arguments count as defined)."""
    blocks = root if isinstance(root, Sequence) else [root]
    ops = [op for b in blocks for op in b.walk()]
    defined = {v for op in ops for v in op.results} | {
        a for op in ops for r in op.regions for b in r.blocks for a in b.args
    }
    defined |= {a for b in blocks if isinstance(b, Block) for a in b.args}
    return {v for op in ops for v in op.operands} - defined


def thread_extents(band: affine.ParallelOp) -> tuple[int, ...] | None:
    """The extents of a thread band from 0 by 1 to constants, or None."""
    lower, upper = band.lowerBoundsMap.data, band.upperBoundsMap.data
    n = len(band.induction_variables)
    if (
        band.results
        or lower.num_dims + lower.num_symbols + upper.num_dims + upper.num_symbols
        or len(lower.results) != n
        or len(upper.results) != n
        or any(s != 1 for s in band.step_values)
        or any(e.eval([], []) != 0 for e in lower.results)
    ):
        return None
    return tuple(e.eval([], []) for e in upper.results)


_ID_RANGES = {
    gpu.ThreadIdOp: (0, MAX_THREADS_PER_BLOCK - 1),
    gpu.BlockIdOp: (0, MAX_GRID_BLOCKS - 1),
    gpu.GlobalIdOp: (0, MAX_GRID_BLOCKS * MAX_THREADS_PER_BLOCK - 1),
}


_LAUNCH_ARG_RANGES = (
    _ID_RANGES[gpu.BlockIdOp],
    _ID_RANGES[gpu.ThreadIdOp],
    (1, MAX_GRID_BLOCKS),
    (1, MAX_THREADS_PER_BLOCK),
)
"""The ranges of a `gpu.launch` body's arguments, three each: block ids, thread
ids, grid sizes, block sizes."""


def _small(t) -> bool:
    return (
        isinstance(t, MemRefType)
        and min(t.get_shape(), default=0) >= 0
        and buffer_bytes(t) <= MAX_PRIVATE_BYTES_PER_LANE
    )


def _block_takes(block: Block, plan: KernelPlan, divergent: bool) -> bool:
    return all(_op_takes(op, plan, divergent) for op in block.ops)


_LEVEL_TAKES: dict[type[Operation], Callable[..., bool | None] | None] = {}
"""Which lower level's `takes` answers for ops of a type (None: `_op_takes`'s own
cases). Each answers None exactly for the types it does not know, so the answer
for a type's first op holds for all of them (and the long chains of class
patterns are not tried again op after op)."""


def _op_takes(op: Operation, plan: KernelPlan, divergent: bool) -> bool:
    """Whether `op` runs in lockstep (`divergent`: inside a branch some threads
    skip), recording in `plan` the values that differ between threads."""
    kind = type(op)
    if kind in _LEVEL_TAKES:
        level_takes = _LEVEL_TAKES[kind]
        if level_takes is not None:
            return level_takes(op, plan, divergent)
    else:
        _LEVEL_TAKES[kind] = None
        for level_takes in (nvvm_takes, llvm_takes):
            if (taken := level_takes(op, plan, divergent)) is not None:
                _LEVEL_TAKES[kind] = level_takes
                return taken
    if kind not in _NO_CASE:
        taken = _case_takes(op, plan, divergent)
        if taken is not None:
            return taken
        _NO_CASE.add(kind)
    return _generic_takes(op, plan)


_NO_CASE: set[type[Operation]] = set()
"""The op types no case of `_case_takes` matches (arith's, mostly): the cases are
not tried again op after op (each is an `isinstance` through `ABCMeta`)."""


def _case_takes(op: Operation, plan: KernelPlan, divergent: bool) -> bool | None:
    """`_op_takes` for the ops it knows by type; None, whatever the op's operands
    and attributes, for the types it does not (every case returns)."""
    match op:
        case gpu.ReturnOp():
            return isinstance(op.parent_op(), gpu.FuncOp)
        case gpu.TerminatorOp():
            return isinstance(op.parent_op(), gpu.LaunchOp)
        case affine.YieldOp():
            return True
        case gpu.ThreadIdOp() | gpu.GlobalIdOp():
            plan.varying.add(op.result)
            return True
        case (
            gpu.BarrierOp()
            | nvgpu.DeviceAsyncCreateGroupOp()
            | nvgpu.DeviceAsyncWaitOp()
        ):
            return not divergent
        case nvgpu.DeviceAsyncCopyOp():
            return op.dst in plan.shared and op.src in plan.arrays
        case affine.ForOp():
            bounds = (*op.lowerBoundOperands, *op.upperBoundOperands)
            if op.iter_args or plan.differ(bounds):
                return False
            return _block_takes(op.body.block, plan, divergent)
        case affine.IfOp():
            condition = condition_map(op)
            differs = plan.varies(condition, op.args)
            if differs and not indices_fit(condition, op.args, plan.known):
                return False
            regions = [r.block for r in (op.then_region, op.else_region) if r.blocks]
            if not all(_block_takes(b, plan, divergent or differs) for b in regions):
                return False
            yields = [v for b in regions for v in yielded(b)]
            if differs or plan.differ(yields):
                plan.varying.update(op.results)
            return True
        case memref.AllocaOp() | memref.AllocOp():
            if op.memref in plan.shared:
                return True  # a grid band's shared buffer: the block's, made apart
            if divergent or not _small(op.memref.type):
                return False
            plan.private.add(op.memref)
            return True
        case affine.ParallelOp() if mapping_of(op) == BLOCK:
            # beside thread bands: all its iterations on thread 0, thread by thread
            # (`lockstep._block_band`), so nothing in it may wait for the others
            # nor touch a buffer private to each thread
            bounds = (*op.lower_bound_operands, *op.upper_bound_operands)
            if divergent or op.results or plan.differ(bounds):
                return False
            if any(v in plan.private for v in captured(op)):
                return False
            return _block_takes(op.body.block, plan, True)
        case affine.ParallelOp():
            extents = thread_extents(op)
            if mapping_of(op) != THREAD or extents is None:
                return False
            if math.prod(extents) != plan.threads:
                return False
            plan.varying.update(op.induction_variables)
            return _block_takes(op.body.block, plan, divergent)
        case memref.LoadOp() | memref.StoreOp():
            if op.memref not in plan.shared | plan.private | plan.arrays:
                return False
            if op.memref not in plan.arrays or plan.differ(op.indices):
                plan.varying.update(op.results)
            return True
        case affine.LoadOp() | PaddedLoadOp() | affine.StoreOp():
            known = plan.shared | plan.private | plan.arrays
            if op.memref not in known or not indices_fit(
                op.map.data, op.indices, plan.known
            ):
                return False
            if isinstance(op, PaddedLoadOp) and op.memref not in plan.arrays:
                return False
            if op.memref not in plan.arrays or plan.varies(op.map.data, op.indices):
                plan.varying.update(op.results)
            return True
        case (
            affine.VectorLoadOp()
            | affine.VectorStoreOp()
            | vector.LoadOp()
            | vector.StoreOp()
        ):
            buffer, value, _ = vector_operands(op)
            t = value.type
            if buffer not in plan.shared | plan.arrays or not (
                isinstance(t, VectorType) and t.get_num_dims() == 1
            ):
                return False
            affine_access = isinstance(op, affine.VectorLoadOp | affine.VectorStoreOp)
            if affine_access and not indices_fit(op.map.data, op.indices, plan.known):
                return False
            varies = (
                plan.varies(op.map.data, op.indices)
                if affine_access
                else plan.differ(op.indices)
            )
            if buffer in plan.shared or varies:
                plan.varying.update(op.results)
            return True
        case vector.ExtractOp() | vector.InsertOp() | vector.BroadcastOp():
            if (
                isinstance(op, vector.ExtractOp | vector.InsertOp)
                and op.dynamic_position
            ):
                return not plan.differ(op.operands) and is_side_effect_free(op)
            if plan.differ(op.operands):
                plan.varying.update(op.results)
            return True
        case nvgpu.LdMatrixOp():
            if divergent or op.srcMemref not in plan.shared | plan.arrays:
                return False
            plan.varying.add(op.res)
            return True
        case nvgpu.MmaSyncOp():
            if divergent:
                return False
            plan.varying.update(op.results)
            return True
        case WarpgroupMmaStepOp():
            # each warpgroup's step once, its threads' registers in their private
            # buffers, its tiles the block's
            return (
                not divergent
                and op.fragments in plan.private
                and op.a in plan.shared
                and op.b in plan.shared
            )
        case WarpgroupMmaRegistersOp():
            # A from each thread's fragments (values, the same or one a lane)
            return (
                not divergent and op.fragments in plan.private and op.b in plan.shared
            )
        case scf.ForOp():
            bounds = (op.lb, op.ub, op.step)
            if plan.differ(bounds):
                return False
            body = op.body.block
            carried = body.args[1:]
            for arg, init in zip(carried, op.iter_args, strict=True):
                if init in plan.varying:
                    plan.varying.add(arg)
            while True:  # until what the iterations carry is known to differ or not
                if not _block_takes(body, plan, divergent):
                    return False
                values = yielded(body)
                newly = [
                    arg
                    for arg, value in zip(carried, values, strict=True)
                    if value in plan.varying and arg not in plan.varying
                ]
                if not newly:
                    break
                plan.varying.update(newly)
            for result, arg in zip(op.results, carried, strict=True):
                if arg in plan.varying:
                    plan.varying.add(result)
            return True
        case scf.IfOp():
            differs = plan.differ((op.cond,))
            regions = [r.block for r in (op.true_region, op.false_region) if r.blocks]
            if not all(_block_takes(b, plan, divergent or differs) for b in regions):
                return False
            yields = [v for b in regions for v in yielded(b)]
            if differs or plan.differ(yields):
                plan.varying.update(op.results)
            return True
        case scf.YieldOp():
            return True
        case affine.ApplyOp() | affine.MinOp() | affine.MaxOp():
            if plan.varies(op.map.data, op.mapOperands):
                if not indices_fit(op.map.data, op.mapOperands, plan.known):
                    return False
                plan.varying.add(op.result)
            return True
    return None


def _generic_takes(op: Operation, plan: KernelPlan) -> bool:
    """An op of no case: pure arithmetic on what threads share or hold apart."""
    if op.regions or any(isinstance(v.type, MemRefType) for v in op.operands):
        return False
    integer = isinstance(op, INTEGER_OPS)
    if not plan.differ(op.operands):
        # the same for every thread: computed once (a division by zero raises
        # as it would for each thread)
        return integer or is_side_effect_free(op)
    if isinstance(op, ELEMENTWISE):
        plan.varying.update(op.results)
        return True
    if integer:
        if any(isinstance(v.type, VectorType) for v in op.operands[-2:]):
            return isinstance(op, arith.SelectOp) and not plan.differ((op.cond,))
        plan.varying.update(op.results)
        return True
    return False


def condition_map(op: affine.IfOp) -> AffineMap:
    """The left-hand sides of an `affine.if`'s constraints, as a map."""
    s = op.condition.data
    return AffineMap(
        s.num_dims, s.num_symbols, tuple(c.lhs - c.rhs for c in s.constraints)
    )


def yielded(block: Block) -> Sequence[SSAValue]:
    term = block.last_op
    assert isinstance(term, affine.YieldOp | scf.YieldOp)
    return term.operands


VectorAccess = (
    affine.VectorLoadOp | affine.VectorStoreOp | vector.LoadOp | vector.StoreOp
)


def vector_operands(op: VectorAccess) -> tuple[SSAValue, SSAValue, bool]:
    """The memref a vector access reads or writes, the vector, and whether it
    stores."""
    match op:
        case affine.VectorLoadOp():
            return op.memref, op.result, False
        case affine.VectorStoreOp():
            return op.memref, op.value, True
        case vector.LoadOp():
            return op.base, op.result, False
        case vector.StoreOp():
            return op.base, op.vector, True


INT_CASTS = (arith.IndexCastOp, arith.ExtSIOp, arith.TruncIOp, arith.ExtUIOp)
"""arith's integer casts (`lane_scalars.cast`)."""

INTEGER_OPS = (*INT_BINARY_OPS, *INT_CASTS, arith.CmpiOp, arith.SelectOp)
"""arith's ops on integers (and `select`), with `lane_scalars`' forms."""
