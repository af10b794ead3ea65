"""Hand-written tensor-core kernels at the gpu level, as IR text, for the tests.

`mma_kernel` is what the MMA pass will produce in miniature: D = A x B + C with
A (16*warps x K) and B (K x 8) staged in shared memory (by plain loads or by
`nvgpu.device_async_copy`), `nvgpu.ldmatrix` fragments, an `scf.for` over K in steps
of 16 carrying the accumulator fragment, and the D fragment stored by each lane.

The lane arithmetic is written out here from the PTX ISA's formulas, independently of
`affinec.ir.mma_layouts` (with g = lane / 4, t = lane % 4):

- A, ldmatrix x4: lane points at row lane % 16, column 8 * (lane / 16);
- B stored [n][k]: ldmatrix x2 at row lane % 8, column 8 * ((lane / 8) % 2);
  B stored [k][n]: ldmatrix x2 transposed at row lane % 16, column 0;
- C and D: element (r, e) of a lane's fragment is row g + 8r, column 2t + e.

`swap_lanes=(i, j)` makes lanes i and j store each other's D fragment (a lowering
that swapped two lanes' fragment elements): the result must come out wrong.

With `operands="tf32"` (m16n8k8) there is no ldmatrix (it moves 16-bit elements):
each lane loads its fragments from global memory, A's register r from row
g + 8(r % 2), column t + 4(r / 2), B's from k = t + 4r, n = g. `epilogue` adds a
broadcast 0.5 and a constant [[0, 1], [2, 3]] to the D fragment (vector arithmetic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from affinec.base.dtypes import numpy_dtype


@dataclass(frozen=True)
class MmaKernel:
    operands: str = "f16"
    """"f16" or "bf16" (f32 accumulation)."""
    warps: int = 1
    k_steps: int = 1
    b_k_contiguous: bool = True
    """B in memory (and shared memory) as [n][k] (True) or [k][n] (False)."""
    async_copy: bool = False
    swap_lanes: tuple[int, int] | None = None
    epilogue: bool = False

    @property
    def k_step(self) -> int:
        return 8 if self.operands == "tf32" else 16

    @property
    def m(self) -> int:
        return 16 * self.warps

    @property
    def k(self) -> int:
        return self.k_step * self.k_steps

    @property
    def b_shape(self) -> tuple[int, int]:
        return (8, self.k) if self.b_k_contiguous else (self.k, 8)

    def inputs(self, seed: int = 0) -> tuple[np.ndarray, ...]:
        """A, B (as stored), C, and a poisoned D."""
        from xdsl.dialects.builtin import BFloat16Type, Float16Type

        rng = np.random.default_rng(seed)
        if self.operands == "tf32":
            # f16 values are exact in tf32: the MMA's truncation changes nothing.
            a = rng.uniform(-1, 1, (self.m, self.k)).astype(np.float16)
            b = rng.uniform(-1, 1, self.b_shape).astype(np.float16)
            a, b = a.astype(np.float32), b.astype(np.float32)
        else:
            t = numpy_dtype(Float16Type() if self.operands == "f16" else BFloat16Type())
            a = rng.uniform(-1, 1, (self.m, self.k)).astype(t)
            b = rng.uniform(-1, 1, self.b_shape).astype(t)
        c = rng.uniform(-1, 1, (self.m, 8)).astype(np.float32)
        d = np.full((self.m, 8), np.nan, np.float32)
        return a, b, c, d

    def reference(self, a, b, c) -> np.ndarray:
        bkn = b.astype(np.float64)
        if self.b_k_contiguous:
            bkn = bkn.T
        d = a.astype(np.float64) @ bkn + c
        if self.epilogue:
            rows, cols = np.indices(d.shape)
            d += 0.5 + EPILOGUE[(rows % 16) // 8, cols % 2]
        return d

    def text(self) -> str:
        return _module(self)


EPILOGUE = np.array([[0.0, 1.0], [2.0, 3.0]])
"""What the epilogue adds to each lane's D fragment, by (register, element)."""


def _ty(k: MmaKernel) -> str:
    return "f32" if k.operands == "tf32" else k.operands


def _module(k: MmaKernel) -> str:
    t = _ty(k)
    m, kk = k.m, k.k
    bm, bn = k.b_shape
    a_t = f"memref<{m}x{kk}x{t}>"
    b_t = f"memref<{bm}x{bn}x{t}>"
    c_t = f"memref<{m}x8xf32>"
    sa_t = f"memref<{m}x{kk}x{t}, 3>"
    sb_t = f"memref<{bm}x{bn}x{t}, 3>"
    threads = 32 * k.warps
    lines = [
        "builtin.module attributes {gpu.container_module} {",
        f"  func.func @mma(%a: {a_t}, %b: {b_t}, %c: {c_t}, %d: {c_t}) {{",
        "    %one = arith.constant 1 : index",
        f"    %nt = arith.constant {threads} : index",
        "    gpu.launch_func @kernels::@mma blocks in (%one, %one, %one) threads in "
        f"(%nt, %one, %one) args(%a : {a_t}, %b : {b_t}, %c : {c_t}, %d : {c_t})",
        "    func.return",
        "  }",
        "  gpu.module @kernels {",
        f"    gpu.func @mma(%a: {a_t}, %b: {b_t}, %c: {c_t}, %d: {c_t}) "
        f"workgroup(%sa : {sa_t}, %sb : {sb_t}) kernel "
        f"attributes {{known_block_size = array<i32: {threads}, 1, 1>}} {{",
    ]
    body: list[str] = []
    add = body.append
    for value in (0, 1, 2, 4, 8, 16, 32):
        add(f"%c{value} = arith.constant {value} : index")
    add("%tid = gpu.thread_id x")
    add(f"%ntid = arith.constant {threads} : index")
    add("%lane = arith.remui %tid, %c32 : index")
    add("%warp = arith.divui %tid, %c32 : index")
    add("%wrow = arith.muli %warp, %c16 : index")
    if k.operands != "tf32":
        _copy(k, add, "a", "sa", m, kk, a_t, sa_t)
        _copy(k, add, "b", "sb", bm, bn, b_t, sb_t)
    if k.async_copy:
        add("%grp = nvgpu.device_async_create_group")
        add("nvgpu.device_async_wait %grp {numGroups = 0 : i32}")
    add("gpu.barrier")
    # The C fragment: element (r, e) is row g + 8r, column 2t + e of the warp's rows.
    add("%g = arith.divui %lane, %c4 : index")
    add("%tg = arith.remui %lane, %c4 : index")
    add("%t2 = arith.muli %tg, %c2 : index")
    add("%acc_0 = ub.poison : vector<2x2xf32>")
    n = 0
    for r in range(2):
        add(f"%crow{r} = arith.addi %g, %c{8 * r} : index")
        add(f"%cwrow{r} = arith.addi %crow{r}, %wrow : index")
        for e in range(2):
            add(f"%ccol{r}{e} = arith.addi %t2, %c{e} : index")
            add(f"%cv{r}{e} = memref.load %c[%cwrow{r}, %ccol{r}{e}] : {c_t}")
            add(
                f"%acc_{n + 1} = vector.insert %cv{r}{e}, %acc_{n}[{r}, {e}] : f32 "
                "into vector<2x2xf32>"
            )
            n += 1
    add(f"%kk = arith.constant {kk} : index")
    add(
        f"%dfrag = scf.for %ks = %c0 to %kk step %c{k.k_step} "
        f"iter_args(%acc = %acc_{n}) -> (vector<2x2xf32>) {{"
    )
    if k.operands == "tf32":
        _tf32_fragments(k, add, a_t, b_t)
    else:
        _ldmatrix_fragments(k, add, t, sa_t, sb_t)
    shape = "[16, 8, 8], tf32Enabled" if k.operands == "tf32" else "[16, 8, 16]"
    a_frag, b_frag = (
        ("vector<4x1xf32>", "vector<2x1xf32>")
        if k.operands == "tf32"
        else (f"vector<4x2x{t}>", f"vector<2x2x{t}>")
    )
    add(
        f"  %dnext = nvgpu.mma.sync (%fa, %fb, %acc) {{mmaShape = {shape}}} : "
        f"({a_frag}, {b_frag}, vector<2x2xf32>) -> vector<2x2xf32>"
    )
    add("  scf.yield %dnext : vector<2x2xf32>")
    add("}")
    _store_d(k, add, c_t)
    add("gpu.return")
    lines += ["      " + b for b in body]
    lines += ["    }", "  }", "}"]
    return "\n".join(lines)


def _tf32_fragments(k: MmaKernel, add, a_t: str, b_t: str) -> None:
    """Each lane loads its A and B registers from global memory (tf32: one f32 each)."""
    add("  %fa_0 = ub.poison : vector<4x1xf32>")
    for r in range(4):
        add(f"  %ar{r}0 = arith.addi %g, %c{8 * (r % 2)} : index")
        add(f"  %ar{r} = arith.addi %ar{r}0, %wrow : index")
        add(f"  %ac{r}0 = arith.addi %tg, %c{4 * (r // 2)} : index")
        add(f"  %ac{r} = arith.addi %ac{r}0, %ks : index")
        add(f"  %av{r} = memref.load %a[%ar{r}, %ac{r}] : {a_t}")
        into = "%fa" if r == 3 else f"%fa_{r + 1}"
        add(
            f"  {into} = vector.insert %av{r}, %fa_{r}[{r}, 0] : f32 into "
            "vector<4x1xf32>"
        )
    add("  %fb_0 = ub.poison : vector<2x1xf32>")
    for r in range(2):
        add(f"  %bk{r}0 = arith.addi %tg, %c{4 * r} : index")
        add(f"  %bk{r} = arith.addi %bk{r}0, %ks : index")
        index = f"%g, %bk{r}" if k.b_k_contiguous else f"%bk{r}, %g"
        add(f"  %bv{r} = memref.load %b[{index}] : {b_t}")
        into = "%fb" if r == 1 else f"%fb_{r + 1}"
        add(
            f"  {into} = vector.insert %bv{r}, %fb_{r}[{r}, 0] : f32 into "
            "vector<2x1xf32>"
        )


def _ldmatrix_fragments(k: MmaKernel, add, t: str, sa_t: str, sb_t: str) -> None:
    """A and B fragments from shared memory with ldmatrix."""
    # A: ldmatrix x4 at row lane % 16, column 8 * (lane / 16).
    add("  %l16 = arith.remui %lane, %c16 : index")
    add("  %arow = arith.addi %l16, %wrow : index")
    add("  %ahalf = arith.divui %lane, %c16 : index")
    add("  %acol0 = arith.muli %ahalf, %c8 : index")
    add("  %acol = arith.addi %acol0, %ks : index")
    add(
        "  %fa = nvgpu.ldmatrix %sa[%arow, %acol] {numTiles = 4 : i32, "
        f"transpose = false}} : {sa_t} -> vector<4x2x{t}>"
    )
    if k.b_k_contiguous:
        add("  %bnr = arith.remui %lane, %c8 : index")
        add("  %bq = arith.divui %lane, %c8 : index")
        add("  %bh = arith.remui %bq, %c2 : index")
        add("  %bk0 = arith.muli %bh, %c8 : index")
        add("  %bk = arith.addi %bk0, %ks : index")
        add(
            "  %fb = nvgpu.ldmatrix %sb[%bnr, %bk] {numTiles = 2 : i32, "
            f"transpose = false}} : {sb_t} -> vector<2x2x{t}>"
        )
    else:
        add("  %bk = arith.addi %l16, %ks : index")
        add(
            "  %fb = nvgpu.ldmatrix %sb[%bk, %c0] {numTiles = 2 : i32, "
            f"transpose = true}} : {sb_t} -> vector<2x2x{t}>"
        )


def _store_d(k: MmaKernel, add, c_t: str) -> None:
    """Each lane stores its D fragment."""
    # D: the same element -> (row, column) rule, from a lane id that may be swapped.
    if k.epilogue:
        add("%half = arith.constant 0.5 : f32")
        add("%halves = vector.broadcast %half : f32 to vector<2x2xf32>")
        add("%bias = arith.constant dense<[[0.0, 1.0], [2.0, 3.0]]> : vector<2x2xf32>")
        add("%zeros = arith.constant dense<0.0> : vector<2x2xf32>")
        add("%e0 = arith.addf %dfrag, %zeros : vector<2x2xf32>")
        add("%e1 = arith.addf %e0, %halves : vector<2x2xf32>")
        add("%dout = arith.addf %e1, %bias : vector<2x2xf32>")
    result = "%dout" if k.epilogue else "%dfrag"
    lane = "%lane"
    if k.swap_lanes is not None:
        i, j = k.swap_lanes
        add(f"%li = arith.constant {i} : index")
        add(f"%lj = arith.constant {j} : index")
        add("%isi = arith.cmpi eq, %lane, %li : index")
        add("%isj = arith.cmpi eq, %lane, %lj : index")
        add("%sw0 = arith.select %isi, %lj, %lane : index")
        add("%swapped = arith.select %isj, %li, %sw0 : index")
        lane = "%swapped"
    add(f"%dg = arith.divui {lane}, %c4 : index")
    add(f"%dtg = arith.remui {lane}, %c4 : index")
    add("%dt2 = arith.muli %dtg, %c2 : index")
    for r in range(2):
        add(f"%drow{r}0 = arith.addi %dg, %c{8 * r} : index")
        add(f"%drow{r} = arith.addi %drow{r}0, %wrow : index")
        for e in range(2):
            add(f"%dcol{r}{e} = arith.addi %dt2, %c{e} : index")
            add(
                f"%dv{r}{e} = vector.extract {result}[{r}, {e}] : f32 from vector<2x2xf32>"
            )
            add(f"memref.store %dv{r}{e}, %d[%drow{r}, %dcol{r}{e}] : {c_t}")


def _copy(k: MmaKernel, add, src: str, dst: str, rows: int, cols: int, t, st) -> None:
    """Stage `src` in shared `dst`: each thread copies elements tid, tid + threads,
    ... (one at a time), or runs of 8 (16 bytes) with device_async_copy."""
    run = 8 if k.async_copy else 1
    count = rows * cols // run
    add(f"%{src}n = arith.constant {count} : index")
    add(f"%{src}cols = arith.constant {cols} : index")
    add(f"scf.for %{src}i = %tid to %{src}n step %ntid {{")
    add(f"  %{src}f = arith.muli %{src}i, %c{run} : index")
    add(f"  %{src}r = arith.divui %{src}f, %{src}cols : index")
    add(f"  %{src}c = arith.remui %{src}f, %{src}cols : index")
    if k.async_copy:
        add(
            f"  %{src}tok = nvgpu.device_async_copy %{src}[%{src}r, %{src}c], "
            f"%{dst}[%{src}r, %{src}c], 8 : {t} to {st}"
        )
    else:
        add(f"  %{src}v = memref.load %{src}[%{src}r, %{src}c] : {t}")
        add(f"  memref.store %{src}v, %{dst}[%{src}r, %{src}c] : {st}")
    add("}")
