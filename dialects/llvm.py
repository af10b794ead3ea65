"""xDSL's llvm dialect with the ops it lacks: `llvm.extractelement`,
`llvm.addrspacecast`, the casts `llvm.uitofp`, `llvm.fptosi` and `llvm.fptoui`,
the intrinsics `llvm.intr.maximum`, `minimum`, `smax`, `smin`, `umax` and `umin`, and
`llvm.mlir.poison`; `llvm.getelementptr` with MLIR 22's no-wrap flags; and MLIR's checks that xDSL's verifiers lack, of
`llvm.getelementptr`'s indices, of `llvm.icmp`'s and `llvm.fcmp`'s predicates, of
the positions `llvm.extractvalue` and
`llvm.insertvalue` take in an aggregate, of the types `llvm.load` and `llvm.store` move
(LLVM's, with a size), and of what `llvm.call` and `llvm.return` pass against the
functions' types.

xDSL 0.74 has `llvm.insertelement` but not its inverse, which the lowering of n-D
vectors needs to read one element of a `vector<2xf16>`, nor the cast of a pointer to
another address space, which a TMA load needs for its destination (shared memory as
the cluster sees it). In MLIR's syntax:

    %e = llvm.extractelement %v[%i : i32] : vector<2xf16>
    %p = llvm.addrspacecast %s : !llvm.ptr<3> to !llvm.ptr<7>

Nor has it the casts between integers and floats but `llvm.sitofp`, which
`convert-gpu-to-nvvm` needs for arith's `uitofp`, `fptosi` and `fptoui`:

    %f = llvm.uitofp %i : i32 to f32
    %i = llvm.fptosi %f : f16 to i64

and MLIR's `convert-arith-to-llvm` writes `arith.maximumf` and `arith.minimumf` as
intrinsic ops (`llvm.intr.maximum(%a, %b) : (f32, f32) -> f32`), which xDSL has for
`maxnum`, `minnum` and `fma` only; MLIR's lowerings start the aggregates they build
(a memref's descriptor) from `llvm.mlir.poison`, which xDSL lacks:

    %d = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64)>

MLIR 22 keeps a `getelementptr`'s `inbounds` among its no-wrap flags
(`noWrapFlags`: `inbounds` 3, `nusw` 2, `nuw` 4) and writes them as keywords
(`llvm.getelementptr inbounds|nuw %p[1]`); xDSL 0.74 keeps `inbounds` as a property
of its own and reads no other flag, so that MLIR and affinec read each other's
generic form differently. `GEPOp` is MLIR 22's.

`LLVM` is xDSL's dialect plus these ops; affinec's context registers it in place of
xDSL's (every xDSL llvm op is still there). The ops are `affinec.dialects.llvm_ops`'s
(this module re-exports them); MLIR's checks are here.
"""

from __future__ import annotations

from xdsl.dialects import llvm as xdsl_llvm
from xdsl.dialects.builtin import (
    AnyFloat,
    IntegerType,
    Signedness,
    VectorType,
)
from xdsl.ir import Attribute, Dialect, Operation
from xdsl.traits import SymbolTable

from affinec.base.diagnostics import OP_CHECKS, VerificationError
from affinec.dialects.arith import comparison_predicate
from affinec.dialects.llvm_ops import (
    GEP_NO_WRAP_FLAGS,
    INTRINSIC_NAMES,
    AddrSpaceCastOp,
    ExtractElementOp,
    FPToSIOp,
    FPToUIOp,
    GEPOp,
    MaximumOp,
    MinimumOp,
    PoisonOp,
    SMaxOp,
    SMinOp,
    UIToFPOp,
    UMaxOp,
    UMinOp,
    is_inbounds,
    no_wrap_flags,
)

_INTEGERS = "signless integer or LLVM dialect-compatible vector of signless integer"
_FLOATS = (
    "floating point LLVM type or LLVM dialect-compatible vector of floating point "
    "LLVM type"
)


def _scalar(t: Attribute) -> Attribute:
    return t.get_element_type() if isinstance(t, VectorType) else t


def _is_integer(t: Attribute) -> bool:
    t = _scalar(t)
    return isinstance(t, IntegerType) and t.signedness.data == Signedness.SIGNLESS


def _is_float(t: Attribute) -> bool:
    return isinstance(_scalar(t), AnyFloat)


def _int_float_cast(op: Operation) -> str | None:
    """An integer to a float (`sitofp`, `uitofp`) or back (`fptosi`, `fptoui`),
    each a scalar or a vector of them, in MLIR's words (xDSL's casts take any
    types)."""
    to_float = isinstance(op, xdsl_llvm.SIToFPOp | UIToFPOp)
    source, target = op.operands[0].type, op.results[0].type
    want = (_is_integer, _INTEGERS) if to_float else (_is_float, _FLOATS)
    if not want[0](source):
        return f"operand #0 must be {want[1]}, but got '{source}'"
    want = (_is_float, _FLOATS) if to_float else (_is_integer, _INTEGERS)
    if not want[0](target):
        return f"result #0 must be {want[1]}, but got '{target}'"
    return None


def _gep_indices(op: Operation) -> str | None:
    """At least one index, and a value for each index the constant indices mark as
    given by one (`GEP_USE_SSA_VAL`), as MLIR checks (xDSL's verifier does not, and
    the emitter and the interpreter pair them up)."""
    assert isinstance(op, xdsl_llvm.GEPOp)
    if not len(op.rawConstantIndices):
        # (MLIR's parser refuses `%p[]`; xDSL's reads it)
        return "expected at least one index"
    marked = sum(
        1 for i in op.rawConstantIndices.iter_values() if i == xdsl_llvm.GEP_USE_SSA_VAL
    )
    if marked != len(op.ssa_indices):
        return "expected as many dynamic indices as specified in 'rawConstantIndices'"
    return None


def _call_matches_callee(op: Operation) -> str | None:
    """MLIR's checks of a direct call against its callee's type (xDSL's verifier
    checks only that the callee is an `llvm.func`): the operands, as many (at
    least as many, variadic) and of its parameters' types; a result where it
    returns one, of its type."""
    assert isinstance(op, xdsl_llvm.CallOp)
    callee = None if op.callee is None else SymbolTable.lookup_symbol(op, op.callee)
    if not isinstance(callee, xdsl_llvm.FuncOp):
        return None  # an indirect call, or xDSL's verifier's error
    function_type = callee.function_type
    if function_type.is_variadic and op.var_callee_type is None:
        return "missing var_callee_type attribute for vararg call"
    params, args = function_type.inputs.data, op.args
    if not function_type.is_variadic and len(params) != len(args):
        return (
            f"incorrect number of operands ({len(args)}) for callee (expecting: "
            f"{len(params)})"
        )
    if len(params) > len(args):
        return (
            f"incorrect number of operands ({len(args)}) for varargs callee "
            f"(expecting at least: {len(params)})"
        )
    for k, (value, param) in enumerate(zip(args, params, strict=False)):
        if value.type != param:
            return f"operand type mismatch for operand {k}: '{value.type}' != '{param}'"
    void = isinstance(function_type.output, xdsl_llvm.LLVMVoidType)
    if not op.results and not void:
        return "expected function call to produce a value"
    if op.results and void:
        return "calling function with void result must not produce values"
    if op.results and op.results[0].type != function_type.output:
        return (
            f"result type mismatch: '{op.results[0].type}' != '{function_type.output}'"
        )
    return None


def _return_matches_function(op: Operation) -> None:
    """MLIR's check of `llvm.return` against the function's result type (xDSL's
    verifier has none), with its note at the function."""
    assert isinstance(op, xdsl_llvm.ReturnOp)
    function = op.parent_op()
    while function is not None and not isinstance(function, xdsl_llvm.FuncOp):
        function = function.parent_op()
    if function is None:
        return
    output = function.function_type.output
    void = isinstance(output, xdsl_llvm.LLVMVoidType)
    if void and op.arg is not None:
        problem = "expected no operands"
    elif not void and op.arg is None:
        problem = "expected 1 operand"
    elif op.arg is not None and op.arg.type != output:
        problem = "mismatching result types"
    else:
        return
    raise VerificationError(op, problem, ((function, "when returning from function"),))


def _sized(t: Attribute) -> bool:
    """MLIR's "LLVM type with size": what a load reads or a store writes."""
    return xdsl_llvm.is_compatible_type(t) and not isinstance(
        t, xdsl_llvm.LLVMFunctionType
    )


def _moves_a_sized_type(op: Operation) -> str | None:
    """What `llvm.load` reads and `llvm.store` writes is an LLVM type with a size."""
    assert isinstance(op, xdsl_llvm.LoadOp | xdsl_llvm.StoreOp)
    load = isinstance(op, xdsl_llvm.LoadOp)
    t = (op.dereferenced_value if load else op.value).type
    if _sized(t):
        return None
    what = "result" if load else "operand"
    return f"{what} #0 must be LLVM type with size, but got '{t}'"


def _aggregate_position(op: Operation) -> str | None:
    """MLIR's checks of `llvm.extractvalue`/`llvm.insertvalue` (xDSL's verifiers
    have none): an aggregate (struct or array), each position within its level,
    the value of the element type there, and an insert's result of the
    aggregate's type."""
    assert isinstance(op, xdsl_llvm.ExtractValueOp | xdsl_llvm.InsertValueOp)
    container = op.container.type
    if not isinstance(container, xdsl_llvm.LLVMStructType | xdsl_llvm.LLVMArrayType):
        return f"operand #0 must be LLVM aggregate type, but got '{container}'"
    element: Attribute = container
    for position in op.position.get_values():
        if isinstance(element, xdsl_llvm.LLVMStructType):
            fields = element.types.data
        elif isinstance(element, xdsl_llvm.LLVMArrayType):
            fields = [element.type] * element.size.data
        else:
            return f"expected LLVM IR structure/array type, got: '{element}'"
        if not 0 <= position < len(fields):
            return f"position out of bounds: {position}"
        element = fields[position]
    if isinstance(op, xdsl_llvm.ExtractValueOp):
        if op.res.type != element:
            return (
                f"Type mismatch: extracting from '{container}' should produce "
                f"'{element}' but this op returns '{op.res.type}'"
            )
        return None
    if op.value.type != element:
        return f"Type mismatch: cannot insert '{op.value.type}' into '{container}'"
    if op.res.type != container:
        return "failed to verify that all of {container, res} have same type"
    return None


OP_CHECKS[xdsl_llvm.GEPOp] = OP_CHECKS[GEPOp] = _gep_indices
# (the cases in the order of arith's, which the emitter and the interpreter index by)
OP_CHECKS[xdsl_llvm.ICmpOp] = comparison_predicate(10, "llvm.icmp comparison predicate")
OP_CHECKS[xdsl_llvm.FCmpOp] = comparison_predicate(16, "llvm.fcmp comparison predicate")
OP_CHECKS[xdsl_llvm.ExtractValueOp] = _aggregate_position
OP_CHECKS[xdsl_llvm.InsertValueOp] = _aggregate_position
OP_CHECKS[xdsl_llvm.LoadOp] = OP_CHECKS[xdsl_llvm.StoreOp] = _moves_a_sized_type
OP_CHECKS[xdsl_llvm.CallOp] = _call_matches_callee
for _cast in (xdsl_llvm.SIToFPOp, UIToFPOp, FPToSIOp, FPToUIOp):
    OP_CHECKS[_cast] = _int_float_cast
OP_CHECKS[xdsl_llvm.ReturnOp] = _return_matches_function


LLVM = Dialect(
    "llvm",
    [
        *(op for op in xdsl_llvm.LLVM.operations if op is not xdsl_llvm.GEPOp),
        GEPOp,
        ExtractElementOp,
        AddrSpaceCastOp,
        UIToFPOp,
        FPToSIOp,
        FPToUIOp,
        MaximumOp,
        MinimumOp,
        PoisonOp,
        SMaxOp,
        SMinOp,
        UMaxOp,
        UMinOp,
    ],
    [*xdsl_llvm.LLVM.attributes],
)

__all__ = [
    "AddrSpaceCastOp",
    "ExtractElementOp",
    "FPToSIOp",
    "FPToUIOp",
    "GEPOp",
    "GEP_NO_WRAP_FLAGS",
    "INTRINSIC_NAMES",
    "LLVM",
    "MaximumOp",
    "MinimumOp",
    "PoisonOp",
    "SMaxOp",
    "SMinOp",
    "UIToFPOp",
    "UMaxOp",
    "UMinOp",
    "is_inbounds",
    "no_wrap_flags",
]
