"""The llvm and nvvm dialects: kernels after `convert-gpu-to-nvvm`.

A pointer is a pair `(buffer, offset)`: a flat numpy array (or a block's flat
`SharedArray`) and an element offset into it, so `getelementptr` adds to the offset
and a load indexes the buffer, checked against its end. A kernel's pointer arguments
are the host's arrays, flattened; `llvm.alloca` gives each thread a fresh poisoned
array; a shared global (address space 3) is one `SharedArray` per block, race-checked
like workgroup buffers. Integers are Python ints wrapped to their width (signed),
reinterpreted as unsigned by the unsigned ops; i1 values are bools.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import llvm
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, VectorType
from xdsl.ir import Attribute, Operation

from affinec.dialects import gpu, nvvm
from affinec.interpreter.codegen import FunctionWriter, ProgramWriter, emits
from affinec.interpreter.control_ops import write_body
from affinec.interpreter.support import (
    CMPF,
    CMPF_PREDICATES,
    CMPI_PREDICATES,
    InterpreterError,
    describe,
    float_converter,
    fused_multiply_add,
    maximumf,
    maxnumf,
    minimumf,
    minnumf,
    numpy_dtype,
    poisoned,
    unsigned,
    wrap,
)

SHARED_ADDRESS_SPACE = 3


def shared_globals(module: gpu.ModuleOp) -> list[llvm.GlobalOp]:
    """The module's shared-memory globals: every kernel of it gets them, per block."""
    return [
        op
        for op in module.body.block.ops
        if isinstance(op, llvm.GlobalOp)
        and op.addr_space.value.data == SHARED_ADDRESS_SPACE
    ]


def shared_spec(module: gpu.ModuleOp) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    spec = []
    for g in shared_globals(module):
        t = g.global_type
        if not isinstance(t, llvm.LLVMArrayType):
            raise InterpreterError(f"{describe(g)}: shared globals must be arrays")
        spec.append((g.sym_name.data, (t.size.data,), numpy_dtype(t.type)))
    return spec


def write_llvm_kernel(
    program: ProgramWriter, module: gpu.ModuleOp, op: llvm.FuncOp, name: str
) -> str:
    """The Python function running one thread of the kernel `llvm.func` `op`."""
    w = FunctionWriter(program)
    ctx = w.fresh("gpu")
    w.gpu_context = ctx
    params = [w.define(a) for a in op.body.blocks[0].args]
    shared = []
    for g in shared_globals(module):
        buffer = w.fresh(g.sym_name.data)
        shared.append(buffer)
        w.symbols[g.sym_name.data] = buffer
    write_body(w, op.body, on_return=llvm.ReturnOp)
    return "\n".join([f"def {name}({', '.join([ctx, *params, *shared])}):", *w.lines])


def pointer_arguments(args: Sequence[object]) -> tuple:
    """Host arrays as the kernel's pointer arguments (scalars pass as they are)."""
    return tuple((a.reshape(-1), 0) if isinstance(a, np.ndarray) else a for a in args)


# -- helpers the generated code calls ------------------------------------------------------


def _load(op: Operation, pointer):
    buffer, offset = pointer
    if not 0 <= offset < len(buffer):
        _out_of_bounds(op, buffer, offset)
    return buffer[offset]


def _store(op: Operation, pointer, value) -> None:
    buffer, offset = pointer
    if not 0 <= offset < len(buffer):
        _out_of_bounds(op, buffer, offset)
    buffer[offset] = value


def _out_of_bounds(op: Operation, buffer, offset: int) -> None:
    raise InterpreterError(
        f"{describe(op)}: element {offset} is out of bounds of a buffer of "
        f"{len(buffer)} elements"
    )


# -- ops ---------------------------------------------------------------------------------


def _width(t: Attribute) -> int:
    if not isinstance(t, IntegerType):
        raise InterpreterError(f"expected an integer type, got {t}")
    return t.width.data


def _wrapped(w: FunctionWriter, expr: str, t: Attribute) -> str:
    bits = _width(t)
    return expr if bits == 1 else f"{w.global_(wrap, 'wrap')}({expr}, {bits})"


def _u(w: FunctionWriter, name: str, t: Attribute) -> str:
    return f"{w.global_(unsigned, 'unsigned')}({name}, {_width(t)})"


@emits(llvm.ConstantOp)
def _constant(op: llvm.ConstantOp, w: FunctionWriter) -> None:
    value = op.value
    if isinstance(value, FloatAttr):
        dtype = numpy_dtype(op.result.type)
        w.alias(op.result, w.global_(dtype.type(value.value.data), "cst"))
    elif isinstance(value, IntegerAttr):
        v = value.value.data
        if _width(op.result.type) == 1:
            w.alias(op.result, repr(bool(v)))
        else:
            w.alias(op.result, f"({wrap(v, _width(op.result.type))})")
    else:
        raise InterpreterError(f"{describe(op)}: unsupported constant")


_SIGNED = {
    llvm.AddOp: "{a} + {b}",
    llvm.SubOp: "{a} - {b}",
    llvm.MulOp: "{a} * {b}",
    llvm.AndOp: "{a} & {b}",
    llvm.OrOp: "{a} | {b}",
    llvm.XOrOp: "{a} ^ {b}",
    llvm.ShlOp: "{a} << {b}",
    llvm.AShrOp: "{a} >> {b}",
}
_UNSIGNED = {llvm.UDivOp: "//", llvm.URemOp: "%", llvm.LShrOp: ">>"}


@emits(*_SIGNED)
def _signed(op: Operation, w: FunctionWriter) -> None:
    a, b = w.names(op.operands)
    t = op.results[0].type
    expr = _SIGNED[type(op)].format(a=a, b=b)  # pyright: ignore[reportArgumentType]
    w.line(f"{w.define(op.results[0])} = {_wrapped(w, expr, t)}")


@emits(*_UNSIGNED)
def _unsigned(op: Operation, w: FunctionWriter) -> None:
    a, b = w.names(op.operands)
    t = op.results[0].type
    expr = f"{_u(w, a, t)} {_UNSIGNED[type(op)]} {_u(w, b, t)}"  # pyright: ignore[reportArgumentType]
    w.line(f"{w.define(op.results[0])} = {_wrapped(w, expr, t)}")


def _sdiv(a: int, b: int) -> int:
    if b == 0:
        raise InterpreterError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _srem(a: int, b: int) -> int:
    return a - b * _sdiv(a, b)


@emits(llvm.SDivOp, llvm.SRemOp)
def _signed_division(op: Operation, w: FunctionWriter) -> None:
    fn = _sdiv if isinstance(op, llvm.SDivOp) else _srem
    a, b = w.names(op.operands)
    t = op.results[0].type
    expr = f"{w.global_(fn, fn.__name__)}({a}, {b})"
    w.line(f"{w.define(op.results[0])} = {_wrapped(w, expr, t)}")


_FLOAT = {llvm.FAddOp: "+", llvm.FSubOp: "-", llvm.FMulOp: "*", llvm.FDivOp: "/"}


@emits(*_FLOAT)
def _float(op: Operation, w: FunctionWriter) -> None:
    a, b = w.names(op.operands)
    w.line(f"{w.define(op.results[0])} = {a} {_FLOAT[type(op)]} {b}")  # pyright: ignore[reportArgumentType]


@emits(llvm.FNegOp)
def _fneg(op: llvm.FNegOp, w: FunctionWriter) -> None:
    w.line(f"{w.define(op.res)} = -{w[op.arg]}")


_ICMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@emits(llvm.ICmpOp)
def _icmp(op: llvm.ICmpOp, w: FunctionWriter) -> None:
    name = CMPI_PREDICATES[op.predicate.value.data]
    a, b = w[op.lhs], w[op.rhs]
    if name.startswith("u"):
        a, b = _u(w, a, op.lhs.type), _u(w, b, op.rhs.type)
    w.line(f"{w.define(op.res)} = {a} {_ICMP[name.lstrip('su') or name]} {b}")


@emits(llvm.FCmpOp)
def _fcmp(op: llvm.FCmpOp, w: FunctionWriter) -> None:
    name = CMPF_PREDICATES[op.predicate.value.data]
    test = w.global_(CMPF[name], f"cmpf_{name}")
    w.line(f"{w.define(op.res)} = {test}({w[op.lhs]}, {w[op.rhs]})")


@emits(llvm.SelectOp)
def _select(op: llvm.SelectOp, w: FunctionWriter) -> None:
    w.line(f"{w.define(op.res)} = {w[op.lhs]} if {w[op.cond]} else {w[op.rhs]}")


@emits(llvm.SExtOp, llvm.TruncOp)
def _sext_trunc(op: Operation, w: FunctionWriter) -> None:
    (a,) = w.names(op.operands)
    t = op.results[0].type
    if _width(t) == 1:
        w.line(f"{w.define(op.results[0])} = bool({a} & 1)")
    else:
        w.line(f"{w.define(op.results[0])} = {_wrapped(w, f'int({a})', t)}")


@emits(llvm.ZExtOp)
def _zext(op: llvm.ZExtOp, w: FunctionWriter) -> None:
    source = op.operands[0].type
    value = f"int({w[op.operands[0]]})"
    if _width(source) > 1:
        value = _u(w, w[op.operands[0]], source)
    w.line(f"{w.define(op.results[0])} = {_wrapped(w, value, op.results[0].type)}")


@emits(llvm.FPExtOp, llvm.FPTruncOp, llvm.SIToFPOp)
def _float_cast(op: Operation, w: FunctionWriter) -> None:
    # A numpy scalar type converts a vector (an array) element by element too.
    t = op.results[0].type
    element = t.get_element_type() if isinstance(t, VectorType) else t
    if isinstance(op, llvm.SIToFPOp):
        to = w.global_(numpy_dtype(element).type, "to")
    else:
        source = op.operands[0].type
        if isinstance(source, VectorType):
            source = source.get_element_type()
        to = w.global_(float_converter(source, element), "to")
    w.line(f"{w.define(op.results[0])} = {to}({w[op.operands[0]]})")


_INTRINSICS = {
    "llvm.maximum": maximumf,
    "llvm.minimum": minimumf,
    "llvm.maxnum": maxnumf,
    "llvm.minnum": minnumf,
    "llvm.fma": fused_multiply_add,
}


@emits(llvm.CallIntrinsicOp)
def _intrinsic(op: llvm.CallIntrinsicOp, w: FunctionWriter) -> None:
    name = op.intrin.data
    family = name.rsplit(".", 1)[0]
    if family not in _INTRINSICS:
        raise InterpreterError(f"{describe(op)}: the interpreter lacks {name}")
    fn = _INTRINSICS[family]
    args = ", ".join(w.names(op.args))
    assert op.ress is not None
    w.line(f"{w.define(op.ress)} = {w.global_(fn, fn.__name__)}({args})")


@emits(llvm.GEPOp)
def _gep(op: llvm.GEPOp, w: FunctionWriter) -> None:
    indices = list(op.rawConstantIndices.iter_values())
    if len(indices) != 1:
        raise InterpreterError(f"{describe(op)}: only one-index GEPs are interpreted")
    (index,) = (
        w.names(op.ssa_indices)
        if indices[0] == llvm.GEP_USE_SSA_VAL
        else [str(indices[0])]
    )
    base = w[op.ptr]
    w.line(f"{w.define(op.result)} = ({base}[0], {base}[1] + {index})")


@emits(llvm.LoadOp)
def _llvm_load(op: llvm.LoadOp, w: FunctionWriter) -> None:
    w.line(
        f"{w.define(op.dereferenced_value)} = {w.global_(_load, 'load')}("
        f"{w.op_ref(op)}, {w[op.ptr]})"
    )


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
    buffer = w.symbols.get(name)
    if buffer is None:
        raise InterpreterError(f"{describe(op)}: no shared global @{name}")
    w.alias(op.result, f"({buffer}, 0)")


@emits(nvvm.SpecialRegisterOp)
def _special_register(op: nvvm.SpecialRegisterOp, w: FunctionWriter) -> None:
    index = {
        ("ctaid", "x"): 0,
        ("ctaid", "y"): 1,
        ("ctaid", "z"): 2,
        ("tid", "x"): 3,
        ("tid", "y"): 4,
        ("tid", "z"): 5,
        ("nctaid", "x"): 6,
        ("nctaid", "y"): 7,
        ("nctaid", "z"): 8,
        ("ntid", "x"): 9,
        ("ntid", "y"): 10,
        ("ntid", "z"): 11,
    }.get(tuple(op.name.rsplit(".", 2)[-2:]))  # pyright: ignore[reportArgumentType]
    if w.gpu_context is None or index is None:
        raise InterpreterError(f"{describe(op)} outside a kernel, or not interpreted")
    w.line(f"{w.define(op.res)} = {w.gpu_context}.ids[{index}]")


@emits(nvvm.BarrierOp)
def _barrier(op: nvvm.BarrierOp, w: FunctionWriter) -> None:
    if w.gpu_context is None:
        raise InterpreterError(f"{describe(op)} outside a kernel")
    w.line(f"yield {w.op_ref(op)}")
