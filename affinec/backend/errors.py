"""The errors of running a kernel, in a module of their own: the command line
reports them without importing numpy and numba, which raising them needs."""


class NoCudaGPU(RuntimeError):
    """There is no CUDA GPU (or no driver) to run on."""


class KernelArgumentError(TypeError):
    """An argument does not fit its parameter; the message names both."""


class SharedMemoryError(RuntimeError):
    """A kernel needs more shared memory per block than the GPU has."""


__all__ = ["KernelArgumentError", "NoCudaGPU", "SharedMemoryError"]
