"""Loading a compiled function's PTX by the CUDA driver: the module loaded in
numba's context (the primary one, which torch shares), each kernel's `CUfunction`
as `cuLaunchKernel` takes it, and a kernel's opt-in to more than the default
shared memory per block (a `SharedMemoryError` where the GPU has less than it
needs). Needs a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affinec.backend.cuda_launch import driver_result, shared_memory_limit
from affinec.backend.errors import SharedMemoryError
from affinec.hardware.chips import DEFAULT_SHARED_PER_BLOCK

if TYPE_CHECKING:
    from affinec.backend.launch_plans import Launch


def load_functions(ptx: str, launches: Sequence[Launch]) -> dict[str, Any]:
    """The kernels of `ptx` loaded by the driver itself (in numba's context), as
    `cuLaunchKernel` takes them: kernels with by-value tensor maps are launched
    through it, with a pointer to each parameter's bytes."""
    from cuda.bindings import driver
    from numba import cuda

    cuda.current_context()  # numba's context, current for the calls below
    module = driver_result(driver.cuModuleLoadData(ptx.encode() + b"\0"))
    loaded = {}
    for launch in launches:
        function = driver_result(
            driver.cuModuleGetFunction(module, launch.name.encode())
        )
        if launch.shared_memory > DEFAULT_SHARED_PER_BLOCK:
            limit = shared_memory_limit()
            if limit is not None and launch.shared_memory > limit:
                raise SharedMemoryError(
                    f"kernel {launch.name} needs {launch.shared_memory} bytes of "
                    f"shared memory per block; this GPU gives a block at most {limit}"
                )
            attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            driver_result(
                driver.cuFuncSetAttribute(function, attribute, launch.shared_memory)
            )
        loaded[launch.name] = function
    return loaded


__all__ = ["load_functions"]
