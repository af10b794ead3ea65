"""A Hopper matrix product written at the nvgpu level: TMA loads, an mbarrier
pipeline and warpgroup MMA, for checking and measuring the Hopper levels (no pass
makes such kernels from a spec yet).

`matmul_module(m, n, k, stages, tile_m, tile_n)` is a module with a host function
`@matmul(%a, %b, %out)` (A m × k and B k × n of f16, out m × n of f32) that makes the
two tensor maps and launches a grid of blocks, one warpgroup each, one
`tile_m` × `tile_n` tile of the output a block:

    thread 0    init the stages' barriers                      gpu.barrier
    thread 0    for the first `stages` K steps (64 wide):
                  arrive.expect_tx, TMA A[tile rows, step], TMA B[step, tile cols]
    every step  all wait for the step's barrier (parity: the step's round), the
                warpgroup multiplies (`waitGroup = 0`: done before going on; with
                `in_flight`, `waitGroup = 1`: the previous step's MMAs are done),
                gpu.barrier (a stage is free), thread 0 loads the step `stages`
                ahead of the free one into it
    epilogue    each thread stores its registers into a shared f32 tile, then the
                block copies the tile out

B's tile is read as `wgmma`'s transposed B (row-major k × n), swizzled by its row
(n = 16, 32 or 64 f16: 32, 64 or 128 bytes); A's by 128 bytes. M, N and K must be
multiples of the tiles and of 64.
"""

from __future__ import annotations

BK = 64
"""The K of one step: one 128-byte swizzled row of f16."""

WARPGROUP = 128

_SWIZZLE = {128: "swizzle_128b", 64: "swizzle_64b", 32: "swizzle_32b"}


def matmul_module(
    m: int = 64,
    n: int = 64,
    k: int = 64,
    stages: int = 1,
    tile_m: int | None = None,
    tile_n: int | None = None,
    in_flight: bool = False,
    warp_specialized: bool = False,
) -> str:
    """The module's text (MLIR's syntax); a ValueError for shapes it cannot take.

    With `in_flight`, each step's MMAs stay in flight while the next step waits for
    its tiles (`waitGroup = 1`): the stage a step read is free only after the next
    step's MMAs are issued, so it is reloaded one step later (2 stages at least).

    With `warp_specialized`, a block is two warpgroups: the first only loads (its
    thread 0 waits for a stage to be handed back, on the stage's `empty` barrier,
    then loads it), the second only multiplies (MMAs in flight, as above) and hands
    each stage back by arriving on its `empty` barrier once the MMAs that read it
    have finished; no `gpu.barrier` between them until the epilogue."""
    tm, tn = tile_m or m, tile_n or n
    if (
        tm % 64
        or m % tm
        or tn not in (16, 32, 64, 128, 256)
        or n % tn
        or k % BK
        or stages < 1
    ):
        raise ValueError(
            f"a {m}x{n}x{k} product in {tm}x{tn} tiles: tile_m must be a multiple of "
            f"64 dividing m, tile_n one of 16, 32, 64, 128, 256 dividing n, k a "
            f"multiple of {BK}"
        )
    bn = min(tn, 64)  # B's TMA box: one swizzle row wide; a wider tile is slabs of it
    slabs = tn // bn
    if (in_flight or warp_specialized) and stages < 2:
        raise ValueError("MMAs in flight need 2 stages at least")
    steps = k // BK
    bytes_per_step = (tm * BK + BK * tn) * 2
    types = f"""!barriers = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = {stages}>
!mapA = !nvgpu.tensormap.descriptor<tensor = memref<{tm}x{BK}xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!mapB = !nvgpu.tensormap.descriptor<tensor = memref<{BK}x{bn}xf16, 3>, swizzle = {_SWIZZLE[bn * 2]}, l2promo = none, oob = zero, interleave = none>
!descA = !nvgpu.warpgroup.descriptor<tensor = memref<{tm}x{BK}xf16, 3>>
!descB = !nvgpu.warpgroup.descriptor<tensor = memref<{BK}x{tn}xf16, 3>>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<{tm}x{tn}xf32>>
"""
    buffers = ", ".join(
        f"%sa{s} : memref<{tm}x{BK}xf16, 3>, %sb{s} : memref<{BK}x{tn}xf16, 3>"
        for s in range(stages)
    )
    body: list[str] = []

    def load(step: int) -> None:
        s = step % stages
        body.append(f"""      scf.if %first {{
        nvgpu.mbarrier.arrive.expect_tx %bar[%c{s}], %bytes : !barriers
        nvgpu.tma.async.load %mapA[%k{step}, %row0], %bar[%c{s}] to %sa{s} : !mapA, !barriers -> memref<{tm}x{BK}xf16, 3>
{_b_loads(step, s, tn, bn, "        ")}
      }}""")

    body.append("      scf.if %first {")
    body += [
        f"        nvgpu.mbarrier.init %bar[%c{s}], %c1 : !barriers"
        for s in range(stages)
    ]
    if warp_specialized:
        body += [
            f"        nvgpu.mbarrier.init %empty[%c{s}], %c1 : !barriers"
            for s in range(stages)
        ]
    body.append("      }")
    body.append("      gpu.barrier  // the barriers' init, visible to every thread")
    if warp_specialized:
        _warp_specialized(body, steps, stages, tm, tn, bn)
        acc = None
    else:
        for step in range(min(stages, steps)):
            load(step)
        acc = "%zero"
        lag = 1 if in_flight else 0  # the step whose stage is free after this one's
        for step in range(steps):
            s = step % stages
            parity = "%true" if (step // stages) % 2 else "%false"
            free = (step - lag) % stages
            body.append(f"""      nvgpu.mbarrier.try_wait.parity %bar[%c{s}], {parity}, %ticks : !barriers
      %da{step} = nvgpu.warpgroup.generate.descriptor %sa{s}, %mapA : memref<{tm}x{BK}xf16, 3>, !mapA -> !descA
      %db{step} = nvgpu.warpgroup.generate.descriptor %sb{s}, %mapB : memref<{BK}x{tn}xf16, 3>, !mapB -> !descB
      %acc{step} = nvgpu.warpgroup.mma %da{step}, %db{step}, {acc} {{transposeB{", waitGroup = 0 : i64" if lag == 0 else ""}}} : !descA, !descB, !acc -> !acc
      gpu.barrier  // stage {free} read: free for the next load""")
            acc = f"%acc{step}"
            if step >= lag and step - lag + stages < steps:
                load(step - lag + stages)
        body.append(
            f"      nvgpu.warpgroup.mma.store {acc}, %tile : !acc to memref<{tm}x{tn}xf32, 3>"
        )
    constants = "\n".join(
        f"      %c{s} = arith.constant {s} : index"
        for s in range(max(stages, 3))
        if s not in (0, 1)
    )
    threads = 2 * WARPGROUP if warp_specialized else WARPGROUP
    slab_columns = "".join(
        f"\n      %slab{j} = arith.constant {j * bn} : index"
        f"\n      %col0_{j} = arith.addi %col0, %slab{j} : index"
        for j in range(1, slabs)
    )
    empty = (
        "\n      %empty = nvgpu.mbarrier.create -> !barriers"
        if warp_specialized
        else ""
    )
    offsets = "\n".join(
        f"      %k{step} = arith.constant {step * BK} : index" for step in range(steps)
    )
    return f"""{types}
module attributes {{gpu.container_module}} {{
  func.func @matmul(%a: memref<{m}x{k}xf16>, %b: memref<{k}x{n}xf16>, %out: memref<{m}x{n}xf32>) {{
    %c1 = arith.constant 1 : index
    %ctm = arith.constant {tm} : index
    %ctn = arith.constant {tn} : index
    %cbn = arith.constant {bn} : index
    %ck = arith.constant {BK} : index
    %blocks_x = arith.constant {n // tn} : index
    %blocks_y = arith.constant {m // tm} : index
    %threads = arith.constant {threads} : index
    %ua = memref.cast %a : memref<{m}x{k}xf16> to memref<*xf16>
    %ub = memref.cast %b : memref<{k}x{n}xf16> to memref<*xf16>
    %mapA = nvgpu.tma.create.descriptor %ua box[%ctm, %ck] : memref<*xf16> -> !mapA
    %mapB = nvgpu.tma.create.descriptor %ub box[%ck, %cbn] : memref<*xf16> -> !mapB
    gpu.launch_func @kernels::@matmul_kernel blocks in (%blocks_x, %blocks_y, %c1) threads in (%threads, %c1, %c1) args(%mapA : !mapA, %mapB : !mapB, %out : memref<{m}x{n}xf32>)
    return
  }}
  gpu.module @kernels {{
    gpu.func @matmul_kernel(%mapA: !mapA, %mapB: !mapB, %out: memref<{m}x{n}xf32>) workgroup({buffers}, %tile : memref<{tm}x{tn}xf32, 3>) kernel {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
{constants}
{offsets}
      %tile_m = arith.constant {tm} : index
      %tile_n = arith.constant {tn} : index
      %tile_size = arith.constant {tm * tn} : index
      %threads = arith.constant {threads} : index
      %c128 = arith.constant {WARPGROUP} : index
      %bytes = arith.constant {bytes_per_step} : index
      %ticks = arith.constant 10000000 : index
      %false = arith.constant false
      %true = arith.constant true
      %tid = gpu.thread_id x
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %row0 = arith.muli %by, %tile_m : index
      %col0 = arith.muli %bx, %tile_n : index{slab_columns}
      %first = arith.cmpi eq, %tid, %c0 : index
      %bar = nvgpu.mbarrier.create -> !barriers{empty}
      %zero = nvgpu.warpgroup.mma.init.accumulator -> !acc
{chr(10).join(body)}
      gpu.barrier  // the tile stored
      scf.for %e = %tid to %tile_size step %threads {{
        %r = arith.divui %e, %tile_n : index
        %c = arith.remui %e, %tile_n : index
        %v = memref.load %tile[%r, %c] : memref<{tm}x{tn}xf32, 3>
        %gr = arith.addi %row0, %r : index
        %gc = arith.addi %col0, %c : index
        memref.store %v, %out[%gr, %gc] : memref<{m}x{n}xf32>
      }}
      gpu.return
    }}
  }}
}}
"""


def _b_loads(step: int, stage: int, tn: int, bn: int, indent: str) -> str:
    """The TMA loads of B's tile for a step: one box, or (`tn` wider than a swizzle
    row) one box a slab, into `memref.reinterpret_cast` views of the tile's buffer
    at the slabs (64 x `bn` elements each, one after the other)."""
    lines = []
    for j in range(tn // bn):
        target = f"%sb{stage}"
        t = f"memref<{BK}x{tn}xf16, 3>"
        if tn > bn:
            at = j * BK * bn
            view = f"memref<{BK}x{bn}xf16, strided<[{bn}, 1], offset: {at}>, 3>"
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


def _warp_specialized(
    body: list[str], steps: int, stages: int, tm: int, tn: int, bn: int
) -> None:
    """The two warpgroups' roles: warpgroup 0's thread 0 loads every step, into a
    stage once the consumer has handed it back; warpgroup 1 multiplies, leaving a
    step's MMAs in flight, and hands back the previous step's stage."""
    body.append("""      %warpgroup = arith.divui %tid, %c128 : index
      %producer = arith.cmpi eq, %warpgroup, %c0 : index
      %consumer_leader = arith.cmpi eq, %tid, %c128 : index
      scf.if %producer {
        scf.if %first {""")
    for step in range(steps):
        s, use = step % stages, step // stages
        if use:  # the stage's previous use handed back: phase `use - 1` of %empty[s]
            parity = "%true" if (use - 1) % 2 else "%false"
            body.append(
                f"          nvgpu.mbarrier.try_wait.parity %empty[%c{s}], {parity}, %ticks : !barriers"
            )
        body.append(f"""          nvgpu.mbarrier.arrive.expect_tx %bar[%c{s}], %bytes : !barriers
          nvgpu.tma.async.load %mapA[%k{step}, %row0], %bar[%c{s}] to %sa{s} : !mapA, !barriers -> memref<{tm}x{BK}xf16, 3>
{_b_loads(step, s, tn, bn, "          ")}""")
    body.append("""        }
      } else {""")
    acc = "%zero"
    for step in range(steps):
        s = step % stages
        parity = "%true" if (step // stages) % 2 else "%false"
        body.append(f"""        nvgpu.mbarrier.try_wait.parity %bar[%c{s}], {parity}, %ticks : !barriers
        %da{step} = nvgpu.warpgroup.generate.descriptor %sa{s}, %mapA : memref<{tm}x{BK}xf16, 3>, !mapA -> !descA
        %db{step} = nvgpu.warpgroup.generate.descriptor %sb{s}, %mapB : memref<{BK}x{tn}xf16, 3>, !mapB -> !descB
        %acc{step} = nvgpu.warpgroup.mma %da{step}, %db{step}, {acc} {{transposeB}} : !descA, !descB, !acc -> !acc""")
        acc = f"%acc{step}"
        if step >= 1 and step - 1 + stages < steps:  # the previous step's MMAs are done
            body.append(f"""        scf.if %consumer_leader {{
          %handed{step} = nvgpu.mbarrier.arrive %empty[%c{(step - 1) % stages}] : !barriers -> !nvgpu.mbarrier.token
        }}""")
    body.append(f"""        nvgpu.warpgroup.mma.store {acc}, %tile : !acc to memref<{tm}x{tn}xf32, 3>
      }}""")
