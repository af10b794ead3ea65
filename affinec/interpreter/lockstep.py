"""A block's threads run together, as numpy vectors: a kernel in lockstep.

`gpu_ops.run_grid` runs a kernel thread by thread (coroutines that meet at each
barrier), so every op costs a Python statement per thread. Here, where the kernel
allows it, a block runs once: a value that differs between threads is an array over
them (its *lanes*, thread `lanes[k]` in lane k), shared memory is read and written a
vector of elements at a time, and a private buffer (`memref.alloca`) is one buffer
per thread. The rest of the kernel, uniform, is written by the ordinary emitters.

    %tx = gpu.thread_id x                    tx = lanes % 64
    affine.for %j = 0 to 13 {                for j in range(0, 13):
      affine.if #guard(%tx, %j) {              taken = flatnonzero(guard(tx, j))
        nvgpu.device_async_copy ...              if taken.size:  # those threads
      }                                            tx' = tx[taken]; lanes' = lanes[taken]
    }                                              copies(...)
    nvgpu.device_async_wait ...              wait(...)
    gpu.barrier                              next_epoch()
    %a = affine.load %s[%tx]                 a = s.read_lanes(tx, lanes)

The same holds for every level from the thread mapping down to `lower-affine`: a
thread-mapped grid band (its thread bands' iterations taken from the lanes), a
`gpu.launch` body and a `gpu.func`, with affine or scf control flow, arith's
integers (`lane_scalars`), vectors over lanes (lanes first), the warp
collectives `ldmatrix` and `mma.sync`, computed once per warp, and Hopper's
warpgroup steps (`affinec.warpgroup_mma`, `affinec.warpgroup_mma_registers`),
once per warpgroup; and the level
`convert-nvgpu-to-nvvm` leaves, with pointers, registers and nvvm's intrinsics
(`lockstep_nvvm`).

An `affine.if` or `scf.if` whose condition differs between threads runs each branch
on the threads that take it: their values gathered, the branch sees shorter arrays,
and its results are scattered back. Barriers, copy groups, waits and warp
collectives must be reached by all the block's threads at once (outside such a
branch), and loop bounds must be the same for every thread; a kernel that does not
allow this, or holds an op without a lockstep form here, runs thread by thread
(`lockstep_plan` says which). A kernel of several blocks (after `convert-scf-to-cf`,
and the llvm level) runs in lockstep where `cfg_structure` finds its loops and
branches again (`lockstep_cfg` writes them; `lockstep_llvm` has the llvm level's
pointers and ops).

Shared memory keeps its race records: a vector of accesses marks each element as the
threads' accesses one after the other would (`SharedArray.read_lanes`,
`write_lanes`), and a race is reported whichever order the accesses come in. For a
kernel without races the results are the thread-by-thread ones, bit for bit: every
thread runs its own ops in order, and numpy rounds an array of floats as it rounds
one (`Interpreter(lockstep=False)` keeps the coroutines, to compare).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from xdsl.dialects import arith, llvm, memref, scf, vector
from xdsl.dialects.builtin import IndexType, IntegerType, MemRefType, VectorType
from xdsl.ir import Block, Operation, SSAValue

from affinec.dialects import affine, gpu, nvvm
from affinec.dialects.affinec import BLOCK, PaddedLoadOp, mapping_of
from affinec.interpreter import lane_scalars
from affinec.interpreter.affine_maps import (
    for_bounds,
    if_condition,
)
from affinec.interpreter.arith_ops import INT_BINARY_OPS
from affinec.interpreter.codegen import FunctionWriter, ProgramWriter, Source
from affinec.interpreter.lanes import (
    LaneWriter,
)
from affinec.interpreter.llvm_ops import (
    ID_POSITIONS,
    shared_parameters,
    special_register,
)
from affinec.interpreter.lockstep_cfg import write_items
from affinec.interpreter.lockstep_collectives import COLLECTIVE_EMITTERS
from affinec.interpreter.lockstep_llvm import LLVM_EMITTERS
from affinec.interpreter.lockstep_memory import access, vector_access
from affinec.interpreter.lockstep_nvvm import (
    NVVM_EMITTERS,
    aggregate_shape,
    element_type,
)
from affinec.interpreter.lockstep_plan import (
    INT_CASTS,
    INTEGER_OPS,
    KernelPlan,
    captured,
    condition_map,
    thread_extents,
    yielded,
)
from affinec.interpreter.lockstep_runtime import (
    as_thread_zero,
    lanes_of,
    pointer_lanes,
    thread_ids,
)
from affinec.interpreter.scalars import python_int
from affinec.interpreter.support import (
    CMPI_PREDICATES,
    memref_shape,
    numpy_dtype,
    poisoned,
)
from affinec.ir.op_table import OpTable

# -- writing a kernel in lockstep -----------------------------------------------------------


def write_lockstep_kernel(
    program: ProgramWriter, op: gpu.FuncOp, plan: KernelPlan, name: str
) -> Source:
    """The Python function running one block of the `gpu.func` `op` in lockstep."""
    w = FunctionWriter(program)
    ctx = w.fresh("gpu")
    w.gpu_context = ctx
    params = [w.define(a) for a in (*op.arguments, *op.workgroup_args)]
    writer = start_lockstep_block(w, plan, ctx)
    for arg in op.private_args:
        writer.private_buffer(arg)
    assert plan.tree is not None
    write_items(writer, op.body, plan.tree)
    w.line("return ()")
    return w.function(f"def {name}({', '.join([ctx, *params])}):")


def write_llvm_lockstep_kernel(
    program: ProgramWriter,
    op: llvm.FuncOp,
    plan: KernelPlan,
    name: str,
) -> Source:
    """The Python function running one block of the kernel `llvm.func` `op` in
    lockstep (its parameters as `llvm_ops.write_llvm_kernel`'s)."""
    w = FunctionWriter(program)
    ctx = w.fresh("gpu")
    w.gpu_context = ctx
    params = [w.define(a) for a in op.body.blocks[0].args]
    names = shared_parameters(w, op)
    writer = start_lockstep_block(w, plan, ctx)
    assert plan.tree is not None
    write_items(writer, op.body, plan.tree)
    w.line("return ()")
    return w.function(f"def {name}({', '.join([ctx, *params, *names])}):")


def write_launch_body(
    w: FunctionWriter, launch: gpu.LaunchOp, plan: KernelPlan, ctx: str
) -> None:
    """The body of the function running one block of `launch` in lockstep."""
    writer = start_lockstep_block(w, plan, ctx)
    ids = w.global_(thread_ids, "thread_ids")
    for k, arg in enumerate(launch.body.block.args[:12]):
        if not arg.uses:
            continue
        if 3 <= k < 6:
            w.line(f"{w.define(arg)} = {ids}({writer.lane}, {ctx}.ids[9:12], {k - 3})")
        else:
            w.line(f"{w.define(arg)} = {ctx}.ids[{k}]")
    writer.block(launch.body.block)
    w.line("return ()")


def start_lockstep_block(
    w: FunctionWriter, plan: KernelPlan, ctx: str
) -> _KernelWriter:
    """Begin the body of a function running a block in lockstep (`ctx` names its
    `LockstepContext`); the returned writer writes the ops."""
    writer = _KernelWriter(w, plan, ctx)
    w.line(f"{writer.lane} = {ctx}.lanes")
    w.line(f"{writer.count} = len({writer.lane})")
    return writer


class _KernelWriter(LaneWriter):
    """Writes a kernel's ops for the block's threads: `lane` names the threads
    running now (linear numbers), `count` how many."""

    def __init__(self, w: FunctionWriter, plan: KernelPlan, ctx: str) -> None:
        super().__init__(w, plan)
        self.kernel_plan = plan
        self.ctx = ctx

    def op(self, op: Operation) -> None:
        emit = _KERNEL_EMITTERS.lookup(op)
        if emit is not None:
            emit(self, op)
        elif isinstance(op, gpu.ReturnOp | gpu.TerminatorOp | scf.YieldOp):
            pass  # the function's own `return`; a yield its op writes
        else:
            super().op(op)

    def private_buffer(self, value: SSAValue) -> None:
        """One buffer of `value`'s type per thread of the block."""
        w = self.w
        t = value.type
        assert isinstance(t, MemRefType)
        shape = memref_shape(t)
        dtype = w.global_(numpy_dtype(t.get_element_type()), "dtype")
        buffer = w.global_(poisoned, "poisoned")
        w.line(f"{w.define(value)} = {buffer}(({self.count},) + {shape}, {dtype})")

    def rebind(
        self,
        root: Operation | Block | Sequence[Block],
        pick: Callable[[SSAValue, str], str],
    ):
        """Rebind every value `root` uses from outside that differs between threads
        to `pick(value, name)`; return the old names (for `restore`)."""
        w, old = self.w, {}
        used = [v for v in captured(root) if v in self.kernel_plan.varying]
        for v in sorted(used, key=lambda v: w[v]):
            old[v] = w[v]
            w.line(f"{w.define(v)} = {pick(v, old[v])}")
        return old

    def lanes_of(self, result: SSAValue, value: SSAValue) -> str:
        """`value` as `result` holds it: an array over the lanes where `result`
        differs between threads (a uniform `value` repeated)."""
        w = self.w
        if result not in self.kernel_plan.varying or value in self.kernel_plan.varying:
            return w[value]
        shape = f"({self.count},) + {_vector_shape(result)}"
        dtype = f"{w.global_(np.asarray, 'asarray')}({w[value]}).dtype"
        return f"{w.global_(lanes_of, 'lanes_of')}({w[value]}, {shape}, {dtype})"

    def fresh_lanes(self, name: str, value: SSAValue) -> None:
        """`name = ` an array over the lanes for `value`'s type, poisoned (each
        branch that threads take apart writes its lanes)."""
        w, t = self.w, value.type
        dtype = numpy_dtype(element_type(t))
        if dtype.kind == "i":
            dtype = np.dtype(np.int64)  # integers on lanes are int64 (`lane_scalars`)
        shape = f"({self.count},) + {_vector_shape(value)}"
        fresh = w.global_(poisoned, "poisoned")
        w.line(f"{name} = {fresh}({shape}, {w.global_(dtype, 'dtype')})")

    def restore(self, old: dict[SSAValue, str]) -> None:
        for v, name in old.items():
            self.w.alias(v, name)

    @contextmanager
    def on(self, taken: str, region: Block | Sequence[Block]) -> Iterator[None]:
        """Write `region`'s ops for the lanes `taken` (positions among the lanes
        running now) only."""
        w = self.w
        pointer = w.global_(pointer_lanes, "pointer_lanes")

        def pick(value: SSAValue, name: str) -> str:
            if isinstance(value.type, llvm.LLVMPointerType):
                return f"{pointer}({name}, {taken})"
            return f"{name}[{taken}]"

        old = self.rebind(region, pick)
        lane, count = self.lane, self.count
        self.lane, self.count = w.fresh("lane"), w.fresh("lane_count")
        w.line(f"{self.lane} = {lane}[{taken}]")
        w.line(f"{self.count} = {taken}.size")
        try:
            yield
        finally:
            self.lane, self.count = lane, count
            self.restore(old)


def _lane_thread_ids(kw: _KernelWriter, dim: int) -> str:
    """Each lane's thread id along `dim` (0, 1, 2: x, y, z)."""
    ids = kw.w.global_(thread_ids, "thread_ids")
    return f"{ids}({kw.lane}, {kw.ctx}.ids[9:12], {dim})"


def _thread_id(kw: _KernelWriter, op: gpu.ThreadIdOp | gpu.GlobalIdOp) -> None:
    w = kw.w
    dim = "xyz".index(op.dim)
    text = _lane_thread_ids(kw, dim)
    if isinstance(op, gpu.GlobalIdOp):
        text = f"{kw.ctx}.ids[{dim}] * {kw.ctx}.ids[{9 + dim}] + {text}"
    w.line(f"{w.define(op.result)} = {text}")


def _special_register(kw: _KernelWriter, op: nvvm.SpecialRegisterOp) -> None:
    w = kw.w
    register = special_register(op)
    assert register is not None  # the plan took it
    kind, index = register
    text = (
        _lane_thread_ids(kw, index - ID_POSITIONS[kind])
        if kind == "thread_id"
        else f"{kw.ctx}.ids[{index}]"
    )
    w.line(f"{w.define(op.res)} = {text}")


def _barrier(kw: _KernelWriter, op: gpu.BarrierOp | nvvm.BarrierOp) -> None:
    kw.w.line(f"{kw.ctx}.block.next_epoch()")


def _for(kw: _KernelWriter, op: affine.ForOp) -> None:
    w = kw.w
    iv = w.define(op.induction_variable)
    spend = w.global_(w.program.budget.spend_each, "spend_each")
    with w.indented(f"for {iv} in {spend}({kw.count}, {for_bounds(op, w)}):"):
        kw.block(op.body.block)


def _if(kw: _KernelWriter, op: affine.IfOp) -> None:
    w, plan = kw.w, kw.kernel_plan
    regions = [r.block for r in (op.then_region, op.else_region) if r.blocks]
    if not plan.varies(condition_map(op), op.args):
        _uniform(kw, if_condition(op, w), op.results, regions)
        return
    condition = w.fresh("condition")
    broadcast = w.global_(np.broadcast_to, "broadcast_to")
    tests = if_condition(op, w, lanes=True)
    w.line(f"{condition} = {broadcast}({tests}, ({kw.count},))")
    _divergent(kw, condition, op.results, regions)


def _uniform(
    kw: _KernelWriter, condition: str, results: Sequence[SSAValue], regions: list[Block]
) -> None:
    """A branch every thread takes the same way: a Python `if` on `condition`."""
    w = kw.w
    for result in results:
        w.define(result)
    for k, block in enumerate(regions):
        with w.indented(f"if {condition}:" if k == 0 else "else:"):
            kw.block(block)
            for result, value in zip(results, yielded(block), strict=True):
                w.line(f"{w[result]} = {kw.lanes_of(result, value)}")


def _divergent(
    kw: _KernelWriter, condition: str, results: Sequence[SSAValue], regions: list[Block]
) -> None:
    """A branch the threads take apart (`condition` one per lane): each region on
    the lanes that take it, its results scattered back into arrays over all."""
    w = kw.w
    for result in results:
        kw.fresh_lanes(w.define(result), result)
    nonzero = w.global_(np.flatnonzero, "flatnonzero")
    for k, block in enumerate(regions):
        taken = w.fresh("taken")
        w.line(f"{taken} = {nonzero}({'~' if k else ''}{condition})")
        with w.indented(f"if {taken}.size:"), kw.on(taken, block):
            kw.block(block)
            for result, value in zip(results, yielded(block), strict=True):
                w.line(f"{w[result]}[{taken}] = {w[value]}")


def _alloca(kw: _KernelWriter, op: memref.AllocaOp | memref.AllocOp) -> None:
    if op.memref not in kw.kernel_plan.shared:  # a shared one is the block's
        kw.private_buffer(op.memref)


def _parallel(kw: _KernelWriter, op: affine.ParallelOp) -> None:
    if mapping_of(op) == BLOCK:
        _block_band(kw, op)
    else:
        _thread_band(kw, op)


def _block_band(kw: _KernelWriter, op: affine.ParallelOp) -> None:
    """A block band beside thread bands: all its iterations on thread 0, one
    after the other, written by the ordinary emitters (as thread by thread)."""
    w = kw.w
    zero = w.fresh("thread_zero")
    w.line(f"{zero} = {w.global_(as_thread_zero, 'as_thread_zero')}({kw.ctx})")
    old = kw.rebind(op, _lane_zero)
    outer, w.gpu_context = w.gpu_context, zero
    try:
        w.emit_op(op)
    finally:
        w.gpu_context = outer
        kw.restore(old)


def _lane_zero(value: SSAValue, name: str) -> str:
    """Thread 0's element of `value` (lane 0: the block's lanes in order), as a
    thread's value of its type: a Python int or bool, a numpy float, a vector."""
    t = value.type
    if isinstance(t, IndexType | IntegerType):
        return f"{python_int(t)}({name}[0])"
    return f"{name}[0]"


def _thread_band(kw: _KernelWriter, op: affine.ParallelOp) -> None:
    """The band's one iteration of each thread: its ids from the thread's number."""
    w = kw.w
    extents = thread_extents(op)
    assert extents is not None
    for k, iv in enumerate(op.induction_variables):
        stride = math.prod(extents[k + 1 :])
        index = kw.lane if stride == 1 else f"{kw.lane} // {stride}"
        if k > 0:
            index = f"({index}) % {extents[k]}"
        w.line(f"{w.define(iv)} = {index}")
    kw.block(op.body.block)


def _vector_shape(value: SSAValue) -> tuple[int, ...]:
    """A value's shape after the lanes: a vector's, an llvm aggregate's."""
    t = value.type
    if isinstance(t, llvm.LLVMStructType | llvm.LLVMArrayType):
        return aggregate_shape(t)
    return tuple(t.get_shape()) if isinstance(t, VectorType) else ()


def _vector_op(
    kw: _KernelWriter, op: vector.ExtractOp | vector.InsertOp | vector.BroadcastOp
):
    w, plan = kw.w, kw.kernel_plan
    if not plan.differ(op.operands):
        w.emit_op(op)
        return
    result = op.results[0]
    shape = f"({kw.count},) + {_vector_shape(result)}"
    match op:
        case vector.ExtractOp():
            position = [str(p) for p in op.get_mixed_position()]
            w.line(
                f"{w.define(result)} = {w[op.vector]}[{', '.join([':', *position])}]"
            )
        case vector.InsertOp() | vector.BroadcastOp():
            t = result.type
            assert isinstance(t, VectorType)
            dtype = w.global_(numpy_dtype(t.get_element_type()), "dtype")
            fresh = w.global_(lanes_of, "lanes_of")
            start = op.dest if isinstance(op, vector.InsertOp) else op.source
            name = w.define(result)
            w.line(f"{name} = {fresh}({w[start]}, {shape}, {dtype})")
            if isinstance(op, vector.InsertOp):
                position = [str(p) for p in op.get_mixed_position()]
                w.line(f"{name}[{', '.join([':', *position])}] = {w[op.source]}")


def _scf_for(kw: _KernelWriter, op: scf.ForOp) -> None:
    w = kw.w
    body = op.body.block
    iv = w.define(body.args[0])
    carried = [w.define(a) for a in body.args[1:]]
    inits = zip(body.args[1:], op.iter_args, strict=True)
    w.assign(carried, [kw.lanes_of(a, init) for a, init in inits])
    spend = w.global_(w.program.budget.spend_each, "spend_each")
    bounds = f"{w[op.lb]}, {w[op.ub]}, {w[op.step]}"
    with w.indented(f"for {iv} in {spend}({kw.count}, {bounds}):"):
        kw.block(body)
        values = zip(body.args[1:], yielded(body), strict=True)
        w.assign(carried, [kw.lanes_of(a, v) for a, v in values])
    for result, value in zip(op.results, carried, strict=True):
        w.alias(result, value)


def _scf_if(kw: _KernelWriter, op: scf.IfOp) -> None:
    w, plan = kw.w, kw.kernel_plan
    regions = [r.block for r in (op.true_region, op.false_region) if r.blocks]
    if not plan.differ((op.cond,)):
        _uniform(kw, w[op.cond], op.results, regions)
        return
    _divergent(kw, w[op.cond], op.results, regions)


def _int_op(kw: _KernelWriter, op: Operation) -> None:
    w, plan = kw.w, kw.kernel_plan
    if not plan.differ(op.operands):
        w.emit_op(op)
        return
    result = op.results[0]
    names = w.names(op.operands)
    if isinstance(op, arith.SelectOp):
        cond, a, b = names
        extra = len(_vector_shape(result))
        if extra and plan.differ((op.cond,)):
            cond = f"{cond}.reshape(({kw.count},) + (1,) * {extra})"
        where = w.global_(np.where, "where")
        w.line(f"{w.define(result)} = {where}({cond}, {a}, {b})")
        return
    if isinstance(op, arith.CmpiOp):
        predicate = CMPI_PREDICATES[op.predicate.value.data]
        lane_scalars.emit_compare(w, predicate, result, op.lhs, *names)
        return
    if isinstance(op, INT_CASTS):
        signed = not isinstance(op, arith.ExtUIOp)
        lane_scalars.emit_cast(w, result, op.operands[0], signed)
        return
    lane_scalars.emit_binary(w, INT_BINARY_OPS[type(op)], result, *names)


_EMITTERS: dict[type[Operation], Callable[[_KernelWriter, Any], None]] = {
    gpu.ThreadIdOp: _thread_id,
    gpu.GlobalIdOp: _thread_id,
    gpu.BarrierOp: _barrier,
    nvvm.BarrierOp: _barrier,
    affine.ForOp: _for,
    affine.IfOp: _if,
    memref.AllocaOp: _alloca,
    memref.AllocOp: _alloca,
    affine.ParallelOp: _parallel,
    scf.ForOp: _scf_for,
    scf.IfOp: _scf_if,
    **dict.fromkeys(INTEGER_OPS, _int_op),
    affine.LoadOp: access,
    PaddedLoadOp: access,
    affine.StoreOp: access,
    memref.LoadOp: access,
    memref.StoreOp: access,
    affine.VectorLoadOp: vector_access,
    affine.VectorStoreOp: vector_access,
    vector.LoadOp: vector_access,
    vector.StoreOp: vector_access,
    vector.ExtractOp: _vector_op,
    vector.InsertOp: _vector_op,
    vector.BroadcastOp: _vector_op,
    **COLLECTIVE_EMITTERS,
    **NVVM_EMITTERS,
    **LLVM_EMITTERS,
    nvvm.SpecialRegisterOp: _special_register,
}
"""The ops written differently for a block's threads; the others as a band's lanes
(`LaneWriter`) or, the same for every thread, by their ordinary emitters."""

_KERNEL_EMITTERS: OpTable[Callable[[_KernelWriter, Any], None]] = OpTable(
    "lockstep emitter"
)
"""`_EMITTERS`, looked up through an op's classes (nvvm's special registers are
subclasses of one)."""
for _kind, _emit in _EMITTERS.items():
    _KERNEL_EMITTERS.register(_kind)(_emit)
