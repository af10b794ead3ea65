"""The compile-time benchmarks' own logic (they time nothing here): which
configuration `benchmarks/compile.py` compiles on each architecture, and that the
Triton yardstick says what it needs where Triton is missing."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from repository_scripts import ROOT, load_script


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
