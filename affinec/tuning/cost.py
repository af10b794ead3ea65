"""A cost model that ranks configurations without a GPU.

Measuring a configuration costs a module load, a check against float64 and a few
hundred launches; compiling it costs half a second of a CPU. The model decides which
few of the compiled configurations are worth the GPU's time (PlaidML picks its tiles
with such a model alone; we measure its favourites). It predicts a kernel's time on
an H100 from:

- the geometry (`affinec.tuning.problem`): blocks, reduction steps, the elements a
  block copies per step (its footprint, which sets the bytes moved per multiply-add),
  the work wasted by partial tiles and by the MMA's padding;
- residency: blocks per multiprocessor from registers (ptxas's count when compiled),
  threads and shared memory, as `affinec.driver.benchmark.occupancy` computes occupancy;
- the instruction mix: instructions issued per FMA or MMA in the innermost loop of
  the PTX when it is at hand (shared loads, conversions, index arithmetic), an
  analytic estimate otherwise.

Each block step is a copy, a barrier, then the math: a multiprocessor either keeps
its issue slots, shared-memory port or tensor cores busy with the steps of all its
resident blocks, or waits for the copies' global-memory latency, which only other
resident blocks can hide (the kernels are not pipelined yet). Waves are counted
whole, so a grid that leaves most multiprocessors idle in its last wave pays for it.
Global traffic (through L2, and the compulsory bytes from HBM) bounds from below.

The constants are the H100's (`H100`); the model is a ranking device, not a
simulator: `affinec tune` reports its rank correlation with the measured times.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from affinec.backend.ptxas import H100_MULTIPROCESSOR, Multiprocessor, resident_blocks
from affinec.driver.config import KernelConfig
from affinec.tuning.problem import (
    MMA_K,
    MMA_M,
    MMA_N,
    Geometry,
    Problem,
    as_compiled,
    ceil_div,
    geometry,
)


@dataclass(frozen=True)
class Machine:
    """What the model knows of a GPU."""

    name: str
    multiprocessors: int
    clock_hz: float
    fp32_tflops: float
    """Peak FP32 FMA rate, counting a multiply-add as two operations."""
    mma_tflops: float
    """f16 `mma.sync` (f32 accumulate) rate that kernels of this kind reach."""
    dram_bytes_per_s: float
    l2_bytes_per_s: float
    sm: Multiprocessor = H100_MULTIPROCESSOR
    """Registers, shared memory, threads and blocks of a multiprocessor."""
    issue_per_clock: int = 4
    """Warp instructions a multiprocessor issues per clock (one per scheduler)."""
    shared_bytes_per_clock: int = 128
    """Shared-memory bandwidth of a multiprocessor (one 128-byte wavefront)."""
    step_latency_cycles: int = 700
    """What one reduction step waits when nothing hides it: the copy's global load
    (a few hundred cycles from L2), the stores to shared memory and two barriers."""
    launch_seconds: float = 2e-6
    wgmma_tflops: float = 700.0
    """f16 `wgmma` rate (f32 accumulate) a pipelined kernel reaches: cuDNN's
    `sm90_xmma` kernels were measured at 636-740 TFLOP/s on the H100; affinec's own
    wgmma kernels are not measured yet."""

    @property
    def mma_cycles(self) -> float:
        """Multiprocessor cycles per m16n8k16 MMA (4096 operations)."""
        per_clock = self.mma_tflops * 1e12 / (self.multiprocessors * self.clock_hz)
        return 2 * MMA_M * MMA_N * MMA_K / per_clock

    @property
    def fma_per_clock(self) -> float:
        """FP32 multiply-adds per clock of a multiprocessor (its FP32 lanes)."""
        return self.fp32_tflops * 1e12 / (2 * self.multiprocessors * self.clock_hz)


H100 = Machine(
    name="NVIDIA H100 80GB HBM3",
    multiprocessors=132,
    clock_hz=1.98e9,
    fp32_tflops=67.0,
    mma_tflops=420.0,
    dram_bytes_per_s=2.98e12,
    l2_bytes_per_s=5.5e12,
)
"""Measured figures (H100): FP32 FMA peak about 67 TFLOP/s, Ampere-style `mma.sync`
kernels top out near 420 TFLOP/s, device copies move 2.98 TB/s."""

UNROLLED_TURNS = 16
"""Copy turns a thread makes per step up to which `affinec-map-threads` unrolls
them (its MAX_UNROLLED_TURNS); beyond, the copy is a loop."""
COPY_UNROLLED = 6
"""Instructions a thread issues per element it copies into shared memory when the
turns are unrolled (global load, shared store, the address folded into offsets),
read off the PTX of the SIMT kernels."""
COPY_ROLLED_INPUT = 45
"""Per input element in a copy loop: the element's coordinates are divided out of
the loop counter and checked against the padding (about 60 static instructions a
turn in the PTX of an MMA kernel, both branches counted)."""
COPY_ROLLED_FILTER = 10
"""Per filter element in a copy loop (no padding; unrolled by four)."""
COPY_DMA_CHUNK = 4
"""Per 16-byte asynchronous copy (`cp.async`, its addresses, the zero-fill size)."""
SMOOTHNESS = 4
"""The exponent of the smooth maximum over the multiprocessors', L2's and HBM's
times."""
EPILOGUE_INSTRUCTIONS = 6
"""Per output a thread writes back (epilogue, conversion, address, store)."""


# -- the instruction mix of the PTX --------------------------------------------------------

_OPCODE = re.compile(r"^(?:@!?%\w+\s+)?([a-z][\w.]*)")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$?[\w.]+)")
_COMPUTE = ("fma.rn.f32", "mma.sync")


@dataclass(frozen=True)
class InstructionMix:
    """Static counts over the innermost loop of the PTX that does the math (the whole
    kernel if no loop does)."""

    total: int
    compute: int
    """FMAs (SIMT) or MMAs in it."""
    shared_loads: int
    conversions: int
    barriers: int
    """Barriers in it: the loop is a whole reduction step, copies included."""
    in_loop: bool

    @property
    def per_compute(self) -> float:
        """Instructions issued per FMA or MMA."""
        return self.total / self.compute if self.compute else math.inf


def instruction_mix(ptx: str) -> InstructionMix | None:
    """The mix of the innermost loop holding FMAs or MMAs (None if the PTX has
    none: nothing to rank it by)."""
    ops: list[str] = []
    labels: dict[str, int] = {}
    branches: list[tuple[int, str]] = []
    for raw in ptx.splitlines():
        line = raw.strip()
        if line.startswith("$") and line.endswith(":"):
            labels[line[:-1]] = len(ops)
            continue
        m = _OPCODE.match(line)
        if not m:
            continue
        ops.append(m[1])
        if m[1].startswith("bra") and (b := _BRANCH.search(line)):
            branches.append((len(ops) - 1, b[1]))
    loops = [
        (labels[target], end)
        for end, target in branches
        if target in labels and labels[target] <= end
    ]
    compute_loops = [
        (start, end)
        for start, end in loops
        if any(op.startswith(_COMPUTE) for op in ops[start : end + 1])
    ]
    if compute_loops:
        start, end = min(compute_loops, key=lambda se: se[1] - se[0])
        body, in_loop = ops[start : end + 1], True
    else:
        body, in_loop = ops, False
    compute = sum(op.startswith(_COMPUTE) for op in body)
    if not compute:
        return None
    return InstructionMix(
        total=len(body),
        compute=compute,
        shared_loads=sum(op.startswith(("ld.shared", "ldmatrix")) for op in body),
        conversions=sum(op.startswith(("cvt.f32.f16", "cvt.f32.bf16")) for op in body),
        barriers=sum(op.startswith("bar.") for op in body),
        in_loop=in_loop,
    )


# -- the prediction ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What compiling told us about a configuration."""

    registers: int
    threads: int
    shared_bytes: int
    """Static plus dynamic shared memory of a block."""
    mix: InstructionMix | None = None


@dataclass(frozen=True)
class Prediction:
    """The model's time for one configuration, and what bounds it."""

    ms: float
    """math.inf when the configuration cannot run (no block fits a multiprocessor)."""
    bound: str
    blocks_per_sm: int
    occupancy: float
    """Resident warps over the multiprocessor's 64."""
    work_efficiency: float
    """Useful multiply-adds over those the kernel performs (partial tiles, padding)."""
    bytes_per_mac: float
    """Bytes a block copies into shared memory per multiply-add it performs."""
    registers: int
    estimated: bool
    """Registers and instruction mix estimated (not compiled yet)."""
    terms: dict[str, float] = field(default_factory=dict)
    """The candidate times (ms) the prediction is the largest of."""

    @property
    def feasible(self) -> bool:
        return math.isfinite(self.ms)


def estimate_registers(problem: Problem, config: KernelConfig, g: Geometry) -> int:
    """Registers a thread will need, before ptxas says: accumulators, the operands of
    one step (times the unrolled steps) and a fixed share for addresses."""
    if g.route == "mma":
        mt, nt = g.mma_tiles
        return min(255, 4 * mt * nt + 4 * mt + 2 * nt + 40)
    if g.route == "global":
        return 40
    rp, rk = g.register_pixels, g.register_channels
    unrolled = max(1, config.unroll_steps)
    return min(255, rp * rk + (rp + rk) * unrolled + 28)


def predict(
    problem: Problem,
    config: KernelConfig,
    facts: Facts | None = None,
    machine: Machine = H100,
    g: Geometry | None = None,
) -> Prediction:
    """The predicted time of `config` on `problem` (see the module's docstring);
    `g` is its geometry if the caller has it."""
    problem = as_compiled(problem, config)
    if config.wgmma:
        return _predict_wgmma(problem, config, facts, machine)
    g = g or geometry(problem, config)
    estimated = facts is None
    registers = facts.registers if facts else estimate_registers(problem, config, g)
    threads = facts.threads if facts and facts.threads else g.threads
    shared = facts.shared_bytes if facts else g.shared_bytes(problem.element_bytes)
    blocks_per_sm = resident_blocks(registers, threads, shared, machine.sm)
    warps = ceil_div(threads, 32)
    occupancy = blocks_per_sm * warps / 64
    work = _work(problem, g)
    bytes_per_mac = (
        g.copy_elements * problem.element_bytes / (g.block_outputs * g.step_depth)
    )
    common = dict(
        blocks_per_sm=blocks_per_sm,
        occupancy=occupancy,
        work_efficiency=problem.macs / work if work else 0.0,
        bytes_per_mac=bytes_per_mac,
        registers=registers,
        estimated=estimated,
    )
    if blocks_per_sm == 0:
        return Prediction(ms=math.inf, bound="does not fit a multiprocessor", **common)
    mix = facts.mix if facts else None
    step = _step_cycles(problem, config, g, threads, mix, machine)
    epilogue = _epilogue_cycles(g, threads, machine)
    full, rest = divmod(g.blocks, machine.multiprocessors * blocks_per_sm)
    tail = ceil_div(rest, machine.multiprocessors)
    cycles = full * _round_cycles(g, step, epilogue, blocks_per_sm, machine)
    if rest:
        cycles += _round_cycles(g, step, epilogue, tail, machine)
    terms = {
        "multiprocessors": cycles / machine.clock_hz * 1e3,
        "l2": g.blocks
        * g.steps
        * g.copy_elements
        * problem.element_bytes
        / machine.l2_bytes_per_s
        * 1e3,
        "dram": problem.dram_bytes() / machine.dram_bytes_per_s * 1e3,
    }
    if config.splits > 1:
        # The partial sums go out and back in f32, and a second kernel adds them.
        outputs = math.prod(problem.extents)
        partials = 2 * config.splits * outputs * 4 + outputs * problem.element_bytes
        terms["dram"] += partials / machine.dram_bytes_per_s * 1e3
        terms["dram"] += machine.launch_seconds * 1e3
    bound = max(terms, key=lambda k: terms[k])
    if bound == "multiprocessors":
        bound = step.bound
    # A smooth maximum: the largest term decides, the others still order the
    # configurations it ties (what one bound leaves, the next one costs a little).
    smooth = sum(t**SMOOTHNESS for t in terms.values()) ** (1 / SMOOTHNESS)
    return Prediction(
        ms=smooth + machine.launch_seconds * 1e3,
        bound=bound,
        terms=terms,
        **common,
    )


def _work(problem: Problem, g: Geometry) -> int:
    """Multiply-adds the kernel performs: whole tiles, and for tensor cores whole
    MMAs (rows, columns, and a channel step padded to 16)."""
    depth = math.prod(
        ceil_div(e, t) * t
        for e, t in zip(g.reduction_extents, g.reduction_tiles, strict=True)
    )
    if g.route == "mma":
        rows = g.mma_tiles[0] * MMA_M * g.warps[0]
        cols = g.mma_tiles[1] * MMA_N * g.warps[1]
        padded = ceil_div(g.channel_step, MMA_K) * MMA_K
        return g.blocks * rows * cols * depth * padded // g.channel_step
    return g.blocks * g.block_outputs * depth


@dataclass(frozen=True)
class _Step:
    """Multiprocessor cycles of one block's reduction step."""

    issue: float
    """Issuing its instructions with all four schedulers."""
    alone: float
    """Issuing them with the schedulers the block's warps can use."""
    shared: float
    tensor: float

    @property
    def bound(self) -> str:
        work = {"issue": self.issue, "shared memory": self.shared}
        if self.tensor:
            work["tensor cores"] = self.tensor
        return max(work, key=lambda k: work[k])


def _step_cycles(
    problem: Problem,
    config: KernelConfig,
    g: Geometry,
    threads: int,
    mix: InstructionMix | None,
    machine: Machine,
) -> _Step:
    warps = ceil_div(threads, 32)
    elem = problem.element_bytes
    copies = _copy_instructions(
        g.input_elements / threads, COPY_ROLLED_INPUT, g.dma[0], elem
    ) + _copy_instructions(
        g.filter_elements / threads, COPY_ROLLED_FILTER, g.dma[1], elem
    )
    copy_wavefronts = g.copy_elements * elem / machine.shared_bytes_per_clock
    tensor = 0.0
    if g.route == "mma":
        mt, nt = g.mma_tiles
        chunks = ceil_div(g.channel_step, MMA_K) * (g.step_depth // g.channel_step)
        compute = chunks * mt * nt  # MMAs of a warp (one per thread) per step
        per_compute = 1 + 3 * (mt + nt) / (mt * nt)
        # ldmatrix: x4 for A (4 wavefronts), x2 for B (2 wavefronts)
        wavefronts = warps * chunks * (4 * mt + 2 * nt)
        tensor = warps * compute * machine.mma_cycles
    elif g.route == "simt":
        rp, rk = g.register_pixels, g.register_channels
        compute = g.step_depth * rp * rk
        per_compute = _simt_instructions(problem, config, g) / (rp * rk)
        wavefronts = g.step_depth * warps * _simt_wavefronts(problem, g, threads)
    else:  # every thread reads global memory: loads, addresses, bounds, FMA
        compute = g.step_depth * g.block_outputs / threads
        per_compute = 10.0
        wavefronts = 0.0
        copies = copy_wavefronts = 0.0
    if mix is not None and mix.compute:
        per_compute = mix.per_compute
        if mix.barriers:  # the loop is the whole step: the copies are in it
            copies = 0.0
    instructions = compute * per_compute + copies + 4  # + barriers, loop
    if g.route == "simt":
        # The FP32 lanes: an FMA takes a lane, the other instructions share the issue.
        tensor = warps * compute * 32 / machine.fma_per_clock
    return _Step(
        issue=warps * instructions / machine.issue_per_clock,
        alone=warps * instructions / min(machine.issue_per_clock, warps),
        shared=wavefronts + copy_wavefronts,
        tensor=tensor,
    )


def _copy_instructions(turns: float, rolled: int, dma: bool, elem: int) -> float:
    """Instructions a thread issues to copy `turns` elements of one buffer."""
    if dma:
        return turns * elem / 16 * COPY_DMA_CHUNK
    return turns * (COPY_UNROLLED if turns <= UNROLLED_TURNS else rolled)


def _simt_instructions(problem: Problem, config: KernelConfig, g: Geometry) -> float:
    """Instructions a thread issues per reduction point of its register tile: the
    FMAs, the shared loads (16-byte ones along the contiguous dimension, merged over
    unrolled steps), f16 conversions, and the loop."""
    rp, rk = g.register_pixels, g.register_channels
    vector = 16 // problem.element_bytes
    inner_is_channel = problem.innermost == problem.channel
    inner = rk if inner_is_channel else config.register_tile[problem.innermost]
    inner_loads = inner / vector if inner % vector == 0 else inner
    outer = rp * rk // max(inner, 1)
    unrolled = max(1, config.unroll_steps)
    # Unrolled steps along a contiguous channel read neighbouring elements.
    channel_innermost = problem.reduction_channel == len(problem.reduction_extents) - 1
    merged = min(unrolled, vector) if channel_innermost else 1
    outer_loads = outer / merged
    conversions = (rp + rk) if problem.dtype != "f32" else 0
    loop = 3 / unrolled
    return rp * rk + inner_loads + outer_loads + conversions + loop


def _simt_wavefronts(problem: Problem, g: Geometry, threads: int) -> float:
    """Shared-memory wavefronts of one warp per reduction point: the distinct bytes
    its lanes read of each operand (lanes along the contiguous dimension read
    different elements, the others the same ones), at least one per load."""
    elem = problem.element_bytes
    rp, rk = g.register_pixels, g.register_channels
    threads_inner = max(1, g.block_channels // rk)
    lanes_inner = min(32, threads_inner, threads)
    lanes_outer = max(1, min(32, threads) // lanes_inner)
    vector = 16 // elem
    filter_loads = rk / vector if rk % vector == 0 else rk
    filter_bytes = lanes_inner * rk * elem
    input_bytes = lanes_outer * rp * elem
    return max(filter_loads, filter_bytes / 128) + max(rp, input_bytes / 128)


def _epilogue_cycles(g: Geometry, threads: int, machine: Machine) -> float:
    warps = ceil_div(threads, 32)
    per_thread = g.block_outputs / threads * EPILOGUE_INSTRUCTIONS
    return warps * per_thread / machine.issue_per_clock + machine.step_latency_cycles


def _round_cycles(
    g: Geometry, step: _Step, epilogue: float, blocks: int, machine: Machine
) -> float:
    """Cycles for `blocks` blocks resident together on one multiprocessor to finish:
    per step, either the multiprocessor is busy with all of them, or one block's
    step waits on its copies' latency, less what the steps computed while later
    tiles' copies are in flight hide of it (pipelined stages)."""
    busy = blocks * max(step.issue, step.shared, step.tensor)
    alone = max(step.alone, step.shared, step.tensor)
    exposed = max(0.0, machine.step_latency_cycles - (g.stages - 1) * alone)
    return g.steps * max(busy, alone + exposed) + epilogue


def _predict_wgmma(
    problem: Problem, config: KernelConfig, facts: Facts | None, machine: Machine
) -> Prediction:
    """Hopper's kernel (`affinec-wgmma-gemm`) as a roofline: each block's product
    (K padded to 64) at the multiprocessor's share of `machine.wgmma_tflops`, in
    waves of resident blocks; its tiles through L2; the arrays through DRAM. No
    instruction mix: the copies are TMA's, the MMAs read shared memory."""
    from affinec.transforms.gpu.wgmma_plan import BK, plan_of

    tm, tn = config.wgmma_tile
    plan = plan_of(problem.spec, (tm, tn), config.stages, config.wgmma_schedule,
                   splits=config.splits)  # fmt: skip
    blocks = plan.grid[0] * plan.grid[1] * plan.grid[2]
    depth = plan.steps * BK
    estimated = facts is None
    threads = facts.threads if facts and facts.threads else plan.threads
    registers = facts.registers if facts else min(255, tm * tn // 128 + 48)
    shared = facts.shared_bytes if facts else plan.shared_bytes
    blocks_per_sm = resident_blocks(registers, threads, shared, machine.sm)
    common = dict(
        blocks_per_sm=blocks_per_sm,
        occupancy=blocks_per_sm * ceil_div(threads, 32) / 64,
        work_efficiency=problem.macs / (blocks * tm * tn * depth),
        bytes_per_mac=(tm + tn) * problem.element_bytes / (tm * tn),
        registers=registers,
        estimated=estimated,
    )
    if blocks_per_sm == 0:
        return Prediction(ms=math.inf, bound="does not fit a multiprocessor", **common)
    per_sm = machine.wgmma_tflops * 1e12 / machine.multiprocessors
    waves = ceil_div(blocks, machine.multiprocessors * blocks_per_sm)
    # the resident blocks of a wave share their multiprocessor's tensor cores
    resident = min(blocks, machine.multiprocessors * blocks_per_sm)
    per_wave = ceil_div(resident, machine.multiprocessors) * 2 * tm * tn * depth
    terms = {
        "tensor cores": waves * per_wave / per_sm * 1e3,
        "l2": blocks
        * (tm + tn)
        * depth
        * problem.element_bytes
        / machine.l2_bytes_per_s
        * 1e3,
        "dram": problem.dram_bytes() / machine.dram_bytes_per_s * 1e3,
    }
    if config.splits > 1:  # the partial sums out and back in f32, a second kernel
        partials = 2 * config.splits * plan.m * plan.n * 4
        terms["dram"] += partials / machine.dram_bytes_per_s * 1e3
        terms["dram"] += machine.launch_seconds * 1e3
    bound = max(terms, key=lambda t: terms[t])
    ms = terms[bound] + machine.launch_seconds * 1e3
    return Prediction(ms=ms, bound=bound, terms=terms, **common)
