"""A kernel's array parameters and the checks of what is passed for them: present,
shape, dtype, strides, alignment, device memory, the output not aliasing an input
(`affinec.backend.runtime.Kernel` runs them before every launch; they need no GPU). An
argument that does not fit raises `KernelArgumentError` naming the parameter, what
was expected and what came.
"""

from __future__ import annotations

import ctypes
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from affinec.backend.cuda_launch import cuda_available, require_gpu
from affinec.backend.errors import KernelArgumentError
from affinec.base.dtypes import BFLOAT16


@dataclass(frozen=True)
class Parameter:
    """An array parameter of a kernel: its name, shape and element type."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    output: bool = False
    workspace: bool = False
    """A buffer of intermediate results the kernel object provides itself (a split
    reduction's partial sums), not an argument of the call."""

    @property
    def batched(self) -> bool:
        """Whether the outermost size is the batch, given at each call (-1)."""
        return bool(self.shape) and self.shape[0] < 0

    def for_batch(self, batch: int) -> Parameter:
        """The parameter of a call over `batch` images (itself, if not batched)."""
        if not self.batched:
            return self
        return replace(self, shape=(batch, *self.shape[1:]))

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """The strides (in bytes) of a C-contiguous array of this shape."""
        strides, step = [], self.dtype.itemsize
        for extent in reversed(self.shape):
            strides.append(step)
            step *= extent
        return tuple(reversed(strides))

    def describe(self) -> str:
        shape = ", ".join("any" if d < 0 else str(d) for d in self.shape)
        return f"an array of shape ({shape}{',' * (len(self.shape) == 1)}) and dtype {self.dtype}"


@dataclass
class Argument:
    """An argument checked against its parameter (no device work done yet)."""

    parameter: Parameter
    value: Any
    """A numpy array, or an object with `__cuda_array_interface__`."""
    device: Any = None
    """The numba device array the kernel reads and writes (set by `to_device`)."""

    @property
    def host(self) -> np.ndarray | None:
        return self.value if isinstance(self.value, np.ndarray) else None

    @property
    def span(self) -> tuple[int, int]:
        """The byte range of device memory the argument occupies."""
        source = self.device if self.device is not None else self.value
        start = int(source.__cuda_array_interface__["data"][0])
        return start, start + self.parameter.nbytes

    def to_device(self) -> None:
        from numba import cuda

        if self.host is not None:
            self.device = cuda.to_device(transferable(self.host))
        else:
            self.device = cuda.as_cuda_array(self.value)

    def to_host(self) -> None:
        """Copy the device array back into the numpy array it came from."""
        assert self.host is not None and self.device is not None
        self.device.copy_to_host(transferable(self.host))


def transferable(host: np.ndarray) -> np.ndarray:
    """`host` as numba can copy it: numba reaches host memory through the buffer
    protocol, which numpy refuses for `ml_dtypes`' bf16 ("cannot include dtype 'E'
    in a buffer"), so a bf16 array travels as the uint16 view of its bytes."""
    return host.view(np.uint16) if host.dtype == BFLOAT16 else host


def _interface_dtype(p: Parameter, value: Any, typestr: object) -> np.dtype:
    """The element type of a device array from its `__cuda_array_interface__`.

    The typestr cannot tell bf16: torch gives bfloat16 tensors "<f2", as float16
    (2.4 to 2.9), or "<V2" (later, as `ml_dtypes` spells bf16: two opaque bytes). The
    array's own `dtype` (`torch.bfloat16`, or `ml_dtypes`' bfloat16 of a numba or
    JAX array) says which: a bf16 tensor never passes as an f16 one, nor fails a
    bf16 parameter.
    """
    try:
        dtype = np.dtype(typestr)  # pyright: ignore[reportArgumentType]
    except TypeError:
        raise KernelArgumentError(
            f"argument '{p.name}': expected {p.describe()}, got a device array of "
            f"unknown typestr {typestr!r}"
        ) from None
    declared = str(getattr(value, "dtype", "")).rpartition(".")[2]
    if declared == "bfloat16" and dtype.itemsize == 2 and dtype.kind in "fV":
        return BFLOAT16
    if p.dtype == BFLOAT16 and dtype == np.uint16 and array_kind(value) != "torch":
        # numba and cupy have no bf16: their bf16 arrays hold its bits as uint16
        # (what `transferable` makes of a bf16 numpy array, what `new_output`
        # allocates); torch has bfloat16 of its own, so its uint16 is refused
        return BFLOAT16
    return dtype


ARGUMENT_ALIGNMENT = 16
"""Bytes a device array's address must be a multiple of: 16-byte asynchronous
copies read the inputs, paired stores write the output (what `cuda.to_device` and
torch's and cupy's allocators give; a slice's offset may not)."""


def _check_layout(p: Parameter, shape, dtype, strides, what: str) -> None:
    if tuple(shape) != p.shape or np.dtype(dtype) != p.dtype:
        raise KernelArgumentError(
            f"argument '{p.name}': expected {p.describe()}, got {what} of shape "
            f"{tuple(shape)} and dtype {np.dtype(dtype)}"
        )
    if strides is not None and tuple(strides) != p.strides and p.nbytes > 0:
        raise KernelArgumentError(
            f"argument '{p.name}': expected a C-contiguous array (strides "
            f"{p.strides}), got strides {tuple(strides)}"
        )


def shape_of(value: Any) -> tuple[int, ...] | None:
    """The shape of a numpy or device array, None for anything else."""
    if isinstance(value, np.ndarray):
        return value.shape
    try:
        interface = getattr(value, "__cuda_array_interface__", None)
    except Exception:
        return None
    return tuple(interface["shape"]) if isinstance(interface, dict) else None


def check_argument(p: Parameter, value: Any) -> Argument:
    """`value` checked as the argument of `p`, or a `KernelArgumentError`."""
    if isinstance(value, np.ndarray):
        _check_layout(p, value.shape, value.dtype, value.strides, "a numpy array")
        if p.output and not value.flags.writeable:
            raise KernelArgumentError(f"argument '{p.name}': the array is read-only")
        return Argument(p, value)
    try:
        interface = getattr(value, "__cuda_array_interface__", None)
    except Exception as e:  # torch with requires_grad, JAX's bf16 arrays: they refuse
        raise KernelArgumentError(
            f"argument '{p.name}': its __cuda_array_interface__ is refused: {e}"
        ) from None
    if interface is None:
        raise KernelArgumentError(
            f"argument '{p.name}': expected {p.describe()} as a numpy array, a numba "
            f"device array or an object with __cuda_array_interface__ (torch, cupy), "
            f"got {type(value).__name__}"
        )
    shape, typestr = interface["shape"], interface["typestr"]
    dtype = _interface_dtype(p, value, typestr)
    _check_layout(p, shape, dtype, interface.get("strides"), "a device array")
    pointer, readonly = interface["data"]
    if p.output and readonly:
        raise KernelArgumentError(f"argument '{p.name}': the device array is read-only")
    if pointer % ARGUMENT_ALIGNMENT:
        raise KernelArgumentError(
            f"argument '{p.name}': its memory at {pointer:#x} is not "
            f"{ARGUMENT_ALIGNMENT}-byte aligned (the kernel moves up to "
            f"{ARGUMENT_ALIGNMENT} bytes at a time): pass an aligned copy (torch: "
            ".clone(), cupy: .copy())"
        )
    if pointer and cuda_available() and not _is_device_pointer(pointer):
        raise KernelArgumentError(
            f"argument '{p.name}': its memory at {pointer:#x} is not device memory of "
            "the current GPU"
        )
    return Argument(p, value)


def _is_device_pointer(pointer: int) -> bool:
    """Whether `pointer` is device (or managed) memory of the current context's GPU."""
    from cuda.bindings import driver
    from numba import cuda

    err, ordinal = driver.cuPointerGetAttribute(
        driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        return False
    return int(ordinal) == cuda.get_current_device().id


def array_kind(value: Any) -> str:
    """Which library `value` comes from: `numpy`, `torch`, `cupy`, or `numba` (any
    other device array)."""
    if isinstance(value, np.ndarray):
        return "numpy"
    module = type(value).__module__.partition(".")[0]
    return module if module in ("torch", "cupy") else "numba"


def new_output(p: Parameter, like: Any) -> Any:
    """An array for output `p` of the kind of `like` (an input of the call): numpy
    for numpy, a torch tensor on the same device for torch (bf16 as torch.bfloat16),
    a cupy array for cupy (a numba one for bf16, which cupy lacks), numba's device
    array otherwise."""
    kind = "numpy" if like is None else array_kind(like)
    if kind == "numpy":
        return np.empty(p.shape, p.dtype)
    require_gpu()
    if kind == "torch":
        import torch

        dtype = torch.bfloat16 if p.dtype == BFLOAT16 else getattr(torch, p.dtype.name)
        return torch.empty(p.shape, dtype=dtype, device=like.device)
    if kind == "cupy" and p.dtype != BFLOAT16:
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.empty(p.shape, p.dtype)
    from numba import cuda

    dtype = p.dtype
    if dtype == BFLOAT16 and getattr(like, "dtype", None) != BFLOAT16:
        # numba has no bf16 of its own: the output holds its bits as uint16, as
        # the inputs that came did
        dtype = np.dtype(np.uint16)
    return cuda.device_array(p.shape, dtype)


def check_aliasing(arguments: list[Argument]) -> None:
    """The output must not share memory with any other argument."""
    for out in (a for a in arguments if a.parameter.output):
        for other in arguments:
            if other is out:
                continue
            if out.host is not None and other.host is not None:
                shared = bool(np.shares_memory(out.host, other.host))
            elif out.host is None and other.host is None:
                (a0, a1), (b0, b1) = out.span, other.span
                shared = a0 < b1 and b0 < a1
            else:
                shared = False
            if shared:
                raise KernelArgumentError(
                    f"argument '{out.parameter.name}' (the output) shares memory "
                    f"with argument '{other.parameter.name}'"
                )


# -- a call's layout, for the launch path that checks it once ------------------------------


def layout_of(value: Any) -> tuple[Hashable, int] | None:
    """A device array's layout — everything the checks above look at except its
    address: its type, shape, dtype, strides (and for torch its device and whether it
    requires grad) — and its address. None for a numpy array, or anything the checks
    alone judge (a CPU tensor, a tensor that requires grad, an object without
    `__cuda_array_interface__`).

    Two arrays of one layout pass or fail the checks alike, but for their addresses'
    alignment, overlap and memory, which `addresses_admitted` judges at each call.
    """
    kind = type(value)
    reader = _READERS.get(kind)
    if reader is None:
        reader = _READERS[kind] = _reader_for(kind)
    try:
        return reader(value)
    except Exception:  # a sparse tensor, an array that refuses: the checks say why
        return None


def _no_layout(value: Any) -> None:
    return None


def _torch_layout(t: Any) -> tuple[Hashable, int] | None:
    if t.requires_grad or not t.is_cuda:
        return None
    return (type(t), t.shape, t.dtype, t.stride(), t.get_device()), t.data_ptr()


def _numba_layout(a: Any) -> tuple[Hashable, int]:
    pointer = a.device_ctypes_pointer.value or 0
    return (type(a), a.shape, a.dtype, a.strides), pointer


def _interface_layout(value: Any) -> tuple[Hashable, int] | None:
    try:
        interface = value.__cuda_array_interface__
    except Exception:
        return None
    if not isinstance(interface, dict):
        return None
    strides = interface.get("strides")
    pointer, readonly = interface["data"]
    key = (
        type(value),
        tuple(interface["shape"]),
        interface["typestr"],
        None if strides is None else tuple(strides),
        str(getattr(value, "dtype", "")),
        bool(readonly),
    )
    return key, int(pointer or 0)


def _reader_for(kind: type) -> Any:
    if issubclass(kind, np.ndarray):
        return _no_layout
    module = kind.__module__.partition(".")[0]
    if module == "torch" and hasattr(kind, "data_ptr"):
        return _torch_layout
    if module.startswith("numba") and hasattr(kind, "device_ctypes_pointer"):
        return _numba_layout
    return _interface_layout


_READERS: dict[type, Any] = {type(None): _no_layout}


def memory_vouched(value: Any) -> bool:
    """Whether the kind of `value` alone says its memory is device memory (a CUDA
    tensor of torch's, whose device is part of its layout; a numba device array):
    an object that only offers `__cuda_array_interface__` may point anywhere, so
    its address is asked of the driver at every call."""
    return layout_of(value) is not None and _READERS[type(value)] in (
        _torch_layout,
        _numba_layout,
    )


def addresses_admitted(
    addresses: Sequence[int],
    sizes: Sequence[int],
    output: int,
    asked: Sequence[bool],
) -> bool:
    """Whether arrays at `addresses` (of `sizes` bytes; the output at position
    `output`, -1 for none) pass what the layout does not decide: each aligned, the output apart
    from every other, and the memory of each one whose `asked` is set on the current
    GPU. False sends the call to the full checks, which say what is wrong."""
    for address in addresses:
        if address % ARGUMENT_ALIGNMENT:
            return False
    if output >= 0:
        start = addresses[output]
        end = start + sizes[output]
        for k, address in enumerate(addresses):
            if k != output and start < address + sizes[k] and address < end:
                return False
    for address, ask in zip(addresses, asked, strict=True):
        if ask and address and cuda_available() and not _is_device_pointer(address):
            return False
    return True


class ParameterBlock:
    """The parameters of one kernel launch as `cuLaunchKernel` takes them: an array
    of addresses, one per parameter, each pointing at the parameter's bytes. An
    array's address is kept in the block's own 8-byte slot (`set_pointer`); a
    parameter passed by value from elsewhere (a TMA tensor map's 128 bytes) is
    pointed at where it lies (`point_at`). Built once per kernel and layout; a call
    writes its addresses into it and launches (one call at a time: concurrent
    calls of one kernel from several threads would share it)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.slots = (ctypes.c_uint64 * max(count, 1))()
        base = ctypes.addressof(self.slots)
        self.addresses = (ctypes.c_void_p * max(count, 1))(
            *(base + 8 * k for k in range(count))
        )
        self.address = ctypes.addressof(self.addresses)
        """What `cuLaunchKernel`'s kernelParams takes: the address of the array of
        addresses."""

    def __reduce__(self):
        # a copy gets slots of its own (the addresses point into the block)
        return (ParameterBlock, (self.count,))

    def set_pointer(self, position: int, pointer: int) -> None:
        self.slots[position] = pointer

    def point_at(self, position: int, address: int) -> None:
        self.addresses[position] = address

    def parameter_bytes(self, position: int, size: int = 8) -> bytes:
        """The `size` bytes parameter `position` passes (what the driver copies)."""
        address = self.addresses[position]
        assert address is not None
        return ctypes.string_at(address, size)
