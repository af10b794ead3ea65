"""Shared tiles stored by phase (`affinec-plan-shared-memory{split-phases}`): a
strided window's input tile costs `ldmatrix` fewer wavefronts, and the rewritten IR
computes what the naive loops compute, level by level."""

from dataclasses import replace

import pytest

from affinec.base.spec import ConvSpec
from affinec.driver.config import config_for
from affinec.driver.pipeline import CheckFailure, Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.passes.affinec_plan_shared_memory import AffinecPlanSharedMemory
from affinec.transforms.gpu import phase_split
from affinec.transforms.gpu.bank_conflicts import conflicts

STRIDED = ConvSpec(
    1, 16, 14, 28, 32, 3, 3, stride=(2, 2), padding=1, dtype="f16",
    layout="nhwc", filter_layout="rsck",
)  # fmt: skip
"""A 3x3/2 window of 7 x 14 outputs: 15 x 29 input pixels a tile."""


def _planned(spec: ConvSpec, split: bool):
    """The module after `affinec-plan-shared-memory`, and its passes."""
    config = replace(
        config_for(spec, splits=1, flatten_pixels=False), split_phases=split
    )
    passes = default_passes(config)
    last = next(
        k for k, p in enumerate(passes) if isinstance(p, AffinecPlanSharedMemory)
    )
    module = build(spec)
    Pipeline(passes[: last + 1]).run(module)
    return module, passes


def _input_tile(module):
    (alloc,) = [
        op
        for op in module.walk()
        if op.name == "memref.alloc" and op.results[0].name_hint == "input_shared"
    ]
    return alloc.results[0]


def _ldmatrix_wavefronts(module) -> int:
    return sum(
        c.wavefronts
        for c in conflicts(module)
        if c.op.name == "nvgpu.ldmatrix" and c.buffer.name_hint == "input_shared"
    )


def test_a_strided_window_s_columns_are_stored_by_phase_with_fewer_conflicts():
    plain, _ = _planned(STRIDED, split=False)
    phased, _ = _planned(STRIDED, split=True)
    before = _input_tile(plain).type.get_shape()  # (images, rows, columns, k)
    after = _input_tile(phased).type.get_shape()
    assert before[2] == 29 and after[2] == phase_split.phase_extent(29, 2) == 30
    assert _ldmatrix_wavefronts(phased) < _ldmatrix_wavefronts(plain)


def test_a_unit_stride_window_is_left_as_it_is():
    spec = replace(STRIDED, stride=(1, 1))
    plain, _ = _planned(spec, split=False)
    phased, _ = _planned(spec, split=True)
    assert _input_tile(phased).type == _input_tile(plain).type


@pytest.mark.parametrize("stages", [1, 3])
def test_the_phase_order_keeps_the_result_at_every_level(stages, monkeypatch):
    split = []
    monkeypatch.setattr(
        phase_split, "split_phases", lambda *a: split.append(a) or real_split(*a)
    )
    config = replace(
        config_for(STRIDED, splits=1, flatten_pixels=False),
        split_phases=True,
        stages=stages,
    )
    Pipeline(default_passes(config)).run(build(STRIDED), check=True)
    assert split  # the rewrite ran: the check is of the phase order


real_split = phase_split.split_phases


def test_reads_in_phase_order_over_copies_in_column_order_are_caught(monkeypatch):
    """The check can fail: the copies left in column order while `ldmatrix` reads
    by phase compute something else, and the pass is named."""
    rewrite = phase_split._rewrite

    def reads_only(op, dim, order):
        if op.name == "nvgpu.ldmatrix":
            rewrite(op, dim, order)

    monkeypatch.setattr(phase_split, "_rewrite", reads_only)
    config = replace(
        config_for(STRIDED, splits=1, flatten_pixels=False), split_phases=True
    )
    with pytest.raises(CheckFailure, match="affinec-plan-shared-memory"):
        Pipeline(default_passes(config)).run(build(STRIDED), check=True)


def test_the_command_line_takes_the_knob(capsys):
    from affinec.tools.cli import main

    args = [
        "compile", "conv", "--n", "1", "--c", "16", "--h", "14", "--w", "28",
        "--k", "32", "--r", "3", "--s", "3", "--stride", "2", "--pad", "1",
        "--dtype", "f16", "--layout", "nhwc", "--filter-layout", "rsck", "--mma",
        "--tile-sizes", "1,7,14,32", "--reduction-tile-sizes", "3,3,16",
        "--reassociate", "--unroll-taps", "--warp-grid", "2,2",
    ]  # fmt: skip
    sizes = []
    for flags in ([], ["--split-phases"]):
        assert main(args + flags) == 0
        ptx = capsys.readouterr().out
        sizes.append([line for line in ptx.splitlines() if ".b8 __shared" in line])
    # the input tile: 15 rows x 29 columns x 24 halves, then its columns as 2 x 15
    assert any("[20880]" in line for line in sizes[0])
    assert any("[21600]" in line for line in sizes[1])
