"""A matrix product as a Hopper kernel at the nvgpu level: TMA loads into swizzled
shared tiles, an mbarrier pipeline, warpgroup MMA (`wgmma`) and the epilogue fused in
the copy-out. `affinec-wgmma-gemm` writes the naive product of a spec this way; the
hand-written test bed `affinec.hopper_matmul` is the same kernel with an f32 output.

`GemmKernel` is the plan (shapes, element types, epilogue, tiles, stages, schedule)
and `gemm_module_text(plan)` the module, in MLIR's syntax: a host function taking the
arrays of the product (A m x k, B k x n, the epilogue's operands, C m x n) that makes
the two tensor maps and launches a grid of blocks, one `tile_m` x `tile_n` tile of C
a block:

    thread 0    init the stages' barriers                      gpu.barrier
    thread 0    for the first `stages` K steps (64 wide):
                  arrive.expect_tx, TMA A[tile rows, step], TMA B[step, tile cols]
    every step  all wait for the step's barrier (parity: the step's round), the
                warpgroup multiplies (`waited`: `waitGroup = 0`, done before going
                on; `in-flight`: `waitGroup = 1`, the previous step's MMAs are done),
                gpu.barrier (a stage is free), thread 0 loads the step `stages`
                ahead of the free one into it
    epilogue    the accumulators into a shared f32 tile, then the block copies the
                tile out, applying the epilogue (scale, bias, residual, ReLU) and
                the conversion to C's type, element by element

`specialized` makes a block two warpgroups: the first only loads (its thread 0 waits
for a stage to be handed back on the stage's `empty` barrier, then loads it), the
second only multiplies (MMAs in flight) and hands each stage back by arriving on its
`empty` barrier once the MMAs that read it have finished.

A convolution (`ConvGeometry`: NHWC input, RSCK filters) is the same
kernel over R x S x ceil(C / 64) steps: a block's M rows are `box_h` x `box_w`
output pixels of one image, and a step's A tile is the 4-D box (1, box_h, box_w,
64) of the input at the tap's offset (`oh0 + r * dh - ph`, `ow0 + s * dw - pw`),
its B tile the box (1, 1, 64, columns) of the filter at (r, s): the padding, the
image's edges and the channels past C are TMA's zero fill. With a stride the input
is seen as (N, H / sh, sh, W / sw, sw x C) and a tap reads one phase of it, a 5-D
box of consecutive steps (the same bytes: a reshape, no element strides).

The edges are TMA's: a box past the end of A or B is filled with zeros (and still
counts its whole size on the barrier), so m, n and k need not be multiples of the
tiles; only the copy-out is guarded. TMA needs A's and B's rows 16 bytes apart (k
and n multiples of 8 for 2-byte elements). B's tile is read as `wgmma`'s transposed B
(row-major k x n), swizzled by its row (a 64-wide slab of a wider tile is one box);
A's by 128 bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr

from affinec.context import make_context
from affinec.diagnostics import parse_module
from affinec.dialects import gpu
from affinec.dialects.affinec import LAUNCH, KernelArgument, LaunchRecord
from affinec.spec import ConvSpec, MatmulSpec, Spec, epilogue_steps

BK = 64
"""The K of one step: one 128-byte swizzled row of f16."""

WARPGROUP = 128

SCHEDULES = ("waited", "in-flight", "specialized", "cooperative")
TILE_M = (64, 128)
TILE_N = (16, 32, 64, 128, 256)
OPERAND_TYPES = ("f16", "bf16")
EPILOGUE_STEPS = ("scale", "bias", "residual", "relu", "relu6")

_SWIZZLE = {128: "swizzle_128b", 64: "swizzle_64b", 32: "swizzle_32b"}


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

    def problems(self, max_shared: int = 227 * 1024) -> list[str]:
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


def gemm_module_text(g: GemmKernel) -> str:
    """The module of plan `g` (MLIR's syntax); a ValueError naming what stops it."""
    why = g.problems()
    if why:
        raise ValueError(
            f"a {g.m}x{g.n}x{g.k} product in {g.tile_m}x{g.tile_n} tiles: "
            + "; ".join(why)
        )
    tm, tn, elt, stages = g.tile_m, g.tile_n, g.dtype, g.stages
    rows = tm // g.parts  # a consumer warpgroup's rows of the tile
    bn = min(tn, 64)  # B's TMA box: one swizzle row wide; a wider tile is slabs of it
    steps = g.steps
    bytes_per_step = (tm * BK + BK * tn) * 2
    a_name, b_name, c_name = g.names
    conv = g.conv
    if conv:
        box_a = _input_box(g)
        box_b = f"memref<1x1x{BK}x{bn}x{elt}, 3>"
    else:
        box_a = f"memref<{rows}x{BK}x{elt}, 3>"
        box_b = f"memref<{BK}x{bn}x{elt}, 3>"
    types = f"""!barriers = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = {stages}>
!mapA = !nvgpu.tensormap.descriptor<tensor = {box_a}, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!mapB = !nvgpu.tensormap.descriptor<tensor = {box_b}, swizzle = {_SWIZZLE[bn * 2]}, l2promo = none, oob = zero, interleave = none>
!descA = !nvgpu.warpgroup.descriptor<tensor = memref<{rows}x{BK}x{elt}, 3>>
!descB = !nvgpu.warpgroup.descriptor<tensor = memref<{BK}x{tn}x{elt}, 3>>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<{rows}x{tn}xf32>>
"""
    tile_a, tile_b = f"memref<{rows}x{BK}x{elt}, 3>", f"memref<{BK}x{tn}x{elt}, 3>"
    buffers = ", ".join(
        ", ".join(f"{_part(f'%sa{s}', g, h)} : {tile_a}" for h in range(g.parts))
        + f", %sb{s} : {tile_b}"
        for s in range(stages)
    )
    out_tiles = ", ".join(
        f"{_part('%tile', g, h, '')} : memref<{rows}x{tn}xf32, 3>"
        for h in range(g.parts)
    )
    body: list[str] = []

    def load(step: int, indent: str) -> None:
        s = step % stages
        body.append(
            f"{indent}nvgpu.mbarrier.arrive.expect_tx %bar[%c{s}], %bytes : !barriers"
        )
        if conv:
            body.append(_conv_loads(g, step, s, bn, indent))
            return
        body.extend(
            f"{indent}nvgpu.tma.async.load %mapA[%k{step}, {_part('%row0', g, h, '_p')}"
            f"], %bar[%c{s}] to {_part(f'%sa{s}', g, h)} : !mapA, !barriers -> "
            f"{tile_a}"
            for h in range(g.parts)
        )
        body.append(_b_loads(step, s, tn, bn, elt, indent))

    def multiply(step: int, acc: str, indent: str, wait: bool, h: int = 0) -> str:
        s = step % stages
        parity = "%true" if (step // stages) % 2 else "%false"
        da, db, out = (_part(f"%{x}{step}", g, h, "_p") for x in ("da", "db", "acc"))
        body.append(f"""{indent}nvgpu.mbarrier.try_wait.parity %bar[%c{s}], {parity}, %ticks : !barriers
{indent}{da} = nvgpu.warpgroup.generate.descriptor {_part(f"%sa{s}", g, h)}, %mapA : {tile_a}, !mapA -> !descA
{indent}{db} = nvgpu.warpgroup.generate.descriptor %sb{s}, %mapB : {tile_b}, !mapB -> !descB
{indent}{out} = nvgpu.warpgroup.mma {da}, {db}, {acc} {{transposeB{", waitGroup = 0 : i64" if wait else ""}}} : !descA, !descB, !acc -> !acc""")
        return out

    body.append("      scf.if %first {")
    body += [
        f"        nvgpu.mbarrier.init %bar[%c{s}], %c1 : !barriers"
        for s in range(stages)
    ]
    if g.schedule in ("specialized", "cooperative"):
        arrivals = "%c1" if g.parts == 1 else f"%c{g.parts}"  # each consumer's
        body += [
            f"        nvgpu.mbarrier.init %empty[%c{s}], {arrivals} : !barriers"
            for s in range(stages)
        ]
    body.append("      }")
    body.append("      gpu.barrier  // the barriers' init, visible to every thread")
    if g.schedule == "cooperative":
        _cooperative(g, body, load, multiply)
    elif g.schedule == "specialized":
        body.append("""      %warpgroup = arith.divui %tid, %c128 : index
      %producer = arith.cmpi eq, %warpgroup, %c0 : index
      %consumer_leader = arith.cmpi eq, %tid, %c128 : index
      scf.if %producer {
        scf.if %first {""")
        for step in range(steps):
            s, use = step % stages, step // stages
            if use:  # the stage's previous use handed back: phase `use - 1` of %empty
                parity = "%true" if (use - 1) % 2 else "%false"
                body.append(
                    f"          nvgpu.mbarrier.try_wait.parity %empty[%c{s}], "
                    f"{parity}, %ticks : !barriers"
                )
            load(step, "          ")
        body.append("        }\n      } else {")
        acc = "%zero"
        for step in range(steps):
            acc = multiply(step, acc, "        ", wait=False)
            if step >= 1 and step - 1 + stages < steps:  # the previous step's are done
                body.append(f"""        scf.if %consumer_leader {{
          %handed{step} = nvgpu.mbarrier.arrive %empty[%c{(step - 1) % stages}] : !barriers -> !nvgpu.mbarrier.token
        }}""")
        body.append(f"""        nvgpu.warpgroup.mma.store {acc}, %tile : !acc to memref<{tm}x{tn}xf32, 3>
      }}""")
    else:
        body.append("      scf.if %first {")
        for step in range(min(stages, steps)):
            load(step, "        ")
        body.append("      }")
        lag = (
            0 if g.schedule == "waited" else 1
        )  # the step whose stage frees after this
        acc = "%zero"
        for step in range(steps):
            acc = multiply(step, acc, "      ", wait=lag == 0)
            free = (step - lag) % stages
            body.append(
                f"      gpu.barrier  // stage {free} read: free for the next load"
            )
            if step >= lag and step - lag + stages < steps:
                body.append("      scf.if %first {")
                load(step - lag + stages, "        ")
                body.append("      }")
        body.append(
            f"      nvgpu.warpgroup.mma.store {acc}, %tile : !acc to memref<{tm}x{tn}xf32, 3>"
        )
    constants = "\n".join(
        f"      %c{s} = arith.constant {s} : index"
        for s in range(max(stages, 3))
        if s not in (0, 1)
    )
    slab_columns = "".join(
        f"\n      %slab{j} = arith.constant {j * bn} : index"
        f"\n      %col0_{j} = arith.addi %col0, %slab{j} : index"
        for j in range(1, tn // bn)
    )
    empty = (
        "\n      %empty = nvgpu.mbarrier.create -> !barriers"
        if g.schedule in ("specialized", "cooperative")
        else ""
    )
    part_rows = "".join(
        f"\n      %part_row{h} = arith.constant {h * rows} : index"
        f"\n      %row0_p{h} = arith.addi %row0, %part_row{h} : index"
        for h in range(1, g.parts)
        if not conv
    )
    block_position = ""
    if conv:
        offsets = ""
        block_position = "\n" + _conv_prologue(g, stages, bn, elt)
    elif g.splits == 1:
        offsets = "\n".join(
            f"      %k{step} = arith.constant {step * BK} : index"
            for step in range(steps)
        )
    else:  # the block's split starts `split_steps` steps further along K
        offsets = "\n".join(
            [_split_base(g)]
            + [
                f"      %k_local{step} = arith.constant {step * BK} : index\n"
                f"      %k{step} = arith.addi %kbase, %k_local{step} : index"
                for step in range(steps)
            ]
        )
    operands = _epilogue_operands(g)
    a_type, b_type, c_type = _host_types(g)
    split = g.splits > 1
    workspace = [("partial", _partial_type(g))] if split else []
    host_args = ", ".join(
        [
            f"%{a_name}: {a_type}",
            f"%{b_name}: {b_type}",
            *(f"%{name}: {t}" for name, t in operands),
            f"%{c_name}: {c_type}",
            *(f"%{name}: {t} {{affinec.workspace}}" for name, t in workspace),
        ]
    )
    # split, the MMA kernel writes the partial sums; the sum kernel, C
    written = workspace or [*operands, (c_name, c_type)]
    kernel_args = ", ".join(
        ["%mapA: !mapA", "%mapB: !mapB"] + [f"%{name}: {t}" for name, t in written]
    )
    launch_args = ", ".join(
        ["%mapA : !mapA", "%mapB : !mapB"] + [f"%{name} : {t}" for name, t in written]
    )
    sum_launch = sum_kernel = ""
    if split:
        sum_args = ", ".join(
            f"%{name} : {t}" for name, t in [*workspace, *operands, (c_name, c_type)]
        )
        sum_blocks = math.ceil(g.m * g.n / SUM_THREADS)
        sum_launch = (
            f"\n    %sum_blocks = arith.constant {sum_blocks} : index"
            f"\n    %sum_threads = arith.constant {SUM_THREADS} : index"
            f"\n    gpu.launch_func @kernels::@{g.function}_sum blocks in (%sum_blocks, "
            f"%c1, %c1) threads in (%sum_threads, %c1, %c1) args({sum_args})"
        )
        sum_kernel = "\n" + _sum_kernel(g, operands, c_type)
    a_value, a_view = f"%{a_name}", a_type
    if conv:
        part_h, part_w, _, _ = g.part_box
        boxes = (
            f"    %cbh = arith.constant {part_h} : index\n"
            f"    %cbw = arith.constant {part_w} : index\n"
        )
        box_a_sizes, box_b_sizes = "%c1, %cbh, %cbw, %ck", "%c1, %c1, %ck, %cbn"
        if conv.strided:
            shape = conv.strided_input_shape
            a_view = f"memref<{'x'.join(map(str, shape))}x{elt}>"
            strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
            boxes += (
                f"    %strided = memref.reinterpret_cast %{a_name} to offset: [0], "
                f"sizes: {list(shape)}, strides: {strides} : {a_type} to {a_view}\n"
            )
            a_value, box_a_sizes = "%strided", "%c1, %cbh, %c1, %cbw, %ck"
    else:
        boxes, box_a_sizes, box_b_sizes = "", "%ctm, %ck", "%ck, %cbn"
    grid = g.grid
    return f"""{types}
module attributes {{gpu.container_module}} {{
  func.func @{g.function}({host_args}) {{
    %c1 = arith.constant 1 : index
    %ctm = arith.constant {rows} : index
    %cbn = arith.constant {bn} : index
    %ck = arith.constant {BK} : index
    %blocks_x = arith.constant {grid[0]} : index
    %blocks_y = arith.constant {grid[1]} : index
    %blocks_z = arith.constant {grid[2]} : index
    %threads = arith.constant {g.threads} : index
{boxes}    %ua = memref.cast {a_value} : {a_view} to memref<*x{elt}>
    %ub = memref.cast %{b_name} : {b_type} to memref<*x{elt}>
    %mapA = nvgpu.tma.create.descriptor %ua box[{box_a_sizes}] : memref<*x{elt}> -> !mapA
    %mapB = nvgpu.tma.create.descriptor %ub box[{box_b_sizes}] : memref<*x{elt}> -> !mapB
    gpu.launch_func @kernels::@{g.function}_kernel blocks in (%blocks_x, %blocks_y, %blocks_z) threads in (%threads, %c1, %c1) args({launch_args}){sum_launch}
    return
  }}
  gpu.module @kernels {{
    gpu.func @{g.function}_kernel({kernel_args}) workgroup({buffers}, {out_tiles}) kernel {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
{constants}
{offsets}
      %tile_m = arith.constant {tm} : index
      %tile_n = arith.constant {tn} : index
      %tile_size = arith.constant {tm * tn} : index
      %part_size = arith.constant {rows * tn} : index
      %threads = arith.constant {g.threads} : index
      %c128 = arith.constant {WARPGROUP} : index
      %bytes = arith.constant {bytes_per_step} : index
      %ticks = arith.constant 10000000 : index
      %false = arith.constant false
      %true = arith.constant true
      %tid = gpu.thread_id x
      %bx = gpu.block_id x
      %by = gpu.block_id y
{"" if conv else "      %row0 = arith.muli %by, %tile_m : index" + chr(10)}      %col0 = arith.muli %bx, %tile_n : index{slab_columns}{part_rows}{block_position}
      %first = arith.cmpi eq, %tid, %c0 : index
      %bar = nvgpu.mbarrier.create -> !barriers{empty}
      %zero = nvgpu.warpgroup.mma.init.accumulator -> !acc
{chr(10).join(body)}
      gpu.barrier  // the tile stored
{_copy_out(g) if g.parts == 1 else chr(10).join(_copy_out(g, h) for h in range(g.parts))}
      gpu.return
    }}{sum_kernel}
  }}
}}
"""


def _cooperative(g: GemmKernel, body: list[str], load, multiply) -> None:
    """The cooperative schedule: warpgroup 0's thread 0 loads every step, into a
    stage once both consumers have handed it back; warpgroups 1 and 2 multiply
    their own rows of the tile (MMAs in flight) and each hands back the previous
    step's stage (the stage's `empty` barrier completes with both arrivals). The
    consumers' code is one branch each: a branch names its own tiles."""
    steps, stages, rows, tn = g.steps, g.stages, g.tile_m // g.parts, g.tile_n
    body.append("""      %warpgroup = arith.divui %tid, %c128 : index
      %producer = arith.cmpi eq, %warpgroup, %c0 : index
      %lane_of_group = arith.remui %tid, %c128 : index
      %group_leader = arith.cmpi eq, %lane_of_group, %c0 : index
      scf.if %producer {
        scf.if %first {""")
    for step in range(steps):
        s, use = step % stages, step // stages
        if use:  # both consumers handed the stage back: phase `use - 1` of %empty
            parity = "%true" if (use - 1) % 2 else "%false"
            body.append(
                f"          nvgpu.mbarrier.try_wait.parity %empty[%c{s}], {parity}, "
                "%ticks : !barriers"
            )
        load(step, "          ")
    body.append("        }\n      }")
    for h in range(g.parts):
        body.append(f"""      %consumer{h} = arith.cmpi eq, %warpgroup, %c{h + 1} : index
      scf.if %consumer{h} {{""")
        acc = "%zero"
        for step in range(steps):
            acc = multiply(step, acc, "        ", wait=False, h=h)
            if step >= 1 and step - 1 + stages < steps:  # the previous step's are done
                body.append(f"""        scf.if %group_leader {{
          %handed{step}_p{h} = nvgpu.mbarrier.arrive %empty[%c{(step - 1) % stages}] : !barriers -> !nvgpu.mbarrier.token
        }}""")
        body.append(f"""        nvgpu.warpgroup.mma.store {acc}, {_part("%tile", g, h, "")} : !acc to memref<{rows}x{tn}xf32, 3>
      }}""")


def _epilogue_operands(g: GemmKernel) -> list[tuple[str, str]]:
    """The epilogue's arrays, in the spec's order: scale and bias one per column of
    C, the residual shaped as C; all of the operands' type."""
    output = "x".join(map(str, _output_shape(g)))
    return [
        (
            step,
            f"memref<{output}x{g.dtype}>"
            if step == "residual"
            else f"memref<{g.n}x{g.dtype}>",
        )
        for step in g.epilogue
        if step in ("scale", "bias", "residual")
    ]


def _output_shape(g: GemmKernel) -> tuple[int, ...]:
    if g.conv:
        return (g.conv.n, g.conv.out_h, g.conv.out_w, g.conv.k)
    return (g.m, g.n)


def _host_types(g: GemmKernel) -> tuple[str, str, str]:
    """The types of A, B and C in the host function (a convolution's input, filter
    and output)."""
    e = g.dtype
    output = "x".join(map(str, _output_shape(g)))
    if g.conv:
        c = g.conv
        return (
            f"memref<{c.n}x{c.h}x{c.w}x{c.c}x{e}>",
            f"memref<{c.r}x{c.s}x{c.c}x{c.k}x{e}>",
            f"memref<{output}x{g.out_dtype}>",
        )
    return (
        f"memref<{g.m}x{g.k}x{e}>",
        f"memref<{g.k}x{g.n}x{e}>",
        f"memref<{output}x{g.out_dtype}>",
    )


def _split_base(g: GemmKernel) -> str:
    """`%kbase`: the first channel of the block's split (grid z), 0 unsplit."""
    if g.splits == 1:
        return "      %kbase = arith.constant 0 : index"
    return (
        "      %split = gpu.block_id z\n"
        f"      %split_k = arith.constant {g.split_steps * BK} : index\n"
        "      %kbase = arith.muli %split, %split_k : index"
    )


def _conv_prologue(g: GemmKernel, stages: int, bn: int, elt: str) -> str:
    """A convolution's kernel prologue: the block's image and first output pixel,
    the input coordinates of each filter tap, the channel offsets, and the 4-D
    views of the stages' tiles the boxes land in (the same bytes as the 2-D tiles
    wgmma reads: a box's pixels are the tile's rows)."""
    c = g.conv
    assert c is not None
    per_image = c.blocks_h * c.blocks_w
    lines = [
        _split_base(g),
        f"      %per_image = arith.constant {per_image} : index",
        f"      %blocks_w = arith.constant {c.blocks_w} : index",
        f"      %box_h = arith.constant {c.box_h} : index",
        f"      %box_w = arith.constant {c.box_w} : index",
        "      %image = arith.divui %by, %per_image : index",
        "      %in_image = arith.remui %by, %per_image : index",
        "      %block_h = arith.divui %in_image, %blocks_w : index",
        "      %block_w = arith.remui %in_image, %blocks_w : index",
        "      %oh0 = arith.muli %block_h, %box_h : index",
        "      %ow0 = arith.muli %block_w, %box_w : index",
    ]
    for r in range(c.r):
        step, phase, _, _ = c.tap_offsets(r, 0)
        lines += [
            f"      %dh{r} = arith.constant {step} : index",
            f"      %ih{r} = arith.addi %oh0, %dh{r} : index",
            f"      %tap_r{r} = arith.constant {r} : index",
            f"      %phase_h{r} = arith.constant {phase} : index",
        ]
    for t in range(c.s):
        _, _, step, phase = c.tap_offsets(0, t)
        lines += [
            f"      %dw{t} = arith.constant {step} : index",
            f"      %iw{t} = arith.addi %ow0, %dw{t} : index",
            f"      %tap_s{t} = arith.constant {t} : index",
        ]
        if c.strided:  # the column's phase picks its channels in the last dimension
            lines += [
                f"      %ch_local{t}_{j} = arith.constant {phase * c.c + j * BK} : "
                f"index\n      %ch{t}_{j} = arith.addi %kbase, %ch_local{t}_{j} : index"
                for j in range(g.split_steps)
            ]
    lines += [
        f"      %ch_local{j} = arith.constant {j * BK} : index\n"
        f"      %ch{j} = arith.addi %kbase, %ch_local{j} : index"
        for j in range(g.split_steps)
    ]
    tile_a = f"memref<{g.tile_m // g.parts}x{BK}x{elt}, 3>"
    view_a = _input_box(g)
    part_h, part_w, shift_h, shift_w = g.part_box
    box_sizes = ([1, part_h, 1, part_w, BK] if c.strided
                 else [1, part_h, part_w, BK])  # fmt: skip
    box_strides = [math.prod(box_sizes[d + 1 :]) for d in range(len(box_sizes))]
    tile_b = f"memref<{BK}x{g.tile_n}x{elt}, 3>"
    for h in range(1, g.parts):  # a consumer's part of the box, at its pixels
        lines += [
            f"      %shift_h{h} = arith.constant {h * shift_h} : index",
            f"      %shift_w{h} = arith.constant {h * shift_w} : index",
        ]
        lines += [
            f"      %ih{r}_p{h} = arith.addi %ih{r}, %shift_h{h} : index"
            for r in range(c.r)
        ]
        lines += [
            f"      %iw{t}_p{h} = arith.addi %iw{t}, %shift_w{h} : index"
            for t in range(c.s)
        ]
    for st in range(stages):
        for h in range(g.parts):
            lines.append(
                f"      {_part(f'%va{st}', g, h)} = memref.reinterpret_cast "
                f"{_part(f'%sa{st}', g, h)} to offset: [0], sizes: {box_sizes}, "
                f"strides: {box_strides} : {tile_a} to {view_a}"
            )
        for j in range(g.tile_n // bn):
            at = j * BK * bn
            layout = f"strided<[{BK * bn}, {BK * bn}, {bn}, 1], offset: {at}>"
            lines.append(
                f"      %vb{st}_{j} = memref.reinterpret_cast %sb{st} to offset: "
                f"[{at}], sizes: [1, 1, {BK}, {bn}], strides: [{BK * bn}, {BK * bn}, "
                f"{bn}, 1] : {tile_b} to memref<1x1x{BK}x{bn}x{elt}, {layout}, 3>"
            )
    return "\n".join(lines)


def _input_box(g: GemmKernel) -> str:
    """The shared view a tap's box of the input lands in: (1, box_h, box_w, 64), or
    strided (1, box_h, 1, box_w, 64): one phase of the row (a consumer's part of
    the box with the cooperative schedule)."""
    assert g.conv is not None
    h, w, _, _ = g.part_box
    if g.conv.strided:
        return f"memref<1x{h}x1x{w}x{BK}x{g.dtype}, 3>"
    return f"memref<1x{h}x{w}x{BK}x{g.dtype}, 3>"


def _part(name: str, g: GemmKernel, h: int, mark: str = "_") -> str:
    """`name` of consumer `h`'s own copy (`%sa0_1`; the name alone with one
    consumer, and for the first's coordinates)."""
    if g.parts == 1 or (mark == "_p" and h == 0):
        return name
    return f"{name}{mark}{h}"


def _conv_loads(g: GemmKernel, step: int, stage: int, bn: int, indent: str) -> str:
    """A convolution's TMA loads for a step (tap `r`, `s`, channels `j`): the input's
    box of the block's pixels shifted by the tap, and the filter's box of the tap's
    channels x the block's columns (slab by slab)."""
    c = g.conv
    assert c is not None
    elt = g.dtype
    tap, j = divmod(step, g.split_steps)
    r, t = divmod(tap, c.s)
    view_a = _input_box(g)
    lines = []
    for h in range(g.parts):
        ih, iw = _part(f"%ih{r}", g, h, "_p"), _part(f"%iw{t}", g, h, "_p")
        at = (
            f"%ch{t}_{j}, {iw}, %phase_h{r}, {ih}, %image"
            if c.strided
            else f"%ch{j}, {iw}, {ih}, %image"
        )
        lines.append(
            f"{indent}nvgpu.tma.async.load %mapA[{at}], %bar[%c{stage}] to "
            f"{_part(f'%va{stage}', g, h)} : !mapA, !barriers -> {view_a}"
        )
    for slab in range(g.tile_n // bn):
        at = slab * BK * bn
        layout = f"strided<[{BK * bn}, {BK * bn}, {bn}, 1], offset: {at}>"
        column = "%col0" if slab == 0 else f"%col0_{slab}"
        lines.append(
            f"{indent}nvgpu.tma.async.load %mapB[{column}, %ch{j}, %tap_s{t}, "
            f"%tap_r{r}], %bar[%c{stage}] to %vb{stage}_{slab} : !mapB, !barriers -> "
            f"memref<1x1x{BK}x{bn}x{elt}, {layout}, 3>"
        )
    return "\n".join(lines)


def _copy_out(g: GemmKernel, part: int | None = None) -> str:
    """The block's tile out of shared memory into C, element by element, through the
    epilogue; rows and columns past C's edge skipped. With consumer warpgroups of
    their own tiles (`part`: the cooperative schedule), the `part`-th one's rows,
    its values' names suffixed."""
    rows = g.tile_m // g.parts
    tile = "%tile" if part is None else f"%tile{part}"
    lines = [
        f"      scf.for %e = %tid to %{'tile' if part is None else 'part'}_size step "
        "%threads {",
        "        %lr = arith.divui %e, %tile_n : index",
        "        %c = arith.remui %e, %tile_n : index",
        "        %gc = arith.addi %col0, %c : index",
    ]
    if part:
        lines.append(f"        %first_row = arith.constant {part * rows} : index")
        lines.append("        %r = arith.addi %lr, %first_row : index")
    else:
        lines[1] = "        %r = arith.divui %e, %tile_n : index"
    indent = "        "
    conv = g.conv
    if conv:
        # the tile's row is a pixel of the block's box_h x box_w
        lines += [
            "        %i = arith.divui %r, %box_w : index",
            "        %j = arith.remui %r, %box_w : index",
            "        %oh = arith.addi %oh0, %i : index",
            "        %ow = arith.addi %ow0, %j : index",
            f"        %out_h = arith.constant {conv.out_h} : index",
            f"        %out_w = arith.constant {conv.out_w} : index",
            f"        %n = arith.constant {g.n} : index",
            "        %in_h = arith.cmpi ult, %oh, %out_h : index",
            "        %in_w = arith.cmpi ult, %ow, %out_w : index",
            "        %in_n = arith.cmpi ult, %gc, %n : index",
            "        %in_hw = arith.andi %in_h, %in_w : i1",
            "        %inside = arith.andi %in_hw, %in_n : i1",
            "        scf.if %inside {",
        ]
        indent = "          "
        at = "%image, %oh, %ow, %gc"
        guarded = True
    else:
        lines.append("        %gr = arith.addi %row0, %r : index")
        at = "%gr, %gc"
        guarded = bool(g.m % g.tile_m or g.n % g.tile_n)
    if guarded and not conv:
        lines += [
            f"        %m = arith.constant {g.m} : index",
            f"        %n = arith.constant {g.n} : index",
            "        %in_m = arith.cmpi ult, %gr, %m : index",
            "        %in_n = arith.cmpi ult, %gc, %n : index",
            "        %inside = arith.andi %in_m, %in_n : i1",
            "        scf.if %inside {",
        ]
        indent = "          "
    local = "%r" if not part else "%lr"
    lines.append(
        f"{indent}%v = memref.load {tile}[{local}, %c] : "
        f"memref<{rows}x{g.tile_n}xf32, 3>"
    )
    if g.splits > 1:  # the split's partial sum, as it is: the sum kernel ends it
        if conv:
            lines += [
                f"{indent}%pixels = arith.constant {conv.out_h * conv.out_w} : index",
                f"{indent}%image_row = arith.muli %image, %pixels : index",
                f"{indent}%row_of_oh = arith.muli %oh, %out_w : index",
                f"{indent}%gm0 = arith.addi %image_row, %row_of_oh : index",
                f"{indent}%gm = arith.addi %gm0, %ow : index",
            ]
        gm = "%gm" if conv else "%gr"
        lines.append(
            f"{indent}memref.store %v, %partial[%split, {gm}, %gc] : {_partial_type(g)}"
        )
    else:
        lines += _epilogue_lines(g, "%v", at, indent)
    if guarded:
        lines.append("        }")
    lines.append("      }")
    text = "\n".join(lines)
    if part is None:
        return text
    # the loop's own values, renamed per part (the loops are siblings)
    defined = set(re.findall(r"(%[a-z_0-9]+) = ", text)) | {"%e"}
    return re.sub(
        r"%[a-z_0-9]+\b",
        lambda m: f"{m.group(0)}_p{part}" if m.group(0) in defined else m.group(0),
        text,
    )


def _epilogue_lines(g: GemmKernel, value: str, at: str, indent: str) -> list[str]:
    """The epilogue of the f32 `value` of C's element at `at` (its column `%gc`),
    converted and stored."""
    c_name, out = g.names[2], g.out_dtype
    output = f"memref<{'x'.join(map(str, _output_shape(g)))}x{out}>"
    lines = []
    for step in g.epilogue:
        if step in ("scale", "bias", "residual"):
            t, where = (
                (output.replace(f"x{out}>", f"x{g.dtype}>"), at)
                if step == "residual"
                else (f"memref<{g.n}x{g.dtype}>", "%gc")
            )
            lines += [
                f"{indent}%{step}_v = memref.load %{step}[{where}] : {t}",
                f"{indent}%{step}_f = arith.extf %{step}_v : {g.dtype} to f32",
                f"{indent}%{step}_r = arith.{'mulf' if step == 'scale' else 'addf'} "
                f"{value}, %{step}_f : f32",
            ]
            value = f"%{step}_r"
        else:
            lines += [
                f"{indent}%zero_f = arith.constant 0.000000e+00 : f32",
                f"{indent}%relu = arith.maximumf {value}, %zero_f : f32",
            ]
            value = "%relu"
            if step == "relu6":
                lines += [
                    f"{indent}%six = arith.constant 6.000000e+00 : f32",
                    f"{indent}%relu6 = arith.minimumf {value}, %six : f32",
                ]
                value = "%relu6"
    if out != "f32":
        lines.append(f"{indent}%o = arith.truncf {value} : f32 to {out}")
        value = "%o"
    lines.append(f"{indent}memref.store {value}, %{c_name}[{at}] : {output}")
    return lines


def _partial_type(g: GemmKernel) -> str:
    """The workspace of a split: each split's f32 sums of C's rows x columns."""
    return f"memref<{g.splits}x{g.m}x{g.n}xf32>"


SUM_THREADS = 256


def _sum_kernel(g: GemmKernel, operands: list[tuple[str, str]], c_type: str) -> str:
    """The second kernel of a split: each thread adds one element's partial sums in
    the splits' order (deterministic), then the epilogue."""
    c = g.conv
    args = ", ".join(
        [f"%partial: {_partial_type(g)}"]
        + [f"%{name}: {t}" for name, t in operands]
        + [f"%{g.names[2]}: {c_type}"]
    )
    lines = [
        f"    gpu.func @{g.function}_sum({args}) kernel {{",
        "      %tid = gpu.thread_id x",
        "      %bx = gpu.block_id x",
        f"      %threads = arith.constant {SUM_THREADS} : index",
        "      %first = arith.muli %bx, %threads : index",
        "      %e = arith.addi %first, %tid : index",
        f"      %total = arith.constant {g.m * g.n} : index",
        f"      %columns = arith.constant {g.n} : index",
        "      %inside = arith.cmpi ult, %e, %total : index",
        "      scf.if %inside {",
        "        %gm = arith.divui %e, %columns : index",
        "        %gc = arith.remui %e, %columns : index",
    ]
    value = None
    for z in range(g.splits):
        lines += [
            f"        %z{z} = arith.constant {z} : index",
            f"        %p{z} = memref.load %partial[%z{z}, %gm, %gc] : "
            f"{_partial_type(g)}",
        ]
        if value is None:
            value = f"%p{z}"
        else:
            lines.append(f"        %s{z} = arith.addf {value}, %p{z} : f32")
            value = f"%s{z}"
    at = "%gm, %gc"
    if c:
        lines += [
            f"        %pixels = arith.constant {c.out_h * c.out_w} : index",
            f"        %out_w = arith.constant {c.out_w} : index",
            "        %image = arith.divui %gm, %pixels : index",
            "        %pixel = arith.remui %gm, %pixels : index",
            "        %oh = arith.divui %pixel, %out_w : index",
            "        %ow = arith.remui %pixel, %out_w : index",
        ]
        at = "%image, %oh, %ow, %gc"
    assert value is not None
    lines += _epilogue_lines(g, value, at, "        ")
    lines += ["      }", "      gpu.return", "    }"]
    return "\n".join(lines)


def _b_loads(step: int, stage: int, tn: int, bn: int, elt: str, indent: str) -> str:
    """The TMA loads of B's tile for a step: one box, or (`tn` wider than a swizzle
    row) one box a slab, into `memref.reinterpret_cast` views of the tile's buffer
    at the slabs (64 x `bn` elements each, one after the other)."""
    lines = []
    for j in range(tn // bn):
        target = f"%sb{stage}"
        t = f"memref<{BK}x{tn}x{elt}, 3>"
        if tn > bn:
            at = j * BK * bn
            view = f"memref<{BK}x{bn}x{elt}, strided<[{bn}, 1], offset: {at}>, 3>"
            lines.append(
                f"{indent}%sb{stage}_{step}_{j} = memref.reinterpret_cast %sb{stage} "
                f"to offset: [{at}], sizes: [{BK}, {bn}], strides: [{bn}, 1] : {t} "
                f"to {view}"
            )
            target, t = f"%sb{stage}_{step}_{j}", view
        column = "%col0" if j == 0 else f"%col0_{j}"
        lines.append(
            f"{indent}nvgpu.tma.async.load %mapB[{column}, %k{step}], %bar[%c{stage}] "
            f"to {target} : !mapB, !barriers -> {t}"
        )
    return "\n".join(lines)


def replace_with_kernel(module: ModuleOp, fn: func.FuncOp, plan: GemmKernel) -> None:
    """`fn` replaced by the host function and `gpu.module` of `plan`, each kernel
    carrying its launch record (its tensor maps named after the arrays they map;
    with a split, the MMA kernel, then the one adding the partial sums)."""
    written = parse_module(make_context(), gemm_module_text(plan))
    host, kernels = list(written.body.block.ops)
    assert isinstance(host, func.FuncOp) and isinstance(kernels, gpu.ModuleOp)
    launches = [o for o in host.walk() if isinstance(o, gpu.LaunchFuncOp)]
    host_names = [a.name_hint or "" for a in host.body.block.args]
    maps = {"mapA": host_names[0], "mapB": host_names[1]}
    for kernel, launch in zip(kernels.body.block.ops, launches, strict=True):
        assert isinstance(kernel, gpu.FuncOp)
        assert launch.kernel_name == kernel.sym_name.data
        parameters = kernel.body.block.args[: len(kernel.function_type.inputs)]
        arguments = tuple(
            KernelArgument(maps.get(a.name_hint or "", a.name_hint or ""), a.type)
            for a in parameters
        )
        record = LaunchRecord(
            kernel=kernel.sym_name.data,
            host=host.sym_name.data,
            grid=_constants(launch.grid_sizes),
            block=_constants(launch.block_sizes),
            dynamic_shared_memory=0,
            arguments=arguments,
            outputs=(arguments[-1].name,),
            tensor_map_shapes=(
                ((host_names[0], plan.conv.strided_input_shape),)
                if plan.conv
                and plan.conv.strided
                and arguments[0].name in maps.values()
                else ()
            ),
        )
        kernel.attributes[LAUNCH] = record.to_attribute()
    for o in (host, kernels):
        o.detach()
    module.body.block.insert_op_before(host, fn)
    module.body.block.insert_op_after(kernels, host)
    fn.detach()
    fn.erase()
    module.attributes["gpu.container_module"] = UnitAttr()


def _constants(values) -> tuple[int, int, int]:
    """The values of three `arith.constant`s (a launch's grid or block)."""
    x, y, z = (v.owner.value.value.data for v in values)
    return (x, y, z)


__all__ = [
    "BK",
    "SCHEDULES",
    "ConvGeometry",
    "GemmKernel",
    "pixel_box",
    "plan_of",
    "route_refusal",
    "gemm_module_text",
    "replace_with_kernel",
]
