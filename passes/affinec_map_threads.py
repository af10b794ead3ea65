"""`affinec-map-threads`: distribute each block band to the block's threads.

Iteration `lin` of a block band (row-major over its extents) goes to thread
`lin mod T`, in its turn `lin floordiv T`; the band becomes a thread band
(`{affinec.mapping = "thread"}`, one iteration per thread) holding the thread's turn
loop and a guard for the band's end and partial tiles. Private buffers (memory space
5) shrink to one element per turn. `affinec/transforms/gpu/threads.py` has the
details and an example.

    affine.parallel (%t) = (0) to (16) {
      affine.store %zero, %acc[%t] : memref<16xf32, 5 : i64>
    } {affinec.mapping = "block"}

becomes, with `threads-per-block=8`:

    affine.parallel (%tx) = (0) to (8) {
      affine.for %j = 0 to 2 {
        %t = affine.apply affine_map<(d0, d1) -> (d0 + d1 * 8)>(%tx, %j)
        affine.store %zero, %acc[%j] : memref<2xf32, 5 : i64>
      } {affinec.unroll}
    } {affinec.mapping = "thread"}

With `register-tile` (one size per dimension of the bands that keep a private
accumulator), each thread owns a small tile of those bands instead: along dimension
`d`, thread `t_d` runs iterations `q * T_d + t_d` (`q` below the tile size, `T_d` the
threads along `d`; along the innermost dimension in chunks of `vector-width`
contiguous iterations, so one 16-byte shared-memory load serves a chunk), the
reduction loops of the band move outside the tile's unrolled loops (the innermost
of them unrolled by `unroll-steps`, if asked), and the accumulator becomes the
thread's register tile. Every value read in
the innermost body then serves a whole row or column of the tile, as in fast SIMT
kernels; the order of summation of each output is unchanged. A chunk whose outputs
are consecutive in global memory and start at a multiple of its width is stored as
one `affine.vector_store` (16 bytes of f16 at most), the epilogue's operands along
it read as vectors too (`affinec/transforms/gpu/register_vectors.py`). The other bands (the
copies into shared memory) are shared out in turns over the same threads,
consecutive threads taking consecutive elements (coalesced).

Options: `threads-per-block` (0: the size of the bands that keep an accumulator, or
else of the largest band, at most 256; or the threads a register tile leaves), `register-tile`. Runs after
`affinec-place-buffers`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import refuse_unsupported
from affinec.transforms.gpu.bands import analyze_grid, grid_parallels, require_placed
from affinec.transforms.gpu.shared_memory_hazards import check_after_pass
from affinec.transforms.gpu.thread_plan import accumulator_phases
from affinec.transforms.gpu.threads import (
    MAX_UNROLLED_STEPS,
    check_threads_per_block,
    map_to_threads,
    plan_threads,
)


@dataclass(frozen=True)
class AffinecMapThreads(ModulePass):
    """Distribute block bands to the block's threads (thread bands, turn loops, guards)."""

    name = "affinec-map-threads"

    threads_per_block: int = 0
    """Threads of each block; 0 picks the accumulator bands' size (else the largest
    band's), at most 256 (with a register tile: the threads the tile leaves)."""

    register_tile: tuple[int, ...] = ()
    """Per dimension of the accumulator bands, the iterations one thread owns."""

    vector_width: int = 0
    """With a register tile: the iterations a thread owns contiguously along the
    innermost dimension (0: 16 bytes of the shared buffers' elements when the tile
    allows it, else 1: strided)."""

    unroll_steps: int = 0
    """With a register tile: unroll the innermost reduction loop by this many steps
    (0: leave it rolled). More steps merge more loads but keep more values alive."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        # Illegal whatever the input (the plan checks them only where they apply).
        if self.vector_width < 0:
            raise PassError(
                op, f"vector-width must be 0 or more, got {self.vector_width}"
            )
        if not 0 <= self.unroll_steps <= MAX_UNROLLED_STEPS:
            raise PassError(
                op,
                f"unroll-steps must be between 0 and {MAX_UNROLLED_STEPS}, got "
                f"{self.unroll_steps}",
            )
        grids = grid_parallels(op)
        for g in grids:
            check_threads_per_block(g, self.threads_per_block)
        analyses = [analyze_grid(g) for g in grids]
        # A grid band without an accumulator beside one with (the band that adds a
        # split reduction's partial sums) shares its iterations out in turns.
        tiled = [bool(accumulator_phases(a)) for a in analyses]
        work = []
        for analysis, accumulates in zip(analyses, tiled, strict=True):
            require_placed(analysis, self.name)
            plan = plan_threads(
                analysis,
                self.threads_per_block,
                self.register_tile if accumulates or not any(tiled) else (),
                self.vector_width,
                self.unroll_steps,
            )
            work.append((analysis, plan))
        for analysis, plan in work:
            map_to_threads(analysis, plan)
        check_after_pass(op)
