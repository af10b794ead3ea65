"""A kernel as text to read: its signature, its one-line `repr` and the few lines
of its `str` (what it computes, with which configuration, for which GPU, how each
kernel is launched, the registers a thread takes where something measured them).
Nothing is loaded or assembled to write them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from affinec.backend.kernel_arguments import Parameter
    from affinec.backend.runtime import Kernel


def kernel_signature(arguments: Sequence[Parameter]) -> str:
    """The parameters a call passes, each with its shape (`?` for a batch of any
    size) and dtype."""
    return ", ".join(
        f"{p.name}: {'x'.join('?' if d < 0 else str(d) for d in p.shape)}x{p.dtype}"
        for p in arguments
    )


def kernel_repr(kernel: Kernel) -> str:
    """One line: entry point, spec, arch and the size of the PTX."""
    parts = [repr(kernel.name)]
    for key in ("spec", "arch"):
        if kernel.info.get(key):
            parts.append(f"{key}={kernel.info[key]!r}")
    parts.append(f"ptx={len(kernel.ptx)} chars")
    return f"<affinec Kernel {' '.join(parts)}>"


def kernel_str(kernel: Kernel) -> str:
    """A few lines: what the kernel computes, with which configuration, for which
    GPU, how each kernel is launched, the registers a thread takes when known, and
    where the PTX is."""
    info = kernel.info
    lines = [f"affinec Kernel {kernel.name}({kernel.signature()})"]
    for key, label in (
        ("spec", "spec"),
        ("config", "config"),
        ("config_source", "config from"),
        ("arch", "arch"),
    ):
        if info.get(key):
            lines.append(f"  {label}: {info[key]}")
    registers = known_registers(kernel)
    for launch in kernel.launches:
        grid = "x".join(
            "(by batch)" if k == 0 and launch.batch_grid is not None else str(g)
            for k, g in enumerate(launch.grid)
        )
        block = "x".join(str(b) for b in launch.block)
        text = f"  launch {launch.name}: grid {grid}, block {block}"
        if launch.shared_memory:
            text += f", {launch.shared_memory} bytes dynamic shared memory"
        if launch.name in registers:
            text += f", {registers[launch.name]} registers per thread"
        lines.append(text)
    lines.append(
        f"  ptx: {len(kernel.ptx)} characters (kernel.ptx; `affinec compile` prints it)"
    )
    return "\n".join(lines)


def known_registers(kernel: Kernel) -> dict[str, int]:
    """Registers per thread of each kernel where something already measured them:
    ptxas's report in `info["resources"]`, or the loaded kernels' attributes.
    Nothing is loaded or assembled to find out."""
    found: dict[str, int] = {}
    for resources in kernel.info.get("resources") or ():
        registers = getattr(resources, "registers", None)
        if isinstance(registers, int) and registers > 0:
            found[resources.kernel] = registers
    loaded = kernel.__dict__.get("functions") or {}
    for name, function in loaded.items():
        registers = getattr(getattr(function, "attrs", None), "regs", None)
        if isinstance(registers, int) and registers > 0:
            found.setdefault(name, registers)
    return found


__all__ = ["kernel_repr", "kernel_str", "kernel_signature", "known_registers"]
