"""Where a block's shared buffers live: the layout rule, once.

A block whose shared buffers fit in what a kernel may declare statically (48 KiB)
keeps one static buffer each. Past that they are carved out of dynamic shared
memory, each at a byte offset aligned to `SHARED_ALIGNMENT`, one after another; a
buffer marked as an overlay (its accesses all follow a barrier after the last
access to the others, `affinec.overlay`) takes the offset of a buffer of its element
type at least its size, the smallest such, where there is one:

    input_shared   memref<2x64x40xf16>   offset     0   (10240 bytes)
    filter_shared  memref<2x32x136xf16>  offset 10240   (17408 bytes)
    output_shared  memref<64x128xf16>    offset 10240   (overlay, 16384 bytes)

A buffer may need more than `SHARED_ALIGNMENT`: a tile TMA swizzles with 128 B
starts on 1024 bytes (`affinec.shared_alignments` on the kernel lists each
buffer's, as the pass that made the need recorded it).

`affinec-plan-shared-memory` decides the layout of each block with this rule and
records it in the IR; `convert-gpu-to-nvvm` follows the record (and applies the rule
itself only to kernels nothing planned). Whether the layout fits the chip's block is
`shared_overflow`, the one wording of that refusal on every route.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from xdsl.dialects.builtin import MemRefType

from affinec.base.element_types import memref_bytes
from affinec.hardware.chips import Chip

SHARED_ALIGNMENT = 16
"""Bytes every shared buffer starts on: what the widest access (16-byte vectors,
`cp.async` of 16 bytes, `ldmatrix` rows) needs."""


def aligned(size: int, alignment: int = SHARED_ALIGNMENT) -> int:
    """`size` rounded up to `alignment`."""
    return -(-size // alignment) * alignment


def lay_out_shared(
    types: Sequence[MemRefType],
    overlays: Collection[int],
    static_limit: int,
    alignments: Sequence[int] = (),
) -> list[int]:
    """Byte offsets in dynamic shared memory of buffers of `types` (positions in
    `overlays` may share bytes with the others; buffer k starts on `alignments[k]`
    bytes, `SHARED_ALIGNMENT` when not given), or [] when they fit in
    `static_limit` bytes of static shared memory."""
    sizes = [memref_bytes(t) for t in types]
    align = list(alignments) or [SHARED_ALIGNMENT] * len(types)
    if sum(aligned(n, a) for n, a in zip(sizes, align, strict=True)) <= static_limit:
        return []
    offsets = [0] * len(types)
    end = 0
    for k, n in enumerate(sizes):
        if k not in overlays:
            start = aligned(end, align[k])
            offsets[k], end = start, start + aligned(n)
    for k in sorted(overlays):
        element = types[k].get_element_type()
        hosts = [
            (sizes[j], j)
            for j, t in enumerate(types)
            if j not in overlays
            and t.get_element_type() == element
            and sizes[j] >= sizes[k]
        ]
        hosts = [h for h in hosts if offsets[h[1]] % align[k] == 0]
        if hosts:
            offsets[k] = offsets[min(hosts)[1]]
        else:
            start = aligned(end, align[k])
            offsets[k], end = start, start + aligned(sizes[k])
    return offsets


def layout_bytes(types: Sequence[MemRefType], offsets: Sequence[int]) -> int:
    """Bytes the layout takes: dynamic (`offsets` given) or all static."""
    sizes = [memref_bytes(t) for t in types]
    if offsets:
        return max((o + n for o, n in zip(offsets, sizes, strict=True)), default=0)
    return sum(map(aligned, sizes))


def placed_layout(
    types: Sequence[MemRefType],
    overlays: Collection[int],
    target: Chip,
    alignments: Sequence[int] = (),
) -> tuple[list[int], int]:
    """The layout of buffers of `types` on `target` (`lay_out_shared`'s offsets, []
    when static) and the bytes it takes."""
    offsets = lay_out_shared(
        types, overlays, target.static_shared_per_block, alignments
    )
    return offsets, layout_bytes(types, offsets)


def shared_overflow(total: int, target: Chip, counted: str = "") -> str | None:
    """Why a block whose shared buffers take `total` bytes does not fit on `target`
    (`counted` says how they were counted, as " once padded and placed"), or None
    where they fit: a block has at most `max_shared_per_block` bytes, past the static
    limit as dynamic shared memory the kernel opts into."""
    if total <= target.max_shared_per_block:
        return None
    return (
        f"the block's shared buffers take {total} bytes{counted}, more than the "
        f"{target.max_shared_per_block} bytes of shared memory a block may have on "
        f"{target.name}"
    )


def layout_error(
    types: Sequence[MemRefType],
    offsets: Sequence[int],
    overlays: Collection[int],
    alignments: Sequence[int] = (),
) -> str | None:
    """What is wrong with a recorded layout (a count that does not match, an offset
    not aligned, two buffers sharing bytes where neither is an overlay), or None."""
    if len(offsets) != len(types):
        return f"{len(offsets)} offsets for {len(types)} shared buffers"
    align = list(alignments) or [SHARED_ALIGNMENT] * len(types)
    for k, o in enumerate(offsets):
        if o < 0 or o % max(align[k], SHARED_ALIGNMENT):
            return (
                f"shared buffer #{k} at offset {o}, not a multiple of "
                f"{max(align[k], SHARED_ALIGNMENT)} bytes"
            )
    spans = [(o, o + memref_bytes(t)) for o, t in zip(offsets, types, strict=True)]
    for i, (a0, a1) in enumerate(spans):
        for j in range(i + 1, len(spans)):
            b0, b1 = spans[j]
            if a0 < b1 and b0 < a1 and i not in overlays and j not in overlays:
                return (
                    f"shared buffers #{i} and #{j} share bytes ({a0}-{a1} and "
                    f"{b0}-{b1}) but neither is an overlay"
                )
    return None
