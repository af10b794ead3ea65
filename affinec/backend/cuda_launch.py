"""The CUDA calls the runtime makes: whether there is a GPU and which (`NoCudaGPU`
where there is none), a launch through cuda.core (as numba-cuda launches its own
kernels), a launch through the driver with every parameter by
value (`cuLaunchKernel`: TMA tensor maps are 128-byte parameters), the status of a
driver call, and a block's opt-in to more than 48 KiB of shared memory.
"""

from __future__ import annotations

import ctypes
import os
from functools import cache
from typing import TYPE_CHECKING, Any

from affinec.backend.errors import NoCudaGPU
from affinec.hardware.chips import ARCHS, DEFAULT_ARCH

if TYPE_CHECKING:
    from affinec.backend.launch_plans import Launch


def cuda_available() -> bool:
    """Whether a CUDA GPU and driver are usable from numba. Without a driver
    library to load, no (and numba, two seconds to import, is left unloaded)."""
    if not _driver_may_load():
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:  # numba-cuda missing or a broken driver: no GPU either way
        return False


_DRIVER_LIBRARIES = (
    "libcuda.so.1",
    "libcuda.so",
    "/usr/lib/libcuda.so.1",
    "/usr/lib/libcuda.so",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib64/libcuda.so",
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
    "nvcuda.dll",
    "libcuda.dylib",
    "/usr/local/cuda/lib/libcuda.dylib",
)
"""Where numba looks for the CUDA driver, and where Linux distributions, WSL and
Windows put it."""


@cache
def _driver_may_load() -> bool:
    """Whether numba could find a CUDA driver: one of its usual libraries loads, or
    the environment points numba elsewhere (its simulator, a driver's path). Asked
    once a process: every kernel call asks `cuda_available`."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") or os.environ.get("NUMBA_CUDA_DRIVER"):
        return True
    for name in _DRIVER_LIBRARIES:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def current_arch() -> str:
    """The architecture to compile for: the current GPU's, with its architecture-
    specific features where affinec knows them (`sm_90a` on an H100, so that its
    warpgroup instructions are in reach), or `sm_80` without a GPU (its PTX runs on
    every newer GPU too)."""
    if not cuda_available():
        return DEFAULT_ARCH
    from numba import cuda

    major, minor = cuda.get_current_device().compute_capability
    arch = f"sm_{major}{minor}"
    if f"{arch}a" in ARCHS:
        return f"{arch}a"
    return (
        arch
        if arch in ARCHS
        else max(
            (a for a in ARCHS if a[3:].isdigit() and int(a[3:]) <= major * 10 + minor),
            default=DEFAULT_ARCH,
        )
    )


def require_gpu() -> None:
    if not cuda_available():
        raise NoCudaGPU(
            "no CUDA GPU available: numba.cuda finds no device (everything up to PTX "
            "works without one; running a kernel needs a GPU)"
        )


def launch_function(
    function, grid, block, shared_memory: int, args: list, stream
) -> None:
    """Launch through cuda.core, as numba-cuda 0.30 launches its own kernels."""
    from cuda.core import LaunchConfig, launch
    from numba.cuda.cudadrv.driver import _to_core_stream

    config = LaunchConfig(
        grid=tuple(grid), block=tuple(block), shmem_size=shared_memory
    )
    launch(_to_core_stream(stream or 0), config, function.kernel, *args)


def driver_result(result: Any) -> Any:
    """The values of a cuda.bindings driver call, or a RuntimeError naming its
    status."""
    from cuda.bindings import driver

    status, *rest = result if isinstance(result, tuple) else (result,)
    if status != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver: {status}")
    return rest[0] if len(rest) == 1 else rest


def launch_by_driver(function, launch: Launch, values: list, stream) -> None:
    """`cuLaunchKernel` with each argument by value: a tensor map's 128 bytes, or an
    array's address."""
    import ctypes

    from cuda.bindings import driver

    types = tuple(
        None if isinstance(v, driver.CUtensorMap) else ctypes.c_void_p for v in values
    )
    handle = stream_handle(stream)
    driver_result(
        driver.cuLaunchKernel(
            function,
            *launch.grid,
            *launch.block,
            launch.shared_memory,
            handle,
            (tuple(values), types),
            0,
        )
    )


def stream_handle(stream: Any) -> int:
    """The CUDA stream handle of `stream`: None (the default stream, 0), a handle
    already, a torch stream (its `cuda_stream`) or a numba one."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if handle is not None:
        return int(handle)
    from numba.cuda.cudadrv.driver import _to_core_stream

    return int(_to_core_stream(stream).handle)


def torch_stream(device: int) -> int:
    """The handle of torch's current stream on CUDA device `device` (torch imported
    already: the arguments are its tensors)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:  # what torch.cuda.current_stream reads, without a Stream
        return int(raw(device))
    return int(torch.cuda.current_stream(device).cuda_stream)


def launch_parameters(
    function: Any,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared_memory: int,
    stream: int,
    parameters: int,
) -> None:
    """`cuLaunchKernel` with its parameters already packed: `parameters` is the
    address of the array of addresses of each parameter's bytes
    (`kernel_arguments.ParameterBlock`), `stream` a handle."""
    from cuda.bindings import driver

    result = driver.cuLaunchKernel(
        function, *grid, *block, shared_memory, stream, parameters, 0
    )
    status = result[0] if isinstance(result, tuple) else result
    if status != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver: cuLaunchKernel: {status}")


def shared_memory_limit() -> int | None:
    """The most shared memory a block may opt into on the current GPU (None if the
    driver does not say)."""
    from numba import cuda

    device = cuda.get_current_device()
    try:
        return int(device.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    except AttributeError:
        return None


def allow_dynamic_shared_memory(function, size: int) -> None:
    """Kernels get 48 KiB of dynamic shared memory unless they ask for more first."""
    from numba.cuda.cudadrv.driver import binding, driver

    attribute = (
        binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    )
    driver.cuKernelSetAttribute(attribute, size, function.handle, function.device.id)
