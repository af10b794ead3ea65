"""`affinec-wgmma-gemm`'s rewrite: the spec's naive function replaced by the host
function and the `gpu.module` of its `GemmKernel` plan (`wgmma_plan`), written as
MLIR text by `wgmma_text` and parsed, each kernel carrying its launch record.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr

from affinec.base.locating_parser import parse_module
from affinec.dialects import gpu
from affinec.dialects.affinec import LAUNCH, KernelArgument, LaunchRecord
from affinec.ir.context import make_context
from affinec.transforms.gpu.wgmma_plan import GemmKernel
from affinec.transforms.gpu.wgmma_text import gemm_module_text


def replace_with_kernel(module: ModuleOp, fn: func.FuncOp, plan: GemmKernel) -> None:
    """`fn` replaced by the host function and `gpu.module` of `plan`, each kernel
    carrying its launch record (its tensor maps named after the arrays they map;
    with a split, the MMA kernel, then the one adding the partial sums), every op
    located at `fn`."""
    written = parse_module(make_context(), gemm_module_text(plan))
    # The ops stand for `fn`: a diagnostic about any of them points at the user's
    # function, not at a line of the text written here.
    for op in written.walk():
        op.location = fn.location
    host, kernels = list(written.body.block.ops)
    assert isinstance(host, func.FuncOp) and isinstance(kernels, gpu.ModuleOp)
    launches = [o for o in host.walk() if isinstance(o, gpu.LaunchFuncOp)]
    host_names = [a.name_hint or "" for a in host.body.block.args]
    maps = {"mapA": host_names[0], "mapB": host_names[1]}
    for kernel, launch in zip(kernels.body.block.ops, launches, strict=True):
        assert isinstance(kernel, gpu.FuncOp)
        assert launch.kernel_name == kernel.sym_name.data
        parameters = kernel.body.block.args[: len(kernel.function_type.inputs)]
        arguments = tuple(
            KernelArgument(maps.get(a.name_hint or "", a.name_hint or ""), a.type)
            for a in parameters
        )
        record = LaunchRecord(
            kernel=kernel.sym_name.data,
            host=host.sym_name.data,
            grid=_constants(launch.grid_sizes),
            block=_constants(launch.block_sizes),
            dynamic_shared_memory=0,
            arguments=arguments,
            outputs=(arguments[-1].name,),
            tensor_map_shapes=(
                ((host_names[0], plan.conv.strided_input_shape),)
                if plan.conv
                and plan.conv.strided
                and arguments[0].name in maps.values()
                else ()
            ),
        )
        kernel.attributes[LAUNCH] = record.to_attribute()
    for o in (host, kernels):
        o.detach()
    module.body.block.insert_op_before(host, fn)
    module.body.block.insert_op_after(kernels, host)
    fn.detach()
    fn.erase()
    module.attributes["gpu.container_module"] = UnitAttr()


def _constants(values) -> tuple[int, int, int]:
    """The values of three `arith.constant`s (a launch's grid or block)."""
    x, y, z = (v.owner.value.value.data for v in values)
    return (x, y, z)


__all__ = ["replace_with_kernel"]
