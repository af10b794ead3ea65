"""Instruction selection decides how to emit an op once per op class
(`llvm_instructions._route`): each class goes the way `isinstance` sends its ops,
and a kernel's LLVM IR is the same whichever way it is asked."""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.ir import Operation

from affinec.backend import llvm_instructions as li
from affinec.dialects import llvm as llvm_extensions
from affinec.dialects import nvvm
from affinec.ir.context import make_context


def _asked_each_time(cls: type[Operation]) -> int:
    """The way `convert`'s cases take `cls`, tested in their order."""
    cases = [
        (llvm.GEPOp, li._GEP),
        (llvm.LoadOp | llvm.StoreOp, li._ACCESS),
        (nvvm.IntrinsicOp, li._INTRINSIC),
        (nvvm.PtxOp, li._PTX),
        (llvm_extensions.ExtractElementOp, li._EXTRACT),
        (llvm_extensions.AddrSpaceCastOp, li._ADDRESS_SPACE_CAST),
        (llvm_extensions.PoisonOp, li._POISON),
    ]
    for base, route in cases:
        if issubclass(cls, base):
            return route
    if cls in llvm_extensions.INTRINSIC_NAMES:
        return li._NAMED_INTRINSIC
    if cls in li._INT_FLOAT_CASTS:
        return li._INT_FLOAT_CAST
    return li._BRANCH if issubclass(cls, llvm.BrOp) else li._XDSL


def test_every_llvm_and_nvvm_op_goes_the_way_isinstance_sends_it() -> None:
    ctx = make_context()
    for name in ctx.registered_dialect_names:
        ctx.load_registered_dialect(name)
    classes = [cls for cls in ctx.loaded_ops if cls.name.startswith(("llvm.", "nvvm."))]
    assert len(classes) > 50
    routes = {cls: li._route(cls) for cls in classes}
    assert routes == {cls: _asked_each_time(cls) for cls in classes}
    # each kind of case is met
    assert {li._GEP, li._ACCESS, li._INTRINSIC, li._PTX, li._BRANCH} <= set(
        routes.values()
    )


def test_a_kernels_llvm_ir_is_the_same_with_a_cold_table() -> None:
    from affinec.backend.emitter import to_llvm_ir
    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx

    spec = ConvSpec(1, 16, 8, 8, 16, 3, 3, padding=1, dtype="f16")
    compiled = compile_to_ptx(spec, arch="sm_80")
    li._ROUTES.clear()
    assert to_llvm_ir(compiled.module, "sm_80") == compiled.llvm_ir
    assert li._ROUTES  # filled again
