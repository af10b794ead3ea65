"""`affinec-split`: the reference design's splitting of the block-level loop.

The body of each block-level `affine.parallel` (`{affinec.mapping = "block"}`) becomes
three block-level loops: one zeroes the accumulators, one runs the reduction loops,
one reads the accumulators back, applies the epilogue and stores the output. The
scalar accumulator each iteration allocated is hoisted out and expanded into one
buffer with an element per block iteration, `memref.alloc`ed at the top of the
enclosing grid-level loop's body: a per-block scratch buffer, which the GPU lowering
places in registers or local memory (it is not deallocated: its lifetime is one grid
iteration).

    affine.parallel (%n0, %k0) = (0, 0) to (4, 2) {
      affine.parallel (%n1, %k1) = (0, 0) to (1, 16) {
        %acc = memref.alloca() : memref<f32>
        affine.store %zero, %acc[] : memref<f32>
        affine.for %c = 0 to 8 {
          ...
          %old = affine.load %acc[] : memref<f32>
          %new = arith.addf %old, %prod : f32
          affine.store %new, %acc[] : memref<f32>
        }
        %sum = affine.load %acc[] : memref<f32>
        %relu = arith.maximumf %sum, %zero : f32
        affine.store %relu, %out[%n0 + %n1, %k0 * 16 + %k1] : memref<4x32xf32>
      } {affinec.mapping = "block"}
    } {affinec.mapping = "grid"}

becomes

    affine.parallel (%n0, %k0) = (0, 0) to (4, 2) {
      %acc = memref.alloc() : memref<1x16xf32>
      affine.parallel (%n1, %k1) = (0, 0) to (1, 16) {
        affine.store %zero, %acc[%n1, %k1] : memref<1x16xf32>
      } {affinec.mapping = "block"}
      affine.parallel (%n1, %k1) = (0, 0) to (1, 16) {
        affine.for %c = 0 to 8 {
          ...
          %old = affine.load %acc[%n1, %k1] : memref<1x16xf32>
          %new = arith.addf %old, %prod : f32
          affine.store %new, %acc[%n1, %k1] : memref<1x16xf32>
        }
      } {affinec.mapping = "block"}
      affine.parallel (%n1, %k1) = (0, 0) to (1, 16) {
        %sum = affine.load %acc[%n1, %k1] : memref<1x16xf32>
        %relu = arith.maximumf %sum, %zero : f32
        affine.store %relu, %out[%n0 + %n1, %k0 * 16 + %k1] : memref<4x32xf32>
      } {affinec.mapping = "block"}
    } {affinec.mapping = "grid"}

The buffer is shaped like the largest block tile (a partial tile, whose bounds are
`min` groups, uses a corner of it); block loops in one grid body (the fast and slow
paths of `affine-loop-tile{separate=true}`) share it, since each finishes with it
before the next starts. Every iteration does the same arithmetic in the same order,
so the result is bit-identical.

A block loop without reduction loops or without an accumulator is left alone. The
pass refuses, before rewriting, a module without block-level loops, a block loop
outside a grid-level one, and a body whose parts pass values to each other or whose
iterations share memory they write (splitting runs every iteration's first part
before any second part).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import refuse_unsupported
from affinec.transforms.affine.split import BufferPool, split_parallel
from affinec.transforms.affine.split_analysis import plan_split, split_blocker
from affinec.transforms.mapped_bands import block_loops, grid_loop_of


@dataclass(frozen=True)
class AffinecSplitPass(ModulePass):
    """Split each block loop into zero, reduce and write-back loops over a block-shaped accumulator."""

    name = "affinec-split"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        work = []
        for loop in block_loops(op, self.name):
            plan = plan_split(loop)
            if plan is None:
                continue
            grid = grid_loop_of(loop, self.name)
            if (reason := split_blocker(loop, plan)) is not None:
                raise PassError(loop, f"cannot be split: {reason}")
            work.append((loop, plan, grid))
        pool = BufferPool()
        for loop, plan, grid in work:
            split_parallel(loop, plan, grid, pool)
