"""How a grid band's phases go to threads: the plan `affinec-map-threads` follows.

`plan_threads` picks the block's threads and, with a register tile, how many threads
run along each dimension of the accumulator phases, how wide a thread's contiguous
chunks are (`vector_width`) and how many reduction steps are unrolled together; it
refuses sizes that do not fit the band or the GPU. `threads.py` carries the plan out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import Operation

from affinec.base.diagnostics import PassError
from affinec.base.element_types import element_size
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import BLOCK, mapping_of
from affinec.dialects.nvvm_target import chip_of
from affinec.transforms.gpu.bands import Band, GridAnalysis, is_private

DEFAULT_THREADS_PER_BLOCK = 256
"""The block size when the phases are larger: 8 warps, a common sweet spot."""


def check_threads_per_block(op: Operation, threads_per_block: int) -> None:
    """Refuse a block size the chip `op` is compiled for does not launch."""
    most = chip_of(op).max_threads_per_block
    if threads_per_block < 0 or threads_per_block > most:
        raise PassError(
            op,
            f"threads-per-block must be between 1 and {most} "
            f"(0 picks one), got {threads_per_block}",
        )


@dataclass(frozen=True)
class ThreadPlan:
    """How a grid band's phases go to threads."""

    threads: int
    register_tile: tuple[int, ...] = ()
    """Per dimension of the accumulator phases, the iterations one thread owns
    (empty: every phase is shared out in turns)."""
    thread_extents: tuple[int, ...] = ()
    """Per dimension of the accumulator phases, the threads along it."""
    unroll_steps: int = 0
    """Steps of the innermost reduction loop of a register-tiled band unrolled
    together (0: none)."""
    vector_width: int = 1
    """Iterations a thread owns contiguously along the innermost dimension: its tile
    there is `vector_width`-wide chunks, consecutive threads taking consecutive
    chunks, so its reads of a buffer contiguous along that dimension can be one
    16-byte access per chunk."""


MAX_REGISTER_TILE = 256
"""Elements of one thread's register tile: its loops are unrolled, so more would be
slow to compile and spill."""

MAX_UNROLLED_STEPS = 16
"""The most steps of the innermost reduction loop unrolled (each step is a whole
register tile of multiply-adds)."""


def plan_threads(
    analysis: GridAnalysis,
    threads_per_block: int,
    register_tile: tuple[int, ...],
    vector_width: int = 0,
    unroll_steps: int = 0,
) -> ThreadPlan:
    """The threads of each block and how the phases share them; refuses a band
    already mapped and a register tile that does not fit the accumulator phases."""
    mapped = [p for p in analysis.phases if mapping_of(p.op) != BLOCK]
    if mapped:
        return _plan_beside_thread_bands(
            analysis, mapped, threads_per_block, register_tile
        )
    if not register_tile:
        # One thread per output of the block if it fits (the copies share out in
        # turns); else one per iteration of the largest phase.
        sized = accumulator_phases(analysis) or analysis.phases
        largest = max((p.total for p in sized), default=1)
        threads = threads_per_block or max(1, min(DEFAULT_THREADS_PER_BLOCK, largest))
        return ThreadPlan(threads)
    grid = analysis.grid.op
    phases = accumulator_phases(analysis)
    if not phases:
        raise PassError(
            grid,
            "register-tile is given but no phase of this grid band keeps a private "
            "buffer (an accumulator) to tile",
        )
    extents = phases[0].extents
    if len(register_tile) != len(extents):
        raise PassError(
            phases[0].op,
            f"register-tile has {len(register_tile)} sizes for a band of "
            f"{len(extents)} dimensions",
        )
    if any(r < 1 for r in register_tile):
        raise PassError(
            grid, f"register-tile sizes must be positive, got {register_tile}"
        )
    if math.prod(register_tile) > MAX_REGISTER_TILE:
        raise PassError(
            grid,
            f"a register tile of {math.prod(register_tile)} elements (at most "
            f"{MAX_REGISTER_TILE})",
        )
    thread_extents = tuple(
        -(-e // r) for e, r in zip(extents, register_tile, strict=True)
    )
    threads = math.prod(thread_extents)
    if threads == 0:  # a band that never runs has no threads to tile for
        raise PassError(
            phases[0].op,
            f"register-tile over a band of {'x'.join(map(str, extents))} "
            "iterations, which runs none",
        )
    if threads_per_block and threads_per_block != threads:
        raise PassError(
            phases[0].op,
            f"register-tile {','.join(map(str, register_tile))} over a band of "
            f"{'x'.join(map(str, extents))} needs {threads} threads, but "
            f"threads-per-block is {threads_per_block}",
        )
    if threads > (most := chip_of(phases[0].op).max_threads_per_block):
        raise PassError(
            phases[0].op,
            f"register-tile {','.join(map(str, register_tile))} leaves {threads} "
            f"threads, more than {most}",
        )
    if vector_width == 0:
        vector_width = _natural_vector_width(phases, register_tile[-1])
    elif vector_width < 1 or register_tile[-1] % vector_width:
        raise PassError(
            phases[0].op,
            f"vector-width {vector_width} does not divide the register tile's "
            f"innermost size {register_tile[-1]}",
        )
    if not 0 <= unroll_steps <= MAX_UNROLLED_STEPS:
        raise PassError(
            phases[0].op,
            f"unroll-steps must be between 0 and {MAX_UNROLLED_STEPS}, got "
            f"{unroll_steps}",
        )
    return ThreadPlan(
        threads, register_tile, thread_extents, unroll_steps, vector_width
    )


VECTOR_BYTES = 16


def _natural_vector_width(phases: list[Band], innermost: int) -> int:
    """16 bytes of the narrowest element the phases read from shared memory, if the
    tile's innermost size is a multiple of it; else 1 (strided)."""
    sizes = [
        element_size(o.memref.type.get_element_type())  # pyright: ignore
        for p in phases
        for o in p.op.walk()
        if isinstance(o, affine.LoadOp)
        and gpu.memory_space(o.memref.type) == gpu.WORKGROUP_ADDRESS_SPACE
    ]
    if not sizes:
        return 1
    width = VECTOR_BYTES // min(sizes)
    return width if innermost % width == 0 else 1


def _plan_beside_thread_bands(
    analysis: GridAnalysis,
    mapped: list[Band],
    threads_per_block: int,
    register_tile: tuple[int, ...],
) -> ThreadPlan:
    """Some phases are thread bands already (a warp-level MMA): their size is the
    block's, and the block bands left are shared out in turns over it."""
    sizes = {p.total for p in mapped}
    if len(sizes) > 1:
        raise PassError(
            analysis.grid.op,
            f"its thread bands have different sizes ({sorted(sizes)})",
        )
    threads = sizes.pop()
    if threads_per_block and threads_per_block != threads:
        raise PassError(
            mapped[0].op,
            f"the thread bands have {threads} threads, but threads-per-block is "
            f"{threads_per_block}",
        )
    if register_tile:
        raise PassError(
            mapped[0].op,
            "register-tile applies to block bands with an accumulator; this grid "
            "band's accumulator is already mapped to threads",
        )
    if not any(mapping_of(p.op) == BLOCK for p in analysis.phases):
        raise PassError(mapped[0].op, "this band is already mapped to threads")
    return ThreadPlan(threads)


def accumulator_phases(analysis: GridAnalysis) -> list[Band]:
    """The phases that touch a private buffer (all of one iteration space)."""
    return [
        p
        for p in analysis.phases
        if any(
            isinstance(o, affine.LoadOp | affine.StoreOp) and is_private(o.memref)
            for o in p.op.walk()
        )
    ]


def turns(phase: Band, threads: int) -> int:
    return -(-phase.total // threads)
