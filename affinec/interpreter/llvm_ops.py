"""The llvm and nvvm dialects: kernels after `convert-gpu-to-nvvm`.

A pointer is a pair `(buffer, offset)`: a flat numpy array (or a block's flat
`SharedArray`) and an element offset into it, so `getelementptr` adds to the offset
and a load indexes the buffer, checked against its end. A kernel's pointer arguments
are the host's arrays, flattened; `llvm.alloca` gives each thread a fresh poisoned
array; a shared global (address space 3) is one `SharedArray` per block, race-checked
like workgroup buffers. Dynamic shared memory (an external `!llvm.array<0 x i8>` in
address space 3, sized by the launch) is read through constant `getelementptr`s of
the buffers' element types, as `convert-gpu-to-nvvm` places them: each distinct
offset is a typed region of its own, up to the next one (the last, up to the
launch's size), one `SharedArray` per block each. Integers are Python ints wrapped to their width (signed),
reinterpreted as unsigned by the unsigned ops; i1 values are bools.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    UnrealizedConversionCastOp,
    VectorType,
)
from xdsl.ir import Operation, SSAValue
from xdsl.traits import SymbolTable

from affinec.base import dtypes
from affinec.dialects import gpu, nvvm
from affinec.dialects.llvm import (
    INTRINSIC_NAMES,
    AddrSpaceCastOp,
    FPToSIOp,
    FPToUIOp,
    SMaxOp,
    SMinOp,
    UIToFPOp,
    UMaxOp,
    UMinOp,
)
from affinec.interpreter import scalars
from affinec.interpreter.codegen import FunctionWriter, ProgramWriter, Source, emits
from affinec.interpreter.control_ops import write_body
from affinec.interpreter.support import (
    CMPF_PREDICATES,
    CMPI_PREDICATES,
    LANEWISE,
    InterpreterError,
    fused_multiply_add,
    maximumf,
    maxnumf,
    minimumf,
    minnumf,
    numpy_dtype,
    poisoned,
)

SHARED_ADDRESS_SPACE = 3


def shared_globals(module: gpu.ModuleOp) -> list[llvm.GlobalOp]:
    """The module's static shared-memory globals: every kernel of it gets them, per
    block."""
    return [
        op
        for op in module.body.block.ops
        if isinstance(op, llvm.GlobalOp)
        and op.addr_space.value.data == SHARED_ADDRESS_SPACE
        and not is_dynamic_shared(op)
    ]


def is_dynamic_shared(g: llvm.GlobalOp) -> bool:
    """An external shared global of no size: the launch's dynamic shared memory."""
    t = g.global_type
    return (
        g.addr_space.value.data == SHARED_ADDRESS_SPACE
        and g.linkage is not None
        and g.linkage.linkage.data == "external"
        and isinstance(t, llvm.LLVMArrayType)
        and t.size.data == 0
    )


def dynamic_global(op: llvm.AddressOfOp) -> llvm.GlobalOp | None:
    g = SymbolTable.lookup_symbol(op, op.global_name)
    return g if isinstance(g, llvm.GlobalOp) and is_dynamic_shared(g) else None


def dynamic_regions(kernel: llvm.FuncOp) -> list[tuple[int, np.dtype]]:
    """The typed regions of dynamic shared memory the kernel addresses, by byte
    offset: (offset, element dtype), sorted. Refuses, at the op, any other use of
    the dynamic shared memory's address (which the interpreter could not type)."""
    regions: dict[int, np.dtype] = {}
    for op in kernel.walk():
        if not isinstance(op, llvm.AddressOfOp) or dynamic_global(op) is None:
            continue
        for use in op.result.uses:
            gep = use.operation
            offset = _constant_gep_offset(gep)
            if offset is None:
                raise InterpreterError(
                    "the interpreter reads dynamic shared memory only through "
                    "constant getelementptrs of its buffers' element types",
                    gep,
                )
            assert isinstance(gep, llvm.GEPOp)
            dtype = numpy_dtype(gep.elem_type)
            if regions.setdefault(offset, dtype) != dtype:
                raise InterpreterError(
                    f"dynamic shared memory at byte {offset} is addressed as "
                    f"{regions[offset]} and as {dtype}",
                    gep,
                )
    return sorted(regions.items())


def _constant_gep_offset(op: Operation) -> int | None:
    """The byte offset of a one-index constant getelementptr, None for other ops."""
    if not isinstance(op, llvm.GEPOp) or op.ssa_indices:
        return None
    indices = list(op.rawConstantIndices.iter_values())
    if len(indices) != 1 or indices[0] == llvm.GEP_USE_SSA_VAL:
        return None
    return indices[0] * numpy_dtype(op.elem_type).itemsize


def dynamic_spec(
    kernel: llvm.FuncOp, size: int, launch: Operation
) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    """The regions of dynamic shared memory a launch with `size` bytes gives the
    kernel, as workgroup buffers (each up to the next; the last up to `size`)."""
    regions = dynamic_regions(kernel)
    spec = []
    for k, (offset, dtype) in enumerate(regions):
        end = regions[k + 1][0] if k + 1 < len(regions) else size
        if end <= offset:
            raise InterpreterError(
                f"launches @{kernel.sym_name.data} with {size} bytes of dynamic shared "
                f"memory; its buffers start up to byte {offset}",
                launch,
            )
        spec.append(
            (f"dynamic_shared+{offset}", ((end - offset) // dtype.itemsize,), dtype)
        )
    return spec


def shared_spec(module: gpu.ModuleOp) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    spec = []
    for g in shared_globals(module):
        t = g.global_type
        if not isinstance(t, llvm.LLVMArrayType):
            raise InterpreterError("shared globals must be arrays", g)
        spec.append((g.sym_name.data, (t.size.data,), numpy_dtype(t.type)))
    return spec


def write_llvm_kernel(
    program: ProgramWriter, module: gpu.ModuleOp, op: llvm.FuncOp, name: str
) -> Source:
    """The Python function running one thread of the kernel `llvm.func` `op`."""
    w = FunctionWriter(program)
    ctx = w.fresh("gpu")
    w.gpu_context = ctx
    params = [w.define(a) for a in op.body.blocks[0].args]
    shared = shared_parameters(w, op)
    write_body(w, op.body, on_return=llvm.ReturnOp)
    return w.function(f"def {name}({', '.join([ctx, *params, *shared])}):")


def shared_parameters(w: FunctionWriter, kernel: llvm.FuncOp) -> list[str]:
    """The parameters of a kernel's function holding its shared buffers: the
    module's shared globals, then the regions of dynamic shared memory it
    addresses (bound in `w.symbols` for `llvm.mlir.addressof` and `_gep`)."""
    module = kernel.parent_op()
    assert isinstance(module, gpu.ModuleOp)
    shared = []
    for g in shared_globals(module):
        buffer = w.fresh(g.sym_name.data)
        shared.append(buffer)
        w.symbols[g.sym_name.data] = buffer
    for offset, _ in dynamic_regions(kernel):
        buffer = w.fresh(f"dynamic_shared_{offset}")
        shared.append(buffer)
        w.symbols[region_symbol(offset)] = buffer
    return shared


def pointer_arguments(args: Sequence[object]) -> tuple:
    """Host arrays as the kernel's pointer arguments (scalars pass as they are)."""
    return tuple((a.reshape(-1), 0) if isinstance(a, np.ndarray) else a for a in args)


# -- helpers the generated code calls ------------------------------------------------------


def _load(op: Operation, pointer):
    buffer, offset = pointer
    if not 0 <= offset < len(buffer):
        _out_of_bounds(op, buffer, offset)
    return buffer[offset]


def _load_vector(op: Operation, pointer, size: int):
    buffer, offset = pointer
    _check_vector(op, buffer, offset, size, "load")
    return buffer[offset : offset + size].copy()


def _check_vector(op: Operation, buffer, offset: int, size: int, what: str) -> None:
    """A vector access: its elements aligned as a whole, all within the buffer."""
    if offset % size:
        raise InterpreterError(misaligned(what, size, offset), op)
    if not (offset >= 0 and offset + size <= len(buffer)):
        _out_of_bounds(op, buffer, offset + size - 1)


def misaligned(what: str, size: int, offset: int) -> str:
    """The message of a vector load or store off its alignment."""
    return (
        f"a {what} of {size} elements at element {offset}: not aligned "
        f"to its size (the GPU faults on a misaligned vector access)"
    )


def out_of_bounds(offset: int, length: int) -> str:
    """The message of an access outside its buffer."""
    return f"element {offset} is out of bounds of a buffer of {length} elements"


def _store(op: Operation, pointer, value) -> None:
    buffer, offset = pointer
    if isinstance(value, np.ndarray):  # a vector
        _check_vector(op, buffer, offset, value.size, "store")
        buffer[offset : offset + value.size] = value.ravel()
        return
    if not 0 <= offset < len(buffer):
        _out_of_bounds(op, buffer, offset)
    buffer[offset] = value


def _out_of_bounds(op: Operation, buffer, offset: int) -> None:
    raise InterpreterError(out_of_bounds(offset, len(buffer)), op)


# -- ops ---------------------------------------------------------------------------------


@emits(llvm.ConstantOp)
def _constant(op: llvm.ConstantOp, w: FunctionWriter) -> None:
    value = op.value
    if isinstance(value, FloatAttr):
        dtype = numpy_dtype(op.result.type)
        if not dtypes.is_floating(dtype):  # xDSL's verifier lets the kinds differ
            raise InterpreterError(f"a float constant of type {op.result.type}", op)
        w.alias(op.result, w.global_(dtype.type(value.value.data), "cst"))
    elif isinstance(value, IntegerAttr):
        w.alias(op.result, scalars.int_constant(value.value.data, op.result.type))
    else:
        raise InterpreterError("unsupported constant", op)


INT_BINARY = {
    llvm.AddOp: "add",
    llvm.SubOp: "sub",
    llvm.MulOp: "mul",
    llvm.AndOp: "and",
    llvm.OrOp: "or",
    llvm.XOrOp: "xor",
    llvm.ShlOp: "shl",
    llvm.AShrOp: "shrs",
    llvm.LShrOp: "shru",
    llvm.SDivOp: "divs",
    llvm.SRemOp: "rems",
    llvm.UDivOp: "divu",
    llvm.URemOp: "remu",
    SMaxOp: "maxs",
    SMinOp: "mins",
    UMaxOp: "maxu",
    UMinOp: "minu",
}


@emits(*INT_BINARY)
def _int_binary(op: Operation, w: FunctionWriter) -> None:
    kind = INT_BINARY[type(op)]  # pyright: ignore[reportArgumentType]
    scalars.emit_int_binary(w, kind, op.results[0], *op.operands)


_FLOAT = {llvm.FAddOp: "+", llvm.FSubOp: "-", llvm.FMulOp: "*", llvm.FDivOp: "/"}


@emits(*_FLOAT)
def _float(op: Operation, w: FunctionWriter) -> None:
    symbol = _FLOAT[type(op)]  # pyright: ignore[reportArgumentType]
    scalars.emit_float_binary(w, symbol, op.results[0], *op.operands)


@emits(llvm.FNegOp)
def _fneg(op: llvm.FNegOp, w: FunctionWriter) -> None:
    w.line(f"{w.define(op.res)} = -{w[op.arg]}")


@emits(llvm.ICmpOp)
def _icmp(op: llvm.ICmpOp, w: FunctionWriter) -> None:
    predicate = CMPI_PREDICATES[op.predicate.value.data]
    scalars.emit_icmp(w, predicate, op.res, op.lhs, op.rhs)


@emits(llvm.FCmpOp)
def _fcmp(op: llvm.FCmpOp, w: FunctionWriter) -> None:
    predicate = CMPF_PREDICATES[op.predicate.value.data]
    scalars.emit_fcmp(w, predicate, op.res, op.lhs, op.rhs)


@emits(llvm.SelectOp)
def _select(op: llvm.SelectOp, w: FunctionWriter) -> None:
    scalars.emit_select(w, op.res, op.cond, op.lhs, op.rhs)


@emits(llvm.SExtOp, llvm.TruncOp)
def _sext_trunc(op: Operation, w: FunctionWriter) -> None:
    scalars.emit_int_cast(w, op.results[0], op.operands[0], signed=True)


@emits(llvm.ZExtOp)
def _zext(op: llvm.ZExtOp, w: FunctionWriter) -> None:
    scalars.emit_int_cast(w, op.results[0], op.operands[0], signed=False)


@emits(llvm.FPExtOp, llvm.FPTruncOp)
def _float_cast(op: Operation, w: FunctionWriter) -> None:
    scalars.emit_float_cast(w, op.results[0], op.operands[0])


@emits(llvm.SIToFPOp, UIToFPOp)
def _int_to_float(op: Operation, w: FunctionWriter) -> None:
    signed = isinstance(op, llvm.SIToFPOp)
    scalars.emit_int_to_float(w, op.results[0], op.operands[0], signed)


@emits(FPToSIOp, FPToUIOp)
def _float_to_int(op: Operation, w: FunctionWriter) -> None:
    signed = isinstance(op, FPToSIOp)
    scalars.emit_float_to_int(w, op.results[0], op.operands[0], signed)


INTRINSICS = {
    "llvm.maximum": maximumf,
    "llvm.minimum": minimumf,
    "llvm.maxnum": maxnumf,
    "llvm.minnum": minnumf,
    "llvm.fma": fused_multiply_add,
}


def _write_call(
    w: FunctionWriter, result: SSAValue, fn: Callable, operands: Sequence[SSAValue]
) -> None:
    """`result = fn(*operands)`, `fn` a helper the generated code calls."""
    args = ", ".join(w.names(operands))
    w.line(f"{w.define(result)} = {w.global_(fn, fn.__name__)}({args})")


@emits(llvm.CallIntrinsicOp)
def _intrinsic(op: llvm.CallIntrinsicOp, w: FunctionWriter) -> None:
    name = op.intrin.data
    family = name.rsplit(".", 1)[0]
    if family not in INTRINSICS:
        raise InterpreterError(f"the interpreter lacks {name}", op)
    assert op.ress is not None
    fn = INTRINSICS[family]
    if isinstance(op.ress.type, VectorType):
        if fn not in LANEWISE:
            raise InterpreterError(f"the interpreter lacks {name} on vectors", op)
        fn = LANEWISE[fn]
    _write_call(w, op.ress, fn, op.args)


INTRINSIC_OPS = {
    op: INTRINSICS[name] for op, name in INTRINSIC_NAMES.items() if name in INTRINSICS
}
"""The float intrinsics MLIR's lowerings write as ops of their own
(`llvm.intr.maximum(%a, %b)`), where affinec's lowering calls them (the integer
ones are `INT_BINARY`'s)."""


@emits(*INTRINSIC_OPS)
def _intrinsic_op(op: Operation, w: FunctionWriter) -> None:
    fn = INTRINSIC_OPS[type(op)]  # pyright: ignore[reportArgumentType]
    if isinstance(op.results[0].type, VectorType):
        fn = LANEWISE[fn]
    _write_call(w, op.results[0], fn, op.operands)


LIBDEVICE = {
    "__nv_fmaxf": maxnumf,
    "__nv_fmax": maxnumf,
    "__nv_fminf": minnumf,
    "__nv_fmin": minnumf,
    "__nv_fmaf": fused_multiply_add,
    "__nv_fma": fused_multiply_add,
}
"""The functions of CUDA's libdevice that MLIR's `convert-gpu-to-nvvm` calls for
`arith.maxnumf`, `arith.minnumf` and `math.fma`, by what they compute."""


@emits(llvm.CallOp)
def _call(op: llvm.CallOp, w: FunctionWriter) -> None:
    name = op.callee.string_value() if op.callee is not None else None
    fn = LIBDEVICE.get(name or "")
    if fn is None or op.returned is None:
        raise InterpreterError(
            f"the interpreter calls only libdevice's {', '.join(LIBDEVICE)}", op
        )
    _write_call(w, op.returned, fn, op.args)


@emits(llvm.GEPOp)
def _gep(op: llvm.GEPOp, w: FunctionWriter) -> None:
    indices = list(op.rawConstantIndices.iter_values())
    if len(indices) != 1:
        raise InterpreterError("only one-index GEPs are interpreted", op)
    (index,) = (
        w.names(op.ssa_indices)
        if indices[0] == llvm.GEP_USE_SSA_VAL
        else [str(indices[0])]
    )
    owner = op.ptr.owner
    if isinstance(owner, llvm.AddressOfOp) and dynamic_global(owner) is not None:
        offset = _constant_gep_offset(op)
        assert offset is not None  # dynamic_regions refused the others
        w.alias(op.result, f"({w.symbols[region_symbol(offset)]}, 0)")
        return
    base = w[op.ptr]
    w.line(f"{w.define(op.result)} = ({base}[0], {base}[1] + {index})")


def region_symbol(offset: int) -> str:
    return f"dynamic shared memory +{offset}"


@emits(llvm.LoadOp)
def _llvm_load(op: llvm.LoadOp, w: FunctionWriter) -> None:
    t = op.dereferenced_value.type
    if isinstance(t, VectorType):
        w.line(
            f"{w.define(op.dereferenced_value)} = {w.global_(_load_vector, 'load')}("
            f"{w.op_ref(op)}, {w[op.ptr]}, {t.get_shape()[0]})"
        )
        return
    read = f"{w.global_(_load, 'load')}({w.op_ref(op)}, {w[op.ptr]})"
    if isinstance(t, IntegerType | IndexType):
        # integers are Python ints (`scalars`), not numpy's, which overflow
        read = f"{scalars.python_int(t)}({read})"
    w.line(f"{w.define(op.dereferenced_value)} = {read}")


@emits(llvm.StoreOp)
def _llvm_store(op: llvm.StoreOp, w: FunctionWriter) -> None:
    w.line(f"{w.global_(_store, 'store')}({w.op_ref(op)}, {w[op.ptr]}, {w[op.value]})")


@emits(llvm.AllocaOp)
def _alloca(op: llvm.AllocaOp, w: FunctionWriter) -> None:
    element = op.elem_type
    count = 1
    if isinstance(element, llvm.LLVMArrayType):
        count, element = element.size.data, element.type
    dtype = w.global_(numpy_dtype(element), "dtype")
    size = f"{count} * {w[op.size]}"
    w.line(
        f"{w.define(op.res)} = ({w.global_(poisoned, 'poisoned')}(({size},), {dtype}), 0)"
    )


@emits(llvm.AddressOfOp)
def _address_of(op: llvm.AddressOfOp, w: FunctionWriter) -> None:
    name = op.global_name.root_reference.data
    if dynamic_global(op) is not None:
        return  # its uses are the regions' addresses (`_gep`)
    buffer = w.symbols.get(name)
    if buffer is None:
        raise InterpreterError(f"no shared global @{name}", op)
    w.alias(op.result, f"({buffer}, 0)")


def shared_address(op: Operation, pointer) -> int:
    """The integer of a pointer: the interpreter gives shared memory addresses (each
    block's buffers from 0, `shared_memory.BlockState.allocate`), nothing else."""
    buffer, offset = pointer
    address = getattr(buffer, "address", None)
    if address is None:
        raise InterpreterError(
            "takes the address of global memory as an integer; the interpreter "
            "gives addresses to shared memory only",
            op,
        )
    return address + offset * buffer.dtype.itemsize


@emits(llvm.PtrToIntOp)
def _ptr_to_int(op: llvm.PtrToIntOp, w: FunctionWriter) -> None:
    fn = w.global_(shared_address, "shared_address")
    w.line(f"{w.define(op.output)} = {fn}({w.op_ref(op)}, {w[op.input]})")


@emits(AddrSpaceCastOp)
def _addrspacecast(op: AddrSpaceCastOp, w: FunctionWriter) -> None:
    w.alias(op.res, w[op.arg])


@emits(UnrealizedConversionCastOp)
def _unrealized_cast(op: UnrealizedConversionCastOp, w: FunctionWriter) -> None:
    """One value as another type (a tensor map as the pointer to its parameter):
    the same Python value."""
    if len(op.inputs) != len(op.outputs):
        raise InterpreterError("casts a number of values to another number", op)
    for source, result in zip(op.inputs, op.outputs, strict=True):
        w.alias(result, w[source])


ID_POSITIONS = {"block_id": 0, "thread_id": 3, "grid_dim": 6, "block_dim": 9}
"""Where each kind of id's x sits in a kernel context's `ids` (y, z after it)."""

_REGISTERS = {
    register: (kind, ID_POSITIONS[kind] + "xyz".index(dim))
    for (kind, dim), register in nvvm.SPECIAL_REGISTERS.items()
}


def special_register(op: nvvm.SpecialRegisterOp) -> tuple[str, int] | None:
    """The kind of id `op` reads (`thread_id`, ...) and where it sits in a context's
    `ids`; None for a register the interpreter does not know (`laneid`)."""
    return _REGISTERS.get(type(op))


@emits(nvvm.SpecialRegisterOp)
def _special_register(op: nvvm.SpecialRegisterOp, w: FunctionWriter) -> None:
    register = special_register(op)
    if w.gpu_context is None or register is None:
        raise InterpreterError("outside a kernel, or not interpreted", op)
    index = register[1]
    w.line(f"{w.define(op.res)} = {w.gpu_context}.ids[{index}]")


@emits(nvvm.BarrierOp)
def _barrier(op: nvvm.BarrierOp, w: FunctionWriter) -> None:
    if w.gpu_context is None:
        raise InterpreterError("outside a kernel", op)
    w.line(f"yield {w.op_ref(op)}")
