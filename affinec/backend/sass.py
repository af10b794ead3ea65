"""What ptxas made of the PTX: a kernel's SASS, the GPU's own instructions, as
`cuobjdump -sass` lists them (it calls `nvdisasm`; both are found as ptxas is, and
`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`, which the development
extra does, brings them where CUDA has only ptxas). No GPU is needed.

    /*0310*/   HMMA.16816.F32 R8, R24, R28, R8 ;   /* 0x0000001c1808723c */
                                         ->   "HMMA.16816.F32 R8, R24, R28, R8"

Two kernels whose instructions are the same, in the same order, are the same
kernel: a compiler change that leaves them alone needs no GPU to judge it.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from affinec.backend.ptxas import PtxasError, assemble, find_cuda_tool

_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


class SassUnavailable(PtxasError):
    """cuobjdump or nvdisasm is nowhere to be found."""


def sass_available() -> bool:
    """Whether `disassemble` can run here."""
    return find_cuda_tool("cuobjdump") is not None and (
        find_cuda_tool("nvdisasm") is not None
    )


def disassemble(cubin: Path) -> list[str]:
    """The instructions of `cubin`, in order, without their addresses and
    encodings."""
    cuobjdump, nvdisasm = find_cuda_tool("cuobjdump"), find_cuda_tool("nvdisasm")
    if cuobjdump is None or nvdisasm is None:
        raise SassUnavailable(
            "cuobjdump and nvdisasm not found (looked as for ptxas; `pip install "
            "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm` brings them)"
        )
    # cuobjdump finds nvdisasm on PATH only
    path = os.pathsep.join([str(Path(nvdisasm).parent), os.environ.get("PATH", "")])
    done = subprocess.run(
        [cuobjdump, "-sass", str(cubin)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
    )
    if done.returncode != 0:
        raise PtxasError(f"cuobjdump -sass failed: {done.stderr.strip()}")
    return _INSTRUCTION.findall(done.stdout)


def sass(ptx: str, arch: str) -> list[str]:
    """The instructions ptxas makes of `ptx` for `arch` (`disassemble`)."""
    with tempfile.TemporaryDirectory(prefix="affinec-sass-") as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        assemble(ptx, arch, cubin=cubin)
        return disassemble(cubin)


__all__ = ["SassUnavailable", "disassemble", "sass", "sass_available"]
