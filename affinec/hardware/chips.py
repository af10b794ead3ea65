"""What each GPU architecture gives a kernel: the one place its numbers live.

The IR names the chip it is compiled for (`#nvvm.target<chip = "sm_90">`, set by
`nvvm-attach-target` or by `compile_to_ptx` from its `arch`); every pass that plans
against a limit reads it through `chip_of` (`affinec.dialects.nvvm_target`) and
looks the numbers up here, so a compile for sm_80 is planned within sm_80's shared
memory and one for sm_90 within sm_90's.

    chip("sm_90").max_shared_per_block      # 232448: 227 KiB, opted into
    chip("sm_86").has("wgmma")              # False

The figures are NVIDIA's, per compute capability.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024

WARP_SIZE = 32
"""Threads of a warp, on every NVIDIA architecture."""
SHARED_BANKS = 32
"""Banks of shared memory, each `BANK_BYTES` wide (a warp's access is conflict-free
when its lanes touch distinct banks, or the same word)."""
BANK_BYTES = 4
DEFAULT_SHARED_PER_BLOCK = 48 * KIB
"""Shared memory a block may have without opting in (static, or dynamic at launch),
on every architecture: a launch asking more must raise the kernel's limit first."""
MMA_SHAPES: dict[str, tuple[int, int, int]] = {
    "f16": (16, 8, 16),
    "bf16": (16, 8, 16),
    "tf32": (16, 8, 8),
}
"""The `mma.sync` shape (m, n, k) affinec uses for each operand type (f32
accumulation), on every architecture from sm_80 on."""


@dataclass(frozen=True)
class Chip:
    """One GPU architecture as a kernel sees it."""

    name: str
    """`sm_80`, ..., `sm_90a` (the `a`: architecture-specific instructions)."""
    shared_per_multiprocessor: int
    """Bytes of shared memory a multiprocessor has for its blocks."""
    max_shared_per_block: int
    """The most a block may have (past `static_shared_per_block` only as dynamic
    shared memory the kernel opts into)."""
    static_shared_per_block: int = DEFAULT_SHARED_PER_BLOCK
    """The most a kernel may declare statically (or take dynamically without
    opting in)."""
    reserved_shared_per_block: int = 1 * KIB
    """What the driver keeps of a multiprocessor's shared memory for each block."""
    registers_per_multiprocessor: int = 64 * KIB
    max_registers_per_thread: int = 255
    max_threads_per_block: int = 1024
    max_warps_per_multiprocessor: int = 64
    max_blocks_per_multiprocessor: int = 32
    warp_size: int = WARP_SIZE
    features: frozenset[str] = frozenset({"cp.async", "ldmatrix", "mma.sync"})
    """Instructions beyond the basics: `cp.async`, `ldmatrix`, `mma.sync`, `wgmma`,
    `tma`, `mbarrier`, `setmaxnreg`."""

    def has(self, feature: str) -> bool:
        return feature in self.features

    def shared_per_block_of(self, blocks: int) -> int:
        """The shared memory each of `blocks` blocks on one multiprocessor may have."""
        return self.shared_per_multiprocessor // blocks - self.reserved_shared_per_block


_AMPERE = frozenset({"cp.async", "ldmatrix", "mma.sync", "mbarrier"})
_HOPPER = _AMPERE | {"tma", "cluster"}

CHIPS: dict[str, Chip] = {
    c.name: c
    for c in (
        Chip("sm_80", 164 * KIB, 163 * KIB, features=_AMPERE),
        Chip("sm_86", 100 * KIB, 99 * KIB, max_warps_per_multiprocessor=48,
             max_blocks_per_multiprocessor=16, features=_AMPERE),
        Chip("sm_89", 100 * KIB, 99 * KIB, max_warps_per_multiprocessor=48,
             max_blocks_per_multiprocessor=24, features=_AMPERE),
        Chip("sm_90", 228 * KIB, 227 * KIB, features=_HOPPER),
        Chip("sm_90a", 228 * KIB, 227 * KIB,
             features=_HOPPER | {"wgmma", "setmaxnreg"}),
    )
}  # fmt: skip
"""The architectures affinec knows, by name."""

ARCHS = ("sm_80", "sm_90", "sm_90a")
"""The architectures affinec emits PTX for (the rest of `CHIPS` it plans for only):
`sm_90a` is the H100's architecture-specific variant (`.target sm_90a`: the
instructions of Hopper's warpgroups and tensor memory accelerator, which PTX for
plain sm_90 may not use; its PTX runs on the H100 only)."""
DEFAULT_ARCH = "sm_80"


def chip(name: str) -> Chip:
    """The architecture `name`, or a ValueError naming the known ones."""
    try:
        return CHIPS[name]
    except KeyError:
        raise ValueError(
            f"unknown GPU architecture '{name}' (expected one of {', '.join(CHIPS)})"
        ) from None
