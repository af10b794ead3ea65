"""A composable epilogue, `out = act(sum * scale + bias + residual)`: the spec's
steps, their float64 reference, their naive IR through every level of both routes
(the hypothesis strategies draw them for every pass's test too), and the kernel's
parameters."""

import io
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from affinec.base.spec import ConvSpec, MatmulSpec, epilogue_steps, parse_spec
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import random_inputs, reference
from affinec.tools.cli import main as cli_main


def test_the_steps_and_their_names():
    assert epilogue_steps("none") == ()
    assert epilogue_steps("bias-relu") == ("bias", "relu")
    assert epilogue_steps("scale,bias,residual,relu6") == (
        "scale", "bias", "residual", "relu6",
    )  # fmt: skip
    # the old names stay the text of what they name
    assert ConvSpec(1, 4, 5, 5, 4, 3, 3, epilogue="bias,relu").epilogue == "bias-relu"
    spec = ConvSpec(1, 4, 5, 5, 4, 3, 3, epilogue="residual,relu")
    assert parse_spec(spec.to_text()) == spec


@pytest.mark.parametrize(
    "epilogue, message",
    [
        ("relu,bias", "in the order scale, bias, residual, then one activation"),
        ("bias,bias", "each step at most once"),
        ("relu,relu6", "each step at most once"),
        ("gelu", "unknown epilogue step 'gelu'"),
        ("bias,", "unknown epilogue step ''"),
    ],
)
def test_a_wrong_epilogue_is_refused_by_name(epilogue, message):
    with pytest.raises(ValueError, match="ConvSpec.epilogue: .*" + message):
        ConvSpec(1, 4, 5, 5, 4, 3, 3, epilogue=epilogue)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_the_reference_applies_each_step_in_order(layout):
    plain = ConvSpec(2, 3, 6, 5, 4, 3, 3, padding=1, layout=layout)
    spec = ConvSpec(
        2,
        3,
        6,
        5,
        4,
        3,
        3,
        padding=1,
        layout=layout,
        epilogue="scale,bias,residual,relu6",
    )
    x, w, scale, bias, residual = random_inputs(spec, np.random.default_rng(0))
    channel = (1, -1, 1, 1) if layout == "nchw" else (1, 1, 1, -1)
    expected = np.clip(
        reference(plain, x, w) * scale.astype(np.float64).reshape(channel)
        + bias.astype(np.float64).reshape(channel)
        + residual,
        0.0,
        6.0,
    )
    np.testing.assert_allclose(reference(spec, x, w, scale, bias, residual), expected)
    assert residual.shape == spec.output_shape


@pytest.mark.parametrize(
    "spec",
    [
        ConvSpec(1, 16, 6, 6, 16, 3, 3, padding=1, layout="nhwc", filter_layout="rsck",
                 dtype="f16", epilogue="scale,bias,residual,relu6"),
        ConvSpec(1, 16, 5, 5, 24, 3, 3, padding=1, layout="nhwc",
                 filter_layout="rsck", dtype="bf16", epilogue="residual"),
        ConvSpec(1, 4, 6, 6, 8, 3, 3, padding=1, epilogue="residual,relu"),
        MatmulSpec(16, 32, 16, "f16", "scale,residual"),
    ],
)  # fmt: skip
def test_every_level_keeps_a_composed_epilogue(spec):
    # the tensor cores' staged output and the SIMT route, every level interpreted
    # against the one before and float64
    Pipeline(default_passes(config_for(spec))).run(build(spec), check=True)


def test_the_kernel_takes_the_epilogues_operands_in_order():
    spec = ConvSpec(
        1, 16, 6, 6, 16, 3, 3, padding=1, layout="nhwc", filter_layout="rsck",
        dtype="f16", epilogue="scale,bias,residual,relu",
    )  # fmt: skip
    kernel = compile_to_ptx(spec, arch="sm_90").runtime_kernel()
    names = [p.name for p in kernel.parameters]
    assert names == ["input", "filter", "scale", "bias", "residual", "output"]
    assert [a.name for a in contraction_of(spec).operands] == names
    residual = next(p for p in kernel.parameters if p.name == "residual")
    assert tuple(residual.shape) == spec.output_shape


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli_main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_the_command_line_takes_steps_and_refuses_a_wrong_order():
    flags = ["--n", "1", "--c", "4", "--h", "5", "--w", "5", "--k", "8",
             "--r", "3", "--s", "3"]  # fmt: skip
    code, out, _ = _cli("gen", "conv", *flags, "--epilogue", "bias,residual,relu")
    assert code == 0 and "%residual: memref<1x8x3x3xf32>" in out
    code, _, err = _cli("gen", "conv", *flags, "--epilogue", "relu,bias")
    assert code != 0 and err.count("\n") == 1
    assert "each step at most once, in the order scale, bias, residual" in err
