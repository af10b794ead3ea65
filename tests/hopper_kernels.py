"""Hand-written Hopper kernels at the nvgpu level, for the tests: C = A × B through
TMA, mbarriers and warpgroup MMA, with a pipeline of stages over K.

`matmul_module(m, n, k, stages)` is a module with `@matmul(%a, %b, %out)` (A m × k,
B k × n, f16; out m × n, f32) launching one block of one warpgroup. Thread 0 issues
the TMA loads of a K step (64 wide) into stage `step % stages`
(B swizzled by its row: n = 16, 32 or 64); every thread waits
on that stage's barrier, the warpgroup multiplies, and a `gpu.barrier` releases the
stage for the load `stages` steps later. `edits` replace text of the kernel: the
tests mutate it to show each mistake is caught.
"""

from __future__ import annotations

BK = 64
"""The K of one step: one 128-byte swizzled row of f16."""


def matmul_module(m: int = 64, n: int = 64, k: int = 64, stages: int = 1) -> str:
    steps = k // BK
    swizzle_b = {128: "swizzle_128b", 64: "swizzle_64b", 32: "swizzle_32b"}[n * 2]
    bytes_per_step = (m * BK + BK * n) * 2
    types = f"""!barriers = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = {stages}>
!mapA = !nvgpu.tensormap.descriptor<tensor = memref<{m}x{BK}xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!mapB = !nvgpu.tensormap.descriptor<tensor = memref<{BK}x{n}xf16, 3>, swizzle = {swizzle_b}, l2promo = none, oob = zero, interleave = none>
!descA = !nvgpu.warpgroup.descriptor<tensor = memref<{m}x{BK}xf16, 3>>
!descB = !nvgpu.warpgroup.descriptor<tensor = memref<{BK}x{n}xf16, 3>>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<{m}x{n}xf32>>
"""
    buffers = ", ".join(
        f"%sa{s} : memref<{m}x{BK}xf16, 3>, %sb{s} : memref<{BK}x{n}xf16, 3>"
        for s in range(stages)
    )
    body = []

    def load(step: int) -> None:
        s = step % stages
        body.append(f"""      scf.if %first {{
        nvgpu.mbarrier.arrive.expect_tx %bar[%c{s}], %bytes : !barriers
        nvgpu.tma.async.load %mapA[%k{step}, %c0], %bar[%c{s}] to %sa{s} : !mapA, !barriers -> memref<{m}x{BK}xf16, 3>
        nvgpu.tma.async.load %mapB[%c0, %k{step}], %bar[%c{s}] to %sb{s} : !mapB, !barriers -> memref<{BK}x{n}xf16, 3>
      }}""")

    body.append("      scf.if %first {")
    for s in range(stages):
        body.append(f"        nvgpu.mbarrier.init %bar[%c{s}], %c1 : !barriers")
    body.append("      }")
    body.append("      gpu.barrier  // the barriers' init, visible to every thread")
    for step in range(min(stages, steps)):
        load(step)
    acc = "%zero"
    for step in range(steps):
        s = step % stages
        parity = "%true" if (step // stages) % 2 else "%false"
        body.append(f"""      nvgpu.mbarrier.try_wait.parity %bar[%c{s}], {parity}, %ticks : !barriers
      %da{step} = nvgpu.warpgroup.generate.descriptor %sa{s}, %mapA : memref<{m}x{BK}xf16, 3>, !mapA -> !descA
      %db{step} = nvgpu.warpgroup.generate.descriptor %sb{s}, %mapB : memref<{BK}x{n}xf16, 3>, !mapB -> !descB
      %acc{step} = nvgpu.warpgroup.mma %da{step}, %db{step}, {acc} {{transposeB}} : !descA, !descB, !acc -> !acc
      gpu.barrier  // stage {s} read: free for the next load""")
        acc = f"%acc{step}"
        if step + stages < steps:
            load(step + stages)
    constants = "\n".join(
        f"      %c{s} = arith.constant {s} : index"
        for s in range(max(stages, 3))
        if s not in (0, 1)
    )
    offsets = "\n".join(
        f"      %k{step} = arith.constant {step * BK} : index" for step in range(steps)
    )
    return f"""{types}
module attributes {{gpu.container_module}} {{
  func.func @matmul(%a: memref<{m}x{k}xf16>, %b: memref<{k}x{n}xf16>, %out: memref<{m}x{n}xf32>) {{
    %c1 = arith.constant 1 : index
    %cm = arith.constant {m} : index
    %cn = arith.constant {n} : index
    %ck = arith.constant {BK} : index
    %c128 = arith.constant 128 : index
    %ua = "memref.cast"(%a) : (memref<{m}x{k}xf16>) -> memref<*xf16>
    %ub = "memref.cast"(%b) : (memref<{k}x{n}xf16>) -> memref<*xf16>
    %mapA = nvgpu.tma.create.descriptor %ua box[%cm, %ck] : memref<*xf16> -> !mapA
    %mapB = nvgpu.tma.create.descriptor %ub box[%ck, %cn] : memref<*xf16> -> !mapB
    gpu.launch_func @kernels::@matmul_kernel blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1) args(%mapA : !mapA, %mapB : !mapB, %out : memref<{m}x{n}xf32>)
    return
  }}
  gpu.module @kernels {{
    gpu.func @matmul_kernel(%mapA: !mapA, %mapB: !mapB, %out: memref<{m}x{n}xf32>) workgroup({buffers}) kernel {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
{constants}
{offsets}
      %bytes = arith.constant {bytes_per_step} : index
      %ticks = arith.constant 10000000 : index
      %false = arith.constant false
      %true = arith.constant true
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c0 : index
      %bar = nvgpu.mbarrier.create -> !barriers
      %zero = nvgpu.warpgroup.mma.init.accumulator -> !acc
{chr(10).join(body)}
      nvgpu.warpgroup.mma.store {acc}, %out : !acc to memref<{m}x{n}xf32>
      gpu.return
    }}
  }}
}}
"""
