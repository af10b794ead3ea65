"""A convolution of any batch (`ConvSpec(dynamic_batch=True)`, `batch=dynamic`): the
naive IR over `memref<?x...>` with the batch a symbol of the output band, every level
of `config_for`'s route interpreted against the one before, the final kernel
interpreted again at batches it was not configured for, the launch record's grid
as a function of the batch, the runtime's checks of a call's arrays, and the
refusals of what one image a block cannot compile."""

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings
from xdsl.parser import Parser

from affinec.backend.ptxas import assemble, find_ptxas
from affinec.backend.runtime import KernelArgumentError
from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec, parse_spec
from affinec.dialects.affinec import LaunchRecord
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for, takes_any_batch
from affinec.driver.pipeline import Pipeline
from affinec.frontend.naive import build
from affinec.frontend.reference import random_inputs, reference, relative_error, verdict
from affinec.interpreter.interpreter import interpret
from affinec.interpreter.support import InterpreterError
from affinec.ir.context import make_context
from affinec.testing import conv_specs
from affinec.tuning.cache import batch_bucket, tuning_key
from affinec.tuning.space import search_space
from strategies import examples

NHWC = ConvSpec(
    2, 16, 6, 6, 16, 3, 3, padding=1, layout="nhwc", filter_layout="rsck",
    dtype="f16", epilogue="bias,residual,relu", dynamic_batch=True,
)  # fmt: skip


def _run_at(compiled, spec: ConvSpec, batch: int, seed: int = 0) -> float:
    """The relative error of the compiled module interpreted over `batch` images."""
    fixed = dataclasses.replace(spec, n=batch, dynamic_batch=False)
    inputs = random_inputs(fixed, np.random.default_rng(seed))
    out = np.full(fixed.output_shape, np.nan, dtype=inputs[0].dtype)
    interpret(compiled.module, "conv", *inputs, out)
    return relative_error(out, reference(fixed, *inputs))


def test_the_spec_text_and_the_naive_ir():
    assert NHWC.to_text().endswith(" batch=dynamic")
    assert parse_spec(NHWC.to_text()) == NHWC
    assert "batch" not in dataclasses.replace(NHWC, dynamic_batch=False).to_text()
    with pytest.raises(ValueError, match="batch must be one of dynamic, static"):
        parse_spec(NHWC.to_text().replace("batch=dynamic", "batch=any"))
    text = str(build(NHWC))
    assert "%input: memref<?x6x6x16xf16>" in text
    assert "%residual: memref<?x6x6x16xf16>" in text
    assert "%filter: memref<3x3x16x16xf16>" in text  # no batch, no dynamic size
    assert "%batch = memref.dim %input" in text
    assert "to (symbol(%batch), 6, 6, 16)" in text
    assert "{in_bounds = array<i64: 0>}" in text  # the padded input's batch
    # it prints and re-parses as the same IR
    again = Parser(make_context(), text).parse_module()
    assert str(again) == text


@settings(max_examples=examples(10), deadline=None)
@given(
    conv_specs(max_channels=4, max_image=5, dynamic_batch=True).map(
        lambda s: dataclasses.replace(s, dynamic_batch=True)
    )
)
def test_every_level_keeps_the_result_and_any_batch_runs(spec):
    """config_for's route, each pass checked by the interpreter at the spec's
    batch; the final kernel then at a batch of one and at one more than it."""
    config = config_for(spec)
    compiled = compile_to_ptx(spec, config, check=True)
    assert takes_any_batch(config)
    for batch in (1, spec.n + 1):
        error = _run_at(compiled, spec, batch, seed=batch)
        assert verdict(spec, error).ok, (batch, error)


def test_the_tensor_core_route_at_batches_it_was_not_configured_for():
    compiled = compile_to_ptx(NHWC, check=True)
    assert compiled.config is not None and compiled.config.mma
    (record,) = compiled.launches
    assert record.batch_grid is not None
    assert record.grid_text.startswith("(batch")
    for batch in (1, 3, 5):
        assert verdict(NHWC, _run_at(compiled, NHWC, batch, seed=batch)).ok
    # the record survives printing and parsing
    again = LaunchRecord.from_attribute(record.to_attribute())
    assert again == record
    assert again.grid_for(4)[0] == 4 * again.grid_for(1)[0]


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_ptxas_assembles_the_kernel_of_any_batch():
    compiled = compile_to_ptx(NHWC)
    for arch in ("sm_80", "sm_90"):
        resources = assemble(compiled.ptx, arch)
        assert resources["conv_kernel"].spill_stores == 0


def test_the_runtime_takes_one_batch_for_all_arrays():
    kernel = compile_to_ptx(NHWC).runtime_kernel()
    assert kernel.batched
    assert "input: ?x6x6x16xfloat16" in kernel.signature()
    w = np.ones((3, 3, 16, 16), np.float16)
    bias = np.ones(16, np.float16)

    def images(n: int) -> np.ndarray:
        return np.ones((n, 6, 6, 16), np.float16)

    for n in (1, 7):
        arguments = kernel.check(images(n), w, bias, images(n))
        assert [a.parameter.shape[0] for a in arguments] == [n, 3, 16, n, n]
        assert (
            kernel.launches[0].grid_for(n)[0] == n * kernel.launches[0].grid_for(1)[0]
        )
    with pytest.raises(KernelArgumentError, match="its batch .* is 3, 'input''s is 2"):
        kernel.check(images(2), w, bias, images(3))
    with pytest.raises(KernelArgumentError, match="a batch of 0"):
        kernel.check(images(0), w, bias, images(0))
    with pytest.raises(KernelArgumentError, match=r"expected an array of shape \(2, 6"):
        kernel.check(images(2), w, bias, np.ones((2, 6, 6, 8), np.float16))


def test_what_one_image_a_block_cannot_compile_is_refused():
    with pytest.raises(PassError, match="it takes a tile size of 1, got 2"):
        compile_to_ptx(NHWC, tile_sizes=(2, 6, 6, 16))
    for knob in ({"wgmma": True}, {"splits": 2}, {"flatten_pixels": True}):
        with pytest.raises(ValueError, match="one image a block"):
            config_for(NHWC, **knob)
    space = search_space(dataclasses.replace(NHWC, n=16, h=14, w=14))
    assert all(takes_any_batch(c) for c in space.configs)


def test_the_batch_bucket_keys_the_tuning():
    assert [batch_bucket(n) for n in (1, 2, 3, 8, 12, 63, 64)] == [
        1,
        2,
        2,
        8,
        8,
        32,
        64,
    ]
    assert " n=8 " in tuning_key(dataclasses.replace(NHWC, n=12))
    assert tuning_key(dataclasses.replace(NHWC, n=12, dynamic_batch=False)).startswith(
        "conv n=12 "
    )


def test_a_padded_load_along_a_dynamic_size_must_say_in_bounds():
    text = str(build(NHWC)).replace(" {in_bounds = array<i64: 0>}", "")
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(PassError, match="dimension 0 of memref<\\?x6x6x16xf16> has a "):
        Pipeline.parse(
            "affine-loop-tile{tile-sizes=1,6,6,16},affinec-split,affinec-sink,"
            "affine-data-copy-generate{generate-dma=true}"
        ).run(module)


def test_the_interpreter_checks_the_in_bounds_claim():
    text = str(build(NHWC)).replace("symbol(%batch)", "symbol(%batch) + 1")
    module = Parser(make_context(), text).parse_module()
    spec = dataclasses.replace(NHWC, dynamic_batch=False)
    inputs = random_inputs(spec, np.random.default_rng(0))
    out = np.zeros(spec.output_shape, np.float16)
    with pytest.raises(InterpreterError, match="index \\[2, .* is out of bounds"):
        interpret(module, "conv", *inputs, out)


def test_the_benchmark_compiles_a_layer_both_ways(tmp_path, capsys):
    """benchmarks/dynamic_batch.py --compile-only: the same configuration compiled
    for a fixed batch and for any batch, ptxas's report of both (no GPU)."""
    import json

    from repository_scripts import load_script

    bench = load_script("benchmarks/dynamic_batch.py")
    out = tmp_path / "rows.json"
    argv = ["--compile-only", "--layers", "2", "--batch", "1", "4", "--json", str(out)]
    assert bench.main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["batch"], r["spec"].endswith("batch=dynamic")) for r in rows] == [
        (1, True),
        (4, True),
    ] * 2
    assert all(r["fixed_registers"] > 0 and r["dynamic_registers"] > 0 for r in rows)
    assert "any/fixed" in capsys.readouterr().out


def test_the_command_lines_take_any_batch(tmp_path, capsys):
    from affinec.tools.cli import main as affinec
    from affinec.tools.opt import main as affinec_opt

    flags = ["--n", "2", "--c", "16", "--h", "6", "--w", "6", "--k", "16", "--r", "3"]
    flags += ["--s", "3", "--pad", "1", "--dtype", "f16", "--layout", "nhwc"]
    flags += ["--filter-layout", "rsck", "--dynamic-batch"]
    naive = tmp_path / "any.mlir"
    assert affinec(["gen", "conv", *flags, "-o", str(naive)]) == 0
    assert "memref<?x6x6x16xf16>" in naive.read_text()
    assert affinec(["check", str(naive), "-p", "affinec-default"]) == 0
    assert "ok: every stage" in capsys.readouterr().out
    assert affinec_opt([str(naive), "-p", "affinec-default"]) == 0
    assert "batch_grid = affine_map<(d0) -> (d0)>" in capsys.readouterr().out
    ptx = tmp_path / "any.ptx"
    assert affinec(["compile", "conv", *flags, "--resources", "-o", str(ptx)]) == 0
    assert "grid (batch, 1, 1)" in capsys.readouterr().err
    assert ".entry conv_kernel" in ptx.read_text()
    # `affinec run --batches`: refused, before any GPU work, where it cannot run
    static = [f for f in flags if f != "--dynamic-batch"]
    assert affinec(["run", "conv", *static, "--batches", "1", "3"]) == 1
    assert "add --dynamic-batch" in capsys.readouterr().err
    assert affinec(["run", "conv", *flags, "--batches", "0", "3"]) == 1
    assert "at least 1, got [0, 3]" in capsys.readouterr().err


@pytest.mark.parametrize(
    "change, message",
    [
        (
            ("in_bounds = array<i64: 0>", "in_bounds = array<i64: 7>"),
            "of dimensions below 4",
        ),
        (("in_bounds = array<i64: 0>", "in_bounds = 3"), "must be an array<i64>"),
        (
            ("memref<?x6x6x16xf16>", "memref<?x?x6x16xf16>"),
            "dimension 1 of memref<\\?x\\?x6x16xf16> has a dynamic size",
        ),
    ],
)
def test_malformed_ir_of_any_batch_is_refused_where_it_is_wrong(
    change, message, tmp_path, capsys
):
    from affinec.tools.opt import main as affinec_opt

    text = str(build(dataclasses.replace(NHWC, epilogue="none"))).replace(*change)
    path = tmp_path / "bad.mlir"
    path.write_text(text)
    assert affinec_opt([str(path), "-p", "affinec-default"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:") and " error: " in err
    assert re.search(message, err), err
