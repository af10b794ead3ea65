"""The chip in the IR: `#nvvm.target` on the module, the limits every pass plans
against read from `affinec.hardware.chips`."""

import dataclasses

import pytest

from affinec.base.diagnostics import OpError, PassError
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec
from affinec.dialects import gpu
from affinec.dialects.nvvm_target import TARGET, chip_name_of, chip_of, target_attr
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.hardware.chips import CHIPS, chip
from affinec.ir.context import make_context

# Six stages of a tensor-core step over the whole 3x3 window, 30528 bytes each: 183
# KB of shared tiles, past sm_80's 163 KiB a block, within sm_90's 227 KiB.
SPEC = ConvSpec(
    1, 96, 4, 32, 64, 3, 3, padding=1, dtype="f16", layout="nhwc",
    filter_layout="rsck",
)  # fmt: skip
CONFIG = dataclasses.replace(config_for(SPEC), stages=6, stage_output=False)


def test_the_chips_limits():
    assert chip("sm_90").max_shared_per_block == 227 * 1024
    assert chip("sm_80").max_shared_per_block == 163 * 1024
    assert chip("sm_86").max_shared_per_block == 99 * 1024
    assert chip("sm_90a").has("wgmma") and not chip("sm_90").has("wgmma")
    assert all(c.warp_size == 32 for c in CHIPS.values())
    with pytest.raises(ValueError, match="unknown GPU architecture 'sm_75'"):
        chip("sm_75")


def test_a_compile_is_planned_within_its_chips_shared_memory():
    assert CONFIG.mma and CONFIG.reduction_tile_sizes == (3, 3, 16)
    kernel = compile_to_ptx(SPEC, CONFIG, arch="sm_90")
    assert kernel.launch.dynamic_shared_memory > 163 * 1024
    with pytest.raises(PassError, match="shared memory a block may have on sm_80"):
        compile_to_ptx(SPEC, CONFIG, arch="sm_80")


def test_the_target_travels_from_the_module_to_the_kernels_gpu_module():
    kernel = compile_to_ptx(SPEC, config_for(SPEC), arch="sm_90")
    (module,) = [o for o in kernel.module.walk() if isinstance(o, gpu.ModuleOp)]
    assert module.targets is not None
    assert [t.chip.data for t in module.targets.data] == ["sm_90"]
    assert chip_of(module).name == "sm_90"
    # Printed and read back, it is the same IR.
    text = str(kernel.module)
    assert '#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">' in text
    assert str(parse_module(make_context(), text)) == text


def test_a_module_for_another_chip_is_refused():
    module = build(SPEC)
    module.attributes[TARGET] = target_attr("sm_90")
    with pytest.raises(ValueError, match="the module is for sm_90"):
        compile_to_ptx(module, config_for(SPEC), arch="sm_80")


def test_nvvm_attach_target():
    module = build(SPEC)
    assert chip_name_of(module) == "sm_80"  # no target: sm_80
    Pipeline.parse("nvvm-attach-target{chip=sm_86}").run(module)
    assert chip_of(module).name == "sm_86"
    # 30528 bytes a stage: four fit sm_86's 99 KiB, six do not.
    with pytest.raises(PassError, match="on sm_86"):
        Pipeline(default_passes(CONFIG)).run(module)
    with pytest.raises(PassError, match="unknown chip 'sm_75'"):
        Pipeline.parse("nvvm-attach-target{chip=sm_75}").run(build(SPEC))


def test_an_unknown_chip_in_the_ir_is_a_located_error():
    module = build(SPEC)
    module.attributes[TARGET] = target_attr("sm_75")
    with pytest.raises(OpError, match="unknown GPU architecture 'sm_75'"):
        Pipeline(default_passes(config_for(SPEC))).run(module)


def test_ptx_is_emitted_for_the_chip_the_kernels_were_planned_for(tmp_path, capsys):
    from affinec.tools.opt import main as affinec_opt

    path = tmp_path / "conv.mlir"
    path.write_text(str(build(ConvSpec(1, 8, 8, 8, 8, 3, 3, padding=1))))
    planned = "nvvm-attach-target{chip=sm_90},affinec-default"
    assert affinec_opt([str(path), "-p", planned, "-t", "ptx"]) == 0
    assert ".target sm_90" in capsys.readouterr().out
    assert affinec_opt([str(path), "-p", planned, "-t", "ptx{arch=sm_80}"]) == 1
    assert "planned for sm_90 (#nvvm.target), not sm_80" in capsys.readouterr().err
    other = "nvvm-attach-target{chip=sm_86},affinec-default"
    assert affinec_opt([str(path), "-p", other, "-t", "ptx"]) == 1
    assert "cannot emit for sm_86" in capsys.readouterr().err
    assert affinec_opt([str(path), "-p", "affinec-default", "-t", "ptx"]) == 0
    assert ".target sm_80" in capsys.readouterr().out


def test_sm_90a_is_a_target_of_its_own():
    """The H100's architecture-specific variant: planned for its chip record,
    emitted as `.target sm_90a` (what wgmma and TMA will need), assembled by ptxas
    for it alone; an H100 still gets plain sm_90 unless sm_90a is asked for."""
    from affinec.backend.ptxas import PtxasError, assemble
    from affinec.base.spec import MatmulSpec
    from affinec.driver.compiler import compile_to_ptx

    kernel = compile_to_ptx(MatmulSpec(64, 64, 64, dtype="f16"), arch="sm_90a")
    assert ".target sm_90a" in kernel.ptx
    assert assemble(kernel.ptx, "sm_90a")[kernel.name].spill_stores == 0
    with pytest.raises(PtxasError):
        assemble(kernel.ptx, "sm_80")
