"""The compile-time benchmarks' own logic (they time nothing here): which
configuration `benchmarks/compile.py` compiles on each architecture, and that the
Triton yardstick says what it needs where Triton is missing."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import replace

import pytest
from repository_scripts import ROOT, load_script

from affinec.base.spec import ConvSpec
from affinec.frontend.networks import Layer


@pytest.fixture(scope="module")
def compile_benchmark():
    return load_script("benchmarks/compile.py")


def test_hopper_s_route_is_compiled_where_it_takes_the_convolution(compile_benchmark):
    bench = compile_benchmark
    taken, refused = {}, {}
    for label, spec in bench.SPECS.items():
        try:
            taken[label] = bench.configuration(spec, "sm_90a")
        except ValueError as e:
            refused[label] = str(e)
    assert all(config.wgmma for config in taken.values())
    assert "f16 or bf16" in refused[bench.DEFAULT]  # the f32 default convolution
    assert any("resnet50-conv1" in label for label in refused)  # 4 input channels
    elsewhere = [bench.configuration(s, "sm_90") for s in bench.SPECS.values()]
    assert not any(config.wgmma for config in elsewhere)
    one_by_one = next(label for label in taken if "1x1" in label)
    stages = dict(bench.compile_once(bench.SPECS[one_by_one], "sm_90a"))
    assert {"frontend (naive IR)", "affinec-wgmma-gemm", "llvm-ir + ptx"} <= set(stages)


def test_the_triton_yardstick_says_what_it_needs_without_triton():
    if importlib.util.find_spec("triton") is not None:
        pytest.skip("Triton is installed here")
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "triton_compile.py")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert "needs Triton" in run.stderr and "Traceback" not in run.stderr


def test_a_network_s_layers_the_route_refuses_are_named_not_counted(
    compile_benchmark, monkeypatch, tmp_path, capsys
):
    """On sm_90a a 3-channel first layer is not the wgmma route's: it is named as
    refused, and the network's median is over the layers that compiled."""
    bench = compile_benchmark
    small = ConvSpec(1, 64, 8, 8, 64, 1, 1, dtype="f16", layout="nhwc")
    small = replace(small, filter_layout="rsck")
    first = replace(small, c=3, r=7, s=7, stride=(2, 2), padding=(3, 3), h=32, w=32)
    layers = [Layer("first 7x7", first, 1), Layer("1x1 64", small, 1)]
    monkeypatch.setattr(bench, "network", lambda name, batch: layers)
    monkeypatch.setattr(bench, "SPECS", {})
    out = tmp_path / "compile.json"
    argv = ["--arch", "sm_90a", "--network", "resnet50", "--batch", "1"]
    bench.main([*argv, "--repeat", "1", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "resnet50 first 7x7 (batch 1)" in printed and "refused on sm_90a" in printed
    assert "median over resnet50's 1 layers at batch 1" in printed
    assert list(json.loads(out.read_text())["refused"]) == [
        "resnet50 first 7x7 (batch 1)"
    ]
