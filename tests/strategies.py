"""Hypothesis strategies for specs small enough to interpret quickly (a few thousand
multiply-adds), covering every layout, dtype, stride, padding, dilation and epilogue."""

from hypothesis import assume
from hypothesis import strategies as st

from affinec.spec import (
    DTYPES,
    EPILOGUES,
    FILTER_LAYOUTS,
    LAYOUTS,
    ConvSpec,
    MatmulSpec,
    OuterSpec,
)


@st.composite
def conv_specs(draw, max_channels: int = 4, max_image: int = 9) -> ConvSpec:
    r = draw(st.integers(1, 3))
    s = draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(1, max_image))
    w = draw(st.integers(1, max_image))
    assume(dilation[0] * (r - 1) + 1 <= h + 2 * padding[0])
    assume(dilation[1] * (s - 1) + 1 <= w + 2 * padding[1])
    return ConvSpec(
        n=draw(st.integers(1, 2)),
        c=draw(st.integers(1, max_channels)),
        h=h,
        w=w,
        k=draw(st.integers(1, max_channels)),
        r=r,
        s=s,
        stride=stride,
        padding=padding,
        dilation=dilation,
        layout=draw(st.sampled_from(LAYOUTS)),
        filter_layout=draw(st.sampled_from(FILTER_LAYOUTS)),
        dtype=draw(st.sampled_from(DTYPES)),
        epilogue=draw(st.sampled_from(EPILOGUES)),
    )


@st.composite
def matmul_specs(draw, max_size: int = 12) -> MatmulSpec:
    return MatmulSpec(
        m=draw(st.integers(1, max_size)),
        n=draw(st.integers(1, max_size)),
        k=draw(st.integers(1, max_size)),
        dtype=draw(st.sampled_from(DTYPES)),
        epilogue=draw(st.sampled_from(EPILOGUES)),
    )


@st.composite
def outer_specs(draw, max_size: int = 12) -> OuterSpec:
    return OuterSpec(
        m=draw(st.integers(1, max_size)),
        n=draw(st.integers(1, max_size)),
        dtype=draw(st.sampled_from(DTYPES)),
    )


def specs():
    """Any spec kind, convolutions most often."""
    return st.one_of(conv_specs(), conv_specs(), matmul_specs(), outer_specs())
