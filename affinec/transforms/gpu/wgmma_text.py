"""A matrix product as a Hopper kernel at the nvgpu level: TMA loads into swizzled
shared tiles, an mbarrier pipeline, warpgroup MMA (`wgmma`) and the epilogue fused in
the copy-out. `affinec-wgmma-gemm` writes the naive product of a spec this way; the
hand-written test bed `affinec.tools.hopper_matmul` is the same kernel with an f32 output.

`GemmKernel` (`wgmma_plan`) is the plan (shapes, element types, epilogue, tiles, stages, schedule)
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

from affinec.transforms.gpu.wgmma_copy_out import (
    SUM_THREADS,
    copy_out,
    output_shape,
    partial_type,
    sum_kernel,
)
from affinec.transforms.gpu.wgmma_plan import BK, WARPGROUP, GemmKernel

_SWIZZLE = {128: "swizzle_128b", 64: "swizzle_64b", 32: "swizzle_32b"}
"""The swizzle of a tile whose rows are this many bytes."""


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
    workspace = [("partial", partial_type(g))] if split else []
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
    sum_launch = sum_text = ""
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
        sum_text = "\n" + sum_kernel(g, operands, c_type)
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
{copy_out(g) if g.parts == 1 else chr(10).join(copy_out(g, h) for h in range(g.parts))}
      gpu.return
    }}{sum_text}
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
    output = "x".join(map(str, output_shape(g)))
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


def _host_types(g: GemmKernel) -> tuple[str, str, str]:
    """The types of A, B and C in the host function (a convolution's input, filter
    and output)."""
    e = g.dtype
    output = "x".join(map(str, output_shape(g)))
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


__all__ = ["gemm_module_text"]
