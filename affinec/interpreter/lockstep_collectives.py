"""The lockstep writer's ops that a warp, a warpgroup or a copy group does together:
`ldmatrix` and `mma.sync` once per warp, Hopper's warpgroup steps once per
warpgroup, and the cp.async copies, groups and waits of a block's threads
(`lockstep_runtime` and `async_copies` run them over the lanes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.ir import Operation

from affinec.dialects import nvgpu
from affinec.dialects.affinec_wgmma import (
    WarpgroupMmaRegistersOp,
    WarpgroupMmaStepOp,
)
from affinec.interpreter import async_copies
from affinec.interpreter.lockstep_runtime import (
    ldmatrix_lanes,
    mma_lanes,
    warpgroup_registers_lanes,
    warpgroup_step_lanes,
)
from affinec.interpreter.support import tuple_text


def _ldmatrix(kw: Any, op: nvgpu.LdMatrixOp) -> None:
    w = kw.w
    fn = w.global_(ldmatrix_lanes, "ldmatrix_lanes")
    w.line(
        f"{w.define(op.res)} = {fn}({w.op_ref(op)}, {w[op.srcMemref]}, "
        f"{tuple_text(w.names(op.indices))}, {kw.lane}, {kw.ctx}.block)"
    )


def _mma(kw: Any, op: nvgpu.MmaSyncOp) -> None:
    w = kw.w
    fn = w.global_(mma_lanes, "mma_lanes")
    a, b, c = w.names((op.matrixA, op.matrixB, op.matrixC))
    w.line(
        f"{w.define(op.results[0])} = {fn}({w.op_ref(op)}, {a}, {b}, {c}, {kw.lane})"
    )


def _warpgroup_step(kw: Any, op: WarpgroupMmaStepOp) -> None:
    w = kw.w
    fn = w.global_(warpgroup_step_lanes, "warpgroup_step_lanes")
    a_idx = tuple_text(w.names(op.a_indices))
    b_idx = tuple_text(w.names(op.b_indices))
    w.line(
        f"{fn}({w.op_ref(op)}, {w[op.fragments]}, {w[op.a]}, {a_idx}, {w[op.b]}, "
        f"{b_idx}, {kw.lane}, {kw.ctx}.block)"
    )


def _warpgroup_registers(kw: Any, op: WarpgroupMmaRegistersOp) -> None:
    w = kw.w
    fn = w.global_(warpgroup_registers_lanes, "warpgroup_registers_lanes")
    a = tuple_text(w.names(op.a))
    varying = tuple_text([v in kw.kernel_plan.varying for v in op.a])
    b_idx = tuple_text(w.names(op.b_indices))
    w.line(
        f"{fn}({w.op_ref(op)}, {w[op.fragments]}, {a}, {varying}, {w[op.b]}, "
        f"{b_idx}, {kw.lane}, {kw.ctx}.block)"
    )


def _async_copy(kw: Any, op: nvgpu.DeviceAsyncCopyOp) -> None:
    w = kw.w
    valid = "None" if op.srcElements is None else w[op.srcElements]
    start = w.global_(async_copies.start_lane_copies, "lane_copies")
    w.line(
        f"{start}({kw.ctx}, {kw.lane}, {w.op_ref(op)}, {w[op.dst]}, "
        f"{tuple_text(w.names(op.dstIndices))}, {w[op.src]}, "
        f"{tuple_text(w.names(op.srcIndices))}, {op.elements}, {valid})"
    )
    w.alias(op.asyncToken, "None")


def _create_group(kw: Any, op: nvgpu.DeviceAsyncCreateGroupOp) -> None:
    kw.w.alias(op.results[0], "None")
    kw.w.line(f"{kw.w.global_(async_copies.create_group, 'create_group')}({kw.ctx})")


def _wait(kw: Any, op: nvgpu.DeviceAsyncWaitOp) -> None:
    wait = kw.w.global_(async_copies.wait_groups, "wait_groups")
    kw.w.line(f"{wait}({kw.ctx}, {op.groups})")


COLLECTIVE_EMITTERS: dict[type[Operation], Callable[[Any, Any], None]] = {
    nvgpu.LdMatrixOp: _ldmatrix,
    nvgpu.MmaSyncOp: _mma,
    WarpgroupMmaStepOp: _warpgroup_step,
    WarpgroupMmaRegistersOp: _warpgroup_registers,
    nvgpu.DeviceAsyncCopyOp: _async_copy,
    nvgpu.DeviceAsyncCreateGroupOp: _create_group,
    nvgpu.DeviceAsyncWaitOp: _wait,
}
"""The collective ops' lockstep emitters, by op class."""

__all__ = ["COLLECTIVE_EMITTERS"]
