"""benchmarks/networks.py's variants: a variant the compiler refuses for a layer is
skipped and named, never raised out of the script; the GPU scripts without a GPU end
with the reason, not a traceback."""

import sys

import pytest
from repository_scripts import load_script

from affinec.backend.runtime import cuda_available
from affinec.frontend.networks import network

networks = load_script("benchmarks/networks.py")


def _layer(name: str):
    return next(layer for layer in network("resnet50", 1) if layer.name == name)


def test_a_refused_variant_is_skipped_and_named(capsys):
    """Hopper's kernel split in 2 on a 1x1 layer of 64 channels (one channel step of
    64): `config_for` builds it, the wgmma pass refuses it."""
    row: dict = {}
    layer = _layer("stage2 1x1 64-64 @56")
    compiled = networks._variant(
        layer.spec, "wgmma splits=2", {"wgmma": True, "splits": 2}, "sm_90", row
    )
    assert compiled is None
    assert "splits=2" in row["skipped"]["wgmma splits=2"]
    assert "wgmma splits=2: skipped (" in capsys.readouterr().out


def test_an_accepted_variant_compiles():
    row: dict = {}
    layer = _layer("stage2 1x1 64-64 @56")
    compiled = networks._variant(
        layer.spec, "flattened", {"flatten_pixels": True}, "sm_90", row
    )
    assert compiled is not None and compiled.arch == "sm_90"
    assert "skipped" not in row


@pytest.mark.skipif(cuda_available(), reason="without a GPU: the scripts would run")
@pytest.mark.parametrize(
    "script",
    [
        "scripts/gpu_wgmma_pipeline.py",
        "scripts/gpu_wgmma_taps.py",
        "scripts/gpu_wgmma_taps_ss.py",
        "scripts/gpu_warp_specialize.py",
    ],
)
def test_the_gpu_scripts_end_with_the_reason_without_a_gpu(
    script, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(sys, "argv", [script, "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as ended:
        load_script(script).main()
    assert ended.value.code == 2
    assert "error: no CUDA GPU available" in capsys.readouterr().err
