"""The spec strategies the tests draw from: affinec's public ones
(`affinec.testing`), which users testing their own passes use too, the
tensor-core cases several test files share, inputs with NaNs, and the example count
of a slow property under the loaded hypothesis profile."""

import numpy as np
from hypothesis import assume, settings
from hypothesis import strategies as st

from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.driver.config import KernelConfig
from affinec.frontend.contraction import contraction_of, is_depthwise
from affinec.testing import conv_specs, matmul_specs, outer_specs, specs

__all__ = [
    "conv_specs",
    "examples",
    "matmul_specs",
    "mma_cases",
    "outer_specs",
    "specs",
    "with_nans",
]


_SCALE = {"ci": 0.5, "thorough": 10.0}
"""How the example counts written in the tests scale with the profile (conftest.py):
halved under `ci` (`make test`, derandomized: the same examples every run), ten
times under `thorough`, as written under `dev` and the others."""


def examples(n: int) -> int:
    """The example count of a slow property whose test asks for `n` under `dev`:
    `n` scaled by the loaded profile, never below 3 (nor above `n` where `n` < 3)."""
    scale = _SCALE.get(settings.get_current_profile_name(), 1.0)
    return max(min(n, 3), round(n * scale))


def with_nans(arrays: list[np.ndarray], seed: int) -> list[np.ndarray]:
    """Copies of the float arrays with some elements NaN (3 %), so that NaN
    propagation is compared too; other arrays as they are."""
    rng = np.random.default_rng(seed)
    out = []
    for a in arrays:
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            a = a.copy()
            a[rng.random(a.shape) < 0.03] = np.nan
        out.append(a)
    return out


@st.composite
def mma_cases(draw):
    """A spec the tensor cores take and a configuration of the mma route for it."""
    # The tensor cores' operands: f16, bf16, and f32 taken as tf32.
    dtype = draw(st.sampled_from(["f16", "bf16", "f32"]))
    spec = draw(
        st.one_of(
            conv_specs(max_channels=20, max_image=6).map(
                lambda s: ConvSpec(**{**s.__dict__, "dtype": dtype})
            ),
            matmul_specs(20).map(
                lambda s: MatmulSpec(s.m, s.n, s.k, dtype, s.epilogue)
            ),
        )
    )
    # Grouped convolutions take the tensor cores in NHWC with an RSCK filter only
    # (the group's channels innermost); others are refused, as config_for knows.
    assume(
        not isinstance(spec, ConvSpec)
        or spec.groups == 1
        or (spec.layout, spec.filter_layout) == ("nhwc", "rsck")
    )
    # A depthwise convolution sums no channels: nothing for the tensor cores' k.
    assume(not is_depthwise(spec))
    c = contraction_of(spec)
    names = [n for n, _ in c.output_index]
    extents = [e for _, e in c.output_index]
    tiles = [draw(st.integers(1, min(e, 8))) for e in extents]
    if "g" in names:  # a block within one group (the MMA's k and n are its own)
        tiles[names.index("g")] = 1
    channel = names.index("k" if "k" in names else "j")
    tiles[channel] = min(extents[channel], draw(st.sampled_from([8, 16])))
    reductions = [e for _, e in c.reduction_index]
    order = [n for n, _ in c.reduction_index]
    # An order-keeping step: leading tiles of 1, the channel loop cut (or whole).
    step = draw(st.integers(2, 20))
    # A channel loop of one step folds away: tensor cores need at least two.
    assume(reductions[order.index("c" if "c" in order else "p")] >= 2)
    rtiles = []
    ch = order.index("c" if "c" in order else "p")
    for k, e in enumerate(reductions):
        rtiles.append(1 if k < ch else (min(step, e) if k == ch else e))
    warps = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    return spec, KernelConfig(
        tile_sizes=tuple(tiles),
        reduction_tile_sizes=tuple(rtiles),
        mma=True,
        warp_grid=warps,
        tf32=dtype == "f32",
        stage_output=draw(st.booleans()),
    )
