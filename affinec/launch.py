"""The launch record: what the host needs to launch a kernel, kept in the IR.

`gpu-kernel-outlining` writes it on the kernel (`gpu.func`, then the `llvm.func` it
lowers to) as one dictionary attribute, so that it survives every later level and
`affinec-opt` shows it:

    affinec.launch = {kernel = "conv_kernel", host = "conv",
                      grid = array<i64: 98, 1, 1>, block = array<i64: 256, 1, 1>,
                      dynamic_shared_memory = 0 : i64,
                      arguments = ["input", "filter", "output"],
                      argument_types = [memref<1x4x28x28xf32>, ...],
                      outputs = ["output"]}

`LaunchRecord` reads and writes that attribute. The kernel's parameters are the host
function's arguments named in `arguments`, in that order, each passed as a pointer to
its (C-contiguous) buffer; `outputs` names those the kernel writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Operation

LAUNCH = "affinec.launch"
"""The attribute holding the launch record, on the kernel function."""


@dataclass(frozen=True)
class KernelArgument:
    """A kernel parameter: the host argument it takes, and that buffer's shape."""

    name: str
    type: MemRefType

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.type.get_shape())

    @property
    def dtype(self) -> np.dtype:
        from affinec.dtypes import numpy_dtype

        return numpy_dtype(self.type.get_element_type())


@dataclass(frozen=True)
class LaunchRecord:
    """How to launch one kernel: entry point, geometry, shared memory, parameters."""

    kernel: str
    """The kernel's name: the PTX entry point."""
    host: str
    """The host function the kernel was outlined from (`conv`)."""
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_memory: int
    """Bytes of dynamic shared memory per block (static shared memory is in the PTX)."""
    arguments: tuple[KernelArgument, ...]
    outputs: tuple[str, ...] = ()
    """The arguments the kernel writes (the others it only reads)."""

    def to_attribute(self) -> DictionaryAttr:
        return DictionaryAttr(
            {
                "kernel": StringAttr(self.kernel),
                "host": StringAttr(self.host),
                "grid": DenseArrayBase.from_list(i64, self.grid),
                "block": DenseArrayBase.from_list(i64, self.block),
                "dynamic_shared_memory": IntegerAttr(self.dynamic_shared_memory, i64),
                "arguments": ArrayAttr([StringAttr(a.name) for a in self.arguments]),
                "argument_types": ArrayAttr([a.type for a in self.arguments]),
                "outputs": ArrayAttr([StringAttr(n) for n in self.outputs]),
            }
        )

    @staticmethod
    def from_attribute(attr: Attribute) -> LaunchRecord:
        if not isinstance(attr, DictionaryAttr):
            raise ValueError(f"'{LAUNCH}' must be a dictionary, got {attr}")
        d = attr.data
        try:
            names = [a.data for a in d["arguments"].data]  # pyright: ignore
            types = list(d["argument_types"].data)  # pyright: ignore
            return LaunchRecord(
                kernel=d["kernel"].data,  # pyright: ignore
                host=d["host"].data,  # pyright: ignore
                grid=tuple(d["grid"].get_values()),  # pyright: ignore
                block=tuple(d["block"].get_values()),  # pyright: ignore
                dynamic_shared_memory=d["dynamic_shared_memory"].value.data,  # pyright: ignore
                arguments=tuple(
                    KernelArgument(n, t) for n, t in zip(names, types, strict=True)
                ),
                outputs=tuple(a.data for a in d["outputs"].data),  # pyright: ignore
            )
        except (KeyError, AttributeError, TypeError, ValueError) as e:
            raise ValueError(f"malformed '{LAUNCH}' attribute {attr}: {e}") from None

    @staticmethod
    def of(kernel: Operation) -> LaunchRecord | None:
        """The record on a kernel function, if it has one."""
        attr = kernel.attributes.get(LAUNCH)
        return None if attr is None else LaunchRecord.from_attribute(attr)
