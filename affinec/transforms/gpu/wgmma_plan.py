"""The plan of a Hopper kernel (`GemmKernel`): what `affinec-wgmma-gemm` makes of a
spec's matrix product or NHWC/RSCK convolution (`ConvGeometry`, `pixel_box`), the
shapes and options it takes (`SCHEDULES`, `TILE_M`, `TILE_N`, `BK`) and the reason it
refuses one (`route_refusal`). `wgmma_text` writes the kernel of a plan; the pass and
the tuner read the plan alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from affinec.base.spec import ConvSpec, MatmulSpec, Spec, epilogue_steps
from affinec.hardware.chips import chip

BK = 64
"""The K of one step: one 128-byte swizzled row of f16."""

WARPGROUP = 128

SCHEDULES = ("waited", "in-flight", "specialized", "cooperative")
TILE_M = (64, 128)
TILE_N = (16, 32, 64, 128, 256)
OPERAND_TYPES = ("f16", "bf16")
EPILOGUE_STEPS = ("scale", "bias", "residual", "relu", "relu6")
SM90A_SHARED = chip("sm_90a").max_shared_per_block
"""What a block may have of shared memory on sm_90a, where the plan's kernel runs."""


@dataclass(frozen=True)
class ConvGeometry:
    """An NHWC/RSCK convolution as the kernel sees it: the product of its
    output pixels (M) by its filters (K) over its taps x channels, each tap's rows of
    A one 4-D TMA box of the input (`box_h` x `box_w` pixels of one image x 64
    channels) at the tap's offset — out of the image (the padding) TMA fills zeros —
    and B a box of the filter's (1, 1, 64 channels, columns)."""

    n: int
    h: int
    w: int
    c: int
    k: int
    r: int
    s: int
    padding: tuple[int, int]
    dilation: tuple[int, int]
    box_h: int
    box_w: int
    stride: tuple[int, int] = (1, 1)
    """With a stride, the input is seen as (N, H / sh, sh, W / sw, sw x C): an input
    pixel's row and column split into a step of the stride and a phase within it,
    the column's phase merged with the channels. Each tap then reads one phase: a
    box of consecutive steps, as at stride 1 (`strided_input_shape`)."""

    @property
    def out_h(self) -> int:
        span = self.dilation[0] * (self.r - 1) + 1
        return (self.h + 2 * self.padding[0] - span) // self.stride[0] + 1

    @property
    def out_w(self) -> int:
        span = self.dilation[1] * (self.s - 1) + 1
        return (self.w + 2 * self.padding[1] - span) // self.stride[1] + 1

    @property
    def strided(self) -> bool:
        return self.stride != (1, 1)

    @property
    def strided_input_shape(self) -> tuple[int, ...]:
        """The input as the strided boxes see it: (N, H / sh, sh, W / sw, sw x C)."""
        sh, sw = self.stride
        return (self.n, self.h // sh, sh, self.w // sw, sw * self.c)

    def tap_offsets(self, r: int, t: int) -> tuple[int, int, int, int]:
        """Where tap (r, t) reads, relative to the block's first output pixel: the
        row's step and phase, the column's step and phase (phase 0, step = the
        offset at stride 1)."""
        (sh, sw), (ph, pw), (dh, dw) = self.stride, self.padding, self.dilation
        row, column = r * dh - ph, t * dw - pw
        return (row // sh, row % sh, column // sw, column % sw)

    @property
    def channel_steps(self) -> int:
        return math.ceil(self.c / BK)

    @property
    def blocks_h(self) -> int:
        return math.ceil(self.out_h / self.box_h)

    @property
    def blocks_w(self) -> int:
        return math.ceil(self.out_w / self.box_w)


def pixel_box(out_h: int, out_w: int, tile_m: int) -> tuple[int, int]:
    """The block's `box_h` x `box_w` output pixels (`tile_m` of them, `box_w` a power
    of 2) that compute the fewest pixels past the image's edge; of those the
    squarest (the fewest input pixels its taps read), then the wider."""
    best = None
    width = 1
    while width <= tile_m:
        height = tile_m // width
        computed = math.ceil(out_h / height) * height * math.ceil(out_w / width) * width
        key = (computed, height + width)
        if height <= 256 and width <= 256 and (best is None or key <= best[0]):
            best = (key, (height, width))
        width *= 2
    assert best is not None
    return best[1]


@dataclass(frozen=True)
class GemmKernel:
    """How one product becomes a Hopper kernel: `C = epilogue(A @ B)`, A m x k and
    B k x n of `dtype`, C of `out_dtype`, in `tile_m` x `tile_n` blocks with
    `stages` shared stages and a `schedule` of `SCHEDULES`."""

    m: int
    n: int
    k: int
    dtype: str = "f16"
    out_dtype: str = "f16"
    epilogue: tuple[str, ...] = ()
    tile_m: int = 128
    tile_n: int = 128
    stages: int = 4
    schedule: str = "in-flight"
    function: str = "matmul"
    names: tuple[str, str, str] = ("A", "B", "C")
    """The host function's names of A, B and C (the epilogue's are its steps')."""
    conv: ConvGeometry | None = None
    """A convolution's geometry: A is its input, B its filter, C its output (m, n
    and k are then its pixels, filters and taps x channels)."""
    splits: int = 1
    """Split-K: the channel steps cut into this many partial sums, each a layer of
    blocks (grid z) writing f32 partials to a workspace, added in a fixed order by
    a second kernel that applies the epilogue (1: no split)."""

    def problems(self, max_shared: int = SM90A_SHARED) -> list[str]:
        """What stops this plan, in words (empty: it builds), on a chip that gives a
        block at most `max_shared` bytes of shared memory."""
        why = []
        if self.dtype not in OPERAND_TYPES:
            why.append(f"wgmma multiplies f16 or bf16 here, not {self.dtype}")
        if self.out_dtype not in (*OPERAND_TYPES, "f32"):
            why.append(f"an output of f16, bf16 or f32, not {self.out_dtype}")
        if self.tile_m not in TILE_M:
            why.append(f"a tile of 64 or 128 rows, not {self.tile_m}")
        if self.tile_n not in TILE_N:
            why.append(f"a tile of 16, 32, 64, 128 or 256 columns, not {self.tile_n}")
        if self.schedule == "cooperative" and self.tile_m != 128:
            why.append(
                "the cooperative schedule's two consumers take 64 rows each: a tile "
                f"of 128 rows, not {self.tile_m}"
            )
        elif self.tile_m // self.parts * self.tile_n > 128 * 128:
            why.append(
                f"a {self.tile_m}x{self.tile_n} tile is more accumulators than one "
                "warpgroup holds without spilling (at most 128x128 or 64x256 a "
                "warpgroup: 128x256 takes the cooperative schedule)"
            )
        if self.schedule not in SCHEDULES:
            why.append(f"the schedule is one of {', '.join(SCHEDULES)}")
        if self.stages < 1 or (self.schedule != "waited" and self.stages < 2):
            why.append(
                f"stages={self.stages}: 1 at least, 2 with MMAs in flight (a stage "
                "is reloaded a step after it is read)"
            )
        rows = ((self.conv.c if self.conv else self.k, "k"), (self.n, "n"))
        for extent, what in rows:
            if extent % 8:
                why.append(
                    f"{what} = {extent}: TMA needs the rows of {'A' if what == 'k' else 'B'} "
                    "16 bytes apart (a multiple of 8 elements)"
                )
        for step in self.epilogue:
            if step not in EPILOGUE_STEPS:
                why.append(f"no epilogue step {step!r}")
        if self.splits < 1 or self.channel_steps % self.splits:
            why.append(
                f"splits={self.splits}: a divisor of the {self.channel_steps} steps "
                f"of {BK} channels"
            )
        if self.shared_bytes > max_shared:
            why.append(
                f"{self.shared_bytes} bytes of shared memory a block (the chip gives "
                f"{max_shared}): fewer stages or a smaller tile"
            )
        return why

    @property
    def channel_steps(self) -> int:
        """Steps of 64 channels (of K, for a product) a tap takes, unsplit."""
        return self.conv.channel_steps if self.conv else math.ceil(self.k / BK)

    @property
    def split_steps(self) -> int:
        """Steps of 64 channels a tap takes in one split."""
        return max(1, self.channel_steps // max(1, self.splits))

    @property
    def steps(self) -> int:
        """The steps of one block: taps x its split's channel steps."""
        taps = self.conv.r * self.conv.s if self.conv else 1
        return taps * self.split_steps

    @property
    def stages_in_flight(self) -> int:
        """The stages the pipeline can use: those asked, but no more than the steps
        of K (or 2, with MMAs in flight)."""
        least = 1 if self.schedule == "waited" else 2
        return min(self.stages, max(self.steps, least))

    @property
    def grid(self) -> tuple[int, int, int]:
        if self.conv:
            g = self.conv
            rows = g.n * g.blocks_h * g.blocks_w
            return (math.ceil(self.n / self.tile_n), rows, self.splits)
        return (
            math.ceil(self.n / self.tile_n),
            math.ceil(self.m / self.tile_m),
            self.splits,
        )

    @property
    def part_box(self) -> tuple[int, int, int, int]:
        """A consumer's pixels of a convolution's block box (height, width) and
        where the next consumer's start (rows, columns): the box cut across its
        rows, or (one row) across its columns."""
        c = self.conv
        assert c is not None
        if c.box_h % self.parts == 0:
            return (c.box_h // self.parts, c.box_w, c.box_h // self.parts, 0)
        return (c.box_h, c.box_w // self.parts, 0, c.box_w // self.parts)

    @property
    def parts(self) -> int:
        """Consumer warpgroups, each multiplying its rows of the tile (two with the
        cooperative schedule, 64 rows each)."""
        return 2 if self.schedule == "cooperative" else 1

    @property
    def threads(self) -> int:
        if self.schedule in ("specialized", "cooperative"):
            return (1 + self.parts) * WARPGROUP  # a loading warpgroup, consumers
        return WARPGROUP

    @property
    def shared_bytes(self) -> int:
        """The stages' tiles, the f32 output tile, the barriers (and alignment)."""
        stage = (self.tile_m * BK + BK * self.tile_n) * 2
        return self.stages * stage + self.tile_m * self.tile_n * 4 + 1024 + 16 * 8


def route_refusal(spec: Spec) -> str | None:
    """What `spec` lacks for the wgmma route, in words (None: it takes it): a matrix
    product, or an ungrouped NHWC/RSCK convolution (strided: an image the stride
    divides, and with a column stride a multiple of 64 channels), of f16 or bf16,
    whose rows TMA can address (channels and filters multiples of 8)."""
    if not isinstance(spec, MatmulSpec | ConvSpec):
        return f"a matrix product or a convolution, not an {spec.kind} product"
    why = []
    if spec.dtype not in OPERAND_TYPES:
        why.append(f"f16 or bf16 operands, not {spec.dtype}")
    if isinstance(spec, MatmulSpec):
        rows = ((spec.k, "k"), (spec.n, "n"))
    else:
        if (spec.layout, spec.filter_layout) != ("nhwc", "rsck"):
            why.append("an NHWC input and RSCK filters")
        sh, sw = spec.stride
        if spec.h % sh or spec.w % sw:
            why.append(
                f"an image the stride divides ({spec.h}x{spec.w} by {sh},{sw}: the "
                "strided boxes see the input as steps of the stride)"
            )
        if sw > 1 and spec.c % BK:
            why.append(
                f"c a multiple of {BK} with a column stride (a box of channels "
                f"within one phase of the column), not {spec.c}"
            )
        if spec.groups != 1:
            why.append("one group")
        rows = ((spec.c, "c"), (spec.k, "k"))
    for extent, what in rows:
        if extent % 8:
            why.append(
                f"{what} a multiple of 8 (TMA's rows 16 bytes apart), not {extent}"
            )
    return "; ".join(why) or None


def plan_of(
    spec: Spec,
    tile: tuple[int, int] = (128, 128),
    stages: int = 4,
    schedule: str = "in-flight",
    function: str = "matmul",
    names: tuple[str, str, str] = ("A", "B", "C"),
    splits: int = 1,
) -> GemmKernel:
    """The kernel of `spec` (which `route_refusal` takes) in `tile`s: a product's, or
    a convolution's with the block's pixels `pixel_box` picks."""
    conv = None
    if isinstance(spec, ConvSpec):
        box_h, box_w = pixel_box(spec.out_h, spec.out_w, tile[0])
        conv = ConvGeometry(spec.n, spec.h, spec.w, spec.c, spec.k, spec.r, spec.s,
                            spec.padding, spec.dilation, box_h, box_w,
                            spec.stride)  # fmt: skip
        m, n, k = spec.n * spec.out_h * spec.out_w, spec.k, spec.r * spec.s * spec.c
    else:
        assert isinstance(spec, MatmulSpec)
        m, n, k = spec.m, spec.n, spec.k
    return GemmKernel(m, n, k, spec.dtype, spec.dtype, epilogue_steps(spec.epilogue),
                      tile[0], tile[1], stages, schedule, function, names, conv,
                      splits)  # fmt: skip


__all__ = [
    "BK",
    "EPILOGUE_STEPS",
    "OPERAND_TYPES",
    "SCHEDULES",
    "TILE_M",
    "TILE_N",
    "WARPGROUP",
    "ConvGeometry",
    "GemmKernel",
    "pixel_box",
    "plan_of",
    "route_refusal",
]
