"""A 1x1 NHWC convolution compiled as the matrix product of its flattened pixels
(`KernelConfig.flatten_pixels`): the same bytes, the same result, the product's
blocks; the runtime kernel still takes the convolution's arrays."""

from __future__ import annotations

import numpy as np
import pytest

from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import KernelConfig, config_for, flattened_spec, flattens
from affinec.frontend.naive import build
from affinec.frontend.reference import random_inputs, reference
from affinec.tuning.space import search_space

ONE_BY_ONE = ConvSpec(
    n=2, c=32, h=5, w=7, k=16, r=1, s=1, layout="nhwc", filter_layout="rsck",
    dtype="f16", epilogue="bias,residual,relu",
)  # fmt: skip


def test_a_1x1_nhwc_convolution_is_a_product_of_its_pixels():
    product = flattened_spec(ONE_BY_ONE)
    assert product == MatmulSpec(70, 16, 32, "f16", "bias,residual,relu")
    inputs = random_inputs(ONE_BY_ONE, np.random.default_rng(0))
    as_product = [x.reshape(s) for x, s in zip(inputs, _shapes(product), strict=False)]
    np.testing.assert_array_equal(
        reference(ONE_BY_ONE, *inputs).reshape(70, 16), reference(product, *as_product)
    )


def _shapes(product: MatmulSpec) -> list[tuple[int, ...]]:
    m, n, k = product.m, product.n, product.k
    return [(m, k), (k, n), (n,), (m, n)]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"r": 3, "s": 3}, "a 1x1 filter"),
        ({"stride": 2}, "stride 1"),
        ({"padding": 1}, "no padding"),
        ({"layout": "nchw", "filter_layout": "kcrs"}, "NHWC input and RSCK filter"),
    ],
)
def test_other_convolutions_are_refused_with_the_reason(change, reason):
    spec = ConvSpec(**{**ONE_BY_ONE.__dict__, "epilogue": "none", **change})
    assert not flattens(spec)
    with pytest.raises(ValueError, match=reason):
        flattened_spec(spec)
    with pytest.raises(ValueError, match=reason):
        config_for(spec, flatten_pixels=True)


def test_the_flattened_kernel_is_checked_and_takes_the_convolution_s_arrays():
    config = config_for(ONE_BY_ONE, flatten_pixels=True)
    assert config.flatten_pixels and len(config.tile_sizes) == 2
    compiled = compile_to_ptx(ONE_BY_ONE, config, arch="sm_90", check=True)
    assert compiled.spec == flattened_spec(ONE_BY_ONE)
    kernel = compiled.runtime_kernel()
    assert [(p.name, p.shape) for p in kernel.parameters] == [
        ("input", (2, 5, 7, 32)),
        ("filter", (1, 1, 32, 16)),
        ("bias", (16,)),
        ("residual", (2, 5, 7, 16)),
        ("output", (2, 5, 7, 16)),
    ]
    assert kernel.launches[0].arguments == (
        "input",
        "filter",
        "bias",
        "residual",
        "output",
    )
    assert kernel.info["spec"] == ONE_BY_ONE.to_text()


def test_flattening_needs_the_spec_not_its_module():
    with pytest.raises(ValueError, match="not a module"):
        compile_to_ptx(build(ONE_BY_ONE), KernelConfig(flatten_pixels=True))


def test_the_tuner_tries_the_flattened_route_for_1x1_layers_only():
    spec = ConvSpec(
        n=8, c=256, h=14, w=14, k=256, r=1, s=1, layout="nhwc", filter_layout="rsck",
        dtype="f16",
    )  # fmt: skip
    flat = [c for c in search_space(spec).candidates if c.config.flatten_pixels]
    assert flat and all(len(c.config.tile_sizes) == 2 for c in flat)
    three = ConvSpec(**{**spec.__dict__, "r": 3, "s": 3, "padding": (1, 1)})
    assert not any(c.config.flatten_pixels for c in search_space(three).candidates)


def test_the_command_line_takes_the_flag(tmp_path, capsys):
    from affinec.tools.cli import main

    out = tmp_path / "k.ptx"
    shape = ["--n=2", "--c=32", "--h=5", "--w=7", "--k=16", "--r=1", "--s=1"]
    layouts = ["--layout=nhwc", "--filter-layout=rsck", "--dtype=f16"]
    code = main(
        ["compile", "conv", *shape, *layouts, "--flatten-pixels", "-o", str(out)]
    )
    assert code == 0 and "mma.sync" in out.read_text()
    three = [f.replace("--r=1", "--r=3").replace("--s=1", "--s=3") for f in shape]
    assert main(["compile", "conv", *three, *layouts, "--flatten-pixels"]) == 1
    assert "a 1x1 filter" in capsys.readouterr().err
