"""`gpu-kernel-outlining`: each `gpu.launch` body becomes a kernel `gpu.func`.

As MLIR's pass of the same name: the body moves into `gpu.func @<host>_kernel` of a
`gpu.module` of the same name, the launch becomes a `gpu.launch_func`, values the body
used from the host become kernel arguments (constants are copied in instead), and the
body's id and size arguments become `gpu.block_id`, `gpu.thread_id`, ... ops. Constant
launch sizes are recorded as `known_block_size` / `known_grid_size` and, with the
kernel's arguments, as the launch record `affinec.launch` (`affinec/launch.py`).

    func.func @conv(%in: memref<8xf32>) {
      gpu.launch blocks(%bx, ...) in (%gx = %c2, ...) threads(%tx, ...) in (...) {
        %v = memref.load %in[%tx] : memref<8xf32>
        gpu.terminator
      }
    }

becomes

    func.func @conv(%in: memref<8xf32>) {
      gpu.launch_func @conv_kernel::@conv_kernel blocks in (%c2, %c1, %c1)
          threads in (%c4, %c1, %c1) args(%in : memref<8xf32>)
    }
    gpu.module @conv_kernel {
      gpu.func @conv_kernel(%in: memref<8xf32>) kernel attributes {...} {
        %tx = gpu.thread_id x upper_bound 4
        %v = memref.load %in[%tx] : memref<8xf32>
        gpu.return
      }
    }

Differences from MLIR's pass, on MLIR's inputs: values without operands that the body
uses (constants) are copied into the kernel instead of passed as arguments; only the
ids and sizes the body uses become ops, with the launch's constant sizes as
`upper_bound`s; kernels get the launch record. Async launches, `module(@m)
function(@f)` names and private attributions are outlined as MLIR outlines them;
launches with clusters, or naming an existing module, are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.passes import ModulePass

from affinec.dialects import gpu
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.gpu.deferred_hazards import check_kernels
from affinec.transforms.gpu.outlining import check_outlinable, outline_launch


@dataclass(frozen=True)
class GpuKernelOutlining(ModulePass):
    """Outline gpu.launch bodies into gpu.func kernels called by gpu.launch_func."""

    name = "gpu-kernel-outlining"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        launches = [o for o in op.walk() if isinstance(o, gpu.LaunchOp)]
        taken = {
            o.properties["sym_name"].data  # pyright: ignore
            for o in op.body.block.ops
            if "sym_name" in o.properties
        } | {o.sym_name.data for o in op.body.block.ops if isinstance(o, gpu.ModuleOp)}
        for launch in launches:
            check_outlinable(launch, taken)
        for launch in launches:
            module = outline_launch(launch, taken)
            taken.add(module.sym_name.data)
            op.body.block.add_op(module)
        if launches:
            op.attributes[gpu.CONTAINER_MODULE] = UnitAttr()
        check_kernels(op)  # now, or beside LLVM in a compile (deferred_hazards)
