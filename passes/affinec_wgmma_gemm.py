"""`affinec-wgmma-gemm`: a naive matrix product (or convolution) as a Hopper kernel — TMA copies into
swizzled shared tiles, an mbarrier pipeline of `stages`, warpgroup MMA (`wgmma`)
reading both operands from shared memory, the epilogue fused in the copy-out
(`affinec/transforms/gpu/wgmma_text.py` has the kernel, step by step).

    func.func @matmul(%A, %B, %bias, %C) {
      affine.parallel (%i, %j) = (0, 0) to (M, N) {
        ... affine.for %p = 0 to K { acc += A[i, p] * B[p, j] } ...
        affine.store relu(acc + bias[j]), %C[%i, %j]
      }
    }

becomes

    func.func @matmul(%A, %B, %bias, %C) {
      %mapA = nvgpu.tma.create.descriptor ... box[128, 64]
      %mapB = nvgpu.tma.create.descriptor ... box[64, 64]
      gpu.launch_func @kernels::@matmul_kernel blocks in (N/128, M/128, 1)
          threads in (128, 1, 1) args(%mapA, %mapB, %bias, %C)
    }
    gpu.module @kernels {
      gpu.func @matmul_kernel(%mapA, %mapB, %bias, %C) workgroup(stages...) kernel {
        mbarrier.init; TMA loads of the first stages; per K step: try_wait.parity,
        warpgroup.generate.descriptor x 2, warpgroup.mma; reload the freed stage;
        warpgroup.mma.store to a shared tile; copy out through the epilogue
      }
    }

An NHWC/RSCK convolution is the same kernel over its taps x channels: a block's
rows are a box of one image's output pixels, each tap's rows of A one 4-D TMA box
of the input at the tap's offset (the padding is TMA's zero fill; with a stride,
one 5-D box of a phase of the stride in the input seen as steps and phases), B a
box of the tap's filter (`wgmma_plan.ConvGeometry`).

The contraction is recognized by the module's spec (`affinec.spec`: a matrix
product or such a convolution, of f16 or bf16; `route_refusal` says what else is
refused) and the function must be the naive IR of that spec, untouched: the pass
writes the kernel from the spec, so it refuses anything else. The chip must
have `wgmma` (`nvvm-attach-target{chip=sm_90a}`). The kernel sums in `wgmma`'s
order, so `Pipeline.run(check=True)` holds it to the dtype's tolerance. Next:
`convert-nvgpu-to-nvvm`, `convert-scf-to-cf`, `convert-gpu-to-nvvm`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.printer import Printer

from affinec.base.diagnostics import PassError, remark
from affinec.base.locating_parser import parse_module
from affinec.dialects.affinec import function_named, required_spec
from affinec.dialects.nvvm_target import chip_of
from affinec.frontend.naive import build
from affinec.ir.context import make_context, require_affinec_dialects
from affinec.transforms.gpu.wgmma_gemm import replace_with_kernel
from affinec.transforms.gpu.wgmma_plan import SCHEDULES, plan_of, route_refusal


@dataclass(frozen=True)
class AffinecWgmmaGemm(ModulePass):
    """Write the spec's naive product or convolution as a TMA + wgmma kernel."""

    name = "affinec-wgmma-gemm"

    tile_sizes: tuple[int, ...] = (128, 128)
    """A block's tile of C: rows (64 or 128) and columns (16 to 256, a power of 2;
    at most 128 x 128 or 64 x 256 accumulators a multiplying warpgroup)."""
    stages: int = 4
    """Shared stages of the K pipeline (each 64 of K): 1 or more, 2 or more with MMAs
    in flight."""
    schedule: str = "in-flight"
    """`waited` (each step's MMAs finish before the next step), `in-flight` (they run
    while the next step's tiles are awaited), `specialized` (a loading warpgroup and
    a multiplying one, stages handed back on mbarriers), `cooperative` (a loading
    warpgroup and two multiplying ones, 64 rows of a 128-row tile each: tiles up to
    128 x 256)."""

    splits: int = 1
    """Split-K: the channel steps (of 64) cut into this many partial sums, each a
    layer of blocks writing f32 partials to a workspace, added in a fixed order by a
    second kernel that applies the epilogue (deterministic; for layers of few
    blocks). A divisor of the steps a tap takes."""

    @property
    def changes_rounding(self) -> bool:
        return True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        if len(self.tile_sizes) != 2:
            raise PassError(
                op, f"tile-sizes takes two sizes (rows, columns), got {self.tile_sizes}"
            )
        if min(self.tile_sizes) < 1:
            raise PassError(op, f"tile-sizes must be positive, got {self.tile_sizes}")
        if self.schedule not in SCHEDULES:
            raise PassError(
                op,
                f"schedule must be one of {', '.join(SCHEDULES)}, got "
                f"'{self.schedule}'",
            )
        target = chip_of(op)
        if not target.has("wgmma"):
            raise PassError(
                op,
                f"{self.name} writes wgmma, which {target.name} does not have: "
                "nvvm-attach-target{chip=sm_90a} first",
            )
        spec = required_spec(op, self.name)
        why = route_refusal(spec)
        if why is not None:
            raise PassError(op, f"{self.name} needs {why} ({spec.to_text()})")
        (expected,) = (
            o for o in build(spec).body.block.ops if isinstance(o, func.FuncOp)
        )
        fn = function_named(op, expected.sym_name.data)
        if fn is None or not _same_function(fn, expected):
            raise PassError(
                fn or op,
                f"{self.name} writes the kernel of the spec '{spec.to_text()}' and "
                "needs that spec's naive IR, untouched (it runs first)",
            )
        a, b, *_, c = (arg.name_hint for arg in fn.body.block.args)
        plan = plan_of(
            spec,
            (self.tile_sizes[0], self.tile_sizes[1]),
            self.stages,
            self.schedule,
            function=expected.sym_name.data,
            names=(a or "A", b or "B", c or "C"),
            splits=self.splits,
        )
        used = plan.stages_in_flight
        why = replace(plan, stages=used).problems(target.max_shared_per_block)
        if why:
            raise PassError(fn, f"{self.name}: " + "; ".join(why))
        if used < plan.stages:
            remark(
                fn,
                f"{plan.stages} stages asked for {plan.steps} steps of K: {used} "
                "(no more can be in flight)",
            )
        replace_with_kernel(op, fn, replace(plan, stages=used))


def _same_function(fn: func.FuncOp, expected: func.FuncOp) -> bool:
    """Whether `fn` is `expected` up to the names of its values and the spelling of
    its affine maps (both read back from their text: a map over reordered operands
    prints as the same subscripts)."""
    ctx = make_context()

    def reread(f: func.FuncOp) -> func.FuncOp:
        text = io.StringIO()
        Printer(stream=text).print_op(f)
        module = parse_module(ctx, f"builtin.module {{\n{text.getvalue()}\n}}")
        return next(o for o in module.walk() if isinstance(o, func.FuncOp))

    ours, theirs = reread(fn), reread(expected)
    return ours.is_structurally_equivalent(theirs, {ours.parent: theirs.parent})
