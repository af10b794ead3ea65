"""NVIDIA's PTX assembler as a checker and a resource report.

`assemble(ptx, arch)` runs `ptxas -v` on the PTX (found on PATH, under `$CUDA_HOME/bin`,
in `/usr/local/cuda/bin` or NVIDIA's wheels: `find_cuda_tool`); an error of the assembler raises `PtxasError` with its
message, and what `-v` prints is parsed into one `Resources` per kernel:

    ptxas info    : Function properties for conv_kernel
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem, ...

ptxas runs on the CPU: no GPU is needed. What a report means for how many blocks a
multiprocessor holds at once is `resident_blocks` (the benchmark's occupancy and the
tuner's cost model both ask it).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from xdsl.utils.exceptions import DiagnosticException

PTXAS_TIMEOUT = 120


@dataclass(frozen=True)
class Multiprocessor:
    """The per-multiprocessor limits that decide residency (H100's, sm_90)."""

    registers: int = 65536
    shared_bytes: int = 228 * 1024
    reserved_shared_bytes: int = 1024
    """Shared memory the driver keeps per resident block (sm_80 and newer)."""
    max_threads: int = 2048
    max_blocks: int = 32


H100_MULTIPROCESSOR = Multiprocessor()


def resident_blocks(
    registers: int,
    threads: int,
    shared_bytes: int,
    sm: Multiprocessor = H100_MULTIPROCESSOR,
) -> int:
    """Blocks a multiprocessor holds at once (0: the block does not fit one), from
    registers (allocated per warp in units of 256), threads and shared memory."""
    if threads < 1 or registers > 255:
        return 0
    warps = -(-threads // 32)
    per_warp = -(-max(registers, 1) * 32 // 256) * 256
    limits = [
        sm.max_blocks,
        sm.max_threads // (warps * 32),
        sm.registers // (per_warp * warps),
    ]
    if shared_bytes:
        limits.append(sm.shared_bytes // (shared_bytes + sm.reserved_shared_bytes))
    return max(0, min(limits))


class PtxasError(DiagnosticException):
    """ptxas refused the PTX (or could not be run); the message is ptxas's own."""


class PtxasNotFound(PtxasError):
    """No ptxas on PATH, under CUDA_HOME, in /usr/local/cuda/bin or NVIDIA's wheels."""


@dataclass(frozen=True)
class Resources:
    """What one kernel uses on the GPU, as ptxas reports it."""

    kernel: str
    arch: str
    registers: int = 0
    """Registers per thread."""
    shared_memory: int = 0
    """Bytes of static shared memory per block."""
    local_memory: int = 0
    """Bytes of local memory per thread (ptxas's `lmem`, older architectures)."""
    stack_frame: int = 0
    """Bytes of stack per thread: local arrays that did not become registers."""
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0
    constant_memory: int = 0
    """Bytes of constant bank 0 (kernel parameters and the like)."""
    advisories: tuple[str, ...] = ()
    """What ptxas says it did to the kernel at a cost (its `(C75xx)` notes, each
    once, with how often): wgmma serialized for want of registers, warpgroup
    waits it inserted. A kernel that has any is slower than its PTX reads."""

    def describe(self) -> str:
        notes = "".join(f"; ptxas: {note}" for note in self.advisories)
        return (
            f"{self.kernel} ({self.arch}): {self.registers} registers, "
            f"{self.shared_memory} bytes shared memory, {self.stack_frame} bytes stack, "
            f"{self.local_memory} bytes local memory, {self.spill_stores} bytes spill "
            f"stores, {self.spill_loads} bytes spill loads, {self.barriers} barriers"
            f"{notes}"
        )


def find_cuda_tool(name: str) -> str | None:
    """The path of one of CUDA's command-line tools (`ptxas`, `cuobjdump`,
    `nvdisasm`): on PATH, under `$CUDA_HOME/bin`, in `/usr/local/cuda/bin`, or from
    NVIDIA's wheels (`nvidia/cu13/bin`, as `pip install nvidia-cuda-cuobjdump` puts
    it); None where it is nowhere."""
    found = shutil.which(name)
    if found:
        return found
    candidates = []
    if cuda_home := os.environ.get("CUDA_HOME"):
        candidates.append(Path(cuda_home) / "bin" / name)
    candidates.append(Path("/usr/local/cuda/bin") / name)
    wheels = importlib.util.find_spec("nvidia")
    for folder in (wheels.submodule_search_locations or []) if wheels else []:
        candidates.append(Path(folder) / "cu13" / "bin" / name)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def find_ptxas() -> str | None:
    """The path of ptxas, or None (`find_cuda_tool`)."""
    return find_cuda_tool("ptxas")


def assemble(
    ptx: str, arch: str = "sm_80", cubin: Path | None = None
) -> dict[str, Resources]:
    """Assemble `ptx` for `arch` with `ptxas -v`; the resources of each kernel.
    With `cubin`, the assembled code is written there too (for `cuobjdump`).

    Raises `PtxasError` with ptxas's message if it refuses the PTX.
    """
    ptxas = find_ptxas()
    if ptxas is None:
        raise PtxasNotFound(
            "ptxas not found (looked on PATH, under $CUDA_HOME/bin, in "
            "/usr/local/cuda/bin and NVIDIA's wheels)"
        )
    with tempfile.TemporaryDirectory(prefix="affinec-ptxas-") as tmp:
        source = Path(tmp) / "kernel.ptx"
        source.write_text(ptx)
        try:
            done = subprocess.run(
                [
                    ptxas,
                    f"-arch={arch}",
                    "-v",
                    "-o",
                    str(cubin or Path(tmp) / "kernel.cubin"),
                    str(source),
                ],
                capture_output=True,
                text=True,
                timeout=PTXAS_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise PtxasError(f"could not run {ptxas}: {e}") from None
    output = done.stdout + done.stderr
    if done.returncode != 0:
        lines = output.replace(str(source), "<ptx>").strip().splitlines()
        first = next(
            (line for line in lines if "error" in line), lines[0] if lines else ""
        )
        # The first line alone must say what is wrong: command lines print only it.
        raise PtxasError(
            f"ptxas -arch={arch} refused the PTX: {first.strip()}\n" + "\n".join(lines)
        )
    return parse_verbose(output, arch)


_FUNCTION = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_NUMBERS = {
    "stack_frame": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "shared_memory": re.compile(r"(\d+) bytes smem"),
    "constant_memory": re.compile(r"(\d+) bytes cmem\[0\]"),
}
_LOCAL = re.compile(r"(\d+)(?:\+(\d+))? bytes lmem")


_ADVISORY = re.compile(r"\((C\d+)\) (.*) in (?:the )?function '([^']+)'")
_LINE = re.compile(r" in around line \d+")


def _advisories(output: str) -> dict[str, tuple[str, ...]]:
    """ptxas's `(C75xx)` notes by kernel: each note once, `(N times)` where
    repeated (a wgmma route's inserted waits come one per instruction)."""
    counts: dict[str, dict[str, int]] = {}
    for code, text, kernel in _ADVISORY.findall(_LINE.sub("", output)):
        note = f"{code} {text}"
        notes = counts.setdefault(kernel, {})
        notes[note] = notes.get(note, 0) + 1
    return {
        kernel: tuple(
            note if n == 1 else f"{note} ({n} times)" for note, n in notes.items()
        )
        for kernel, notes in counts.items()
    }


def parse_verbose(output: str, arch: str) -> dict[str, Resources]:
    """The per-kernel resources in what `ptxas -v` printed."""
    found: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in output.splitlines():
        if m := _FUNCTION.search(line) or _PROPERTIES.search(line):
            current = m[1]
            found.setdefault(current, {})
        if current is None:
            continue
        fields = found[current]
        for name, pattern in _NUMBERS.items():
            if m := pattern.search(line):
                fields[name] = int(m[1])
        if m := _LOCAL.search(line):
            fields["local_memory"] = int(m[1]) + int(m[2] or 0)
    advisories = _advisories(output)
    return {
        name: Resources(name, arch, **fields, advisories=advisories.get(name, ()))
        for name, fields in found.items()
    }
