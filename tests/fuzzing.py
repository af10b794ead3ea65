"""A fuzzer for the two command lines: mutated modules from every level of the
default pipeline, fed to `affinec-opt` (alone, with pipelines, with `-t` targets) and
`affinec check`, must end in exit code 0, or exit code 1 with a located one-line error
(or `affinec check`'s FAILED verdict), within a time bound, and never in a traceback.

The seeds are the IR of a few small specs after every pass of the default pipeline
(`seeds()`); a mutation (`mutated_cases()`) edits one seed the way a hostile user
would: tokens deleted, duplicated, swapped or replaced, lines deleted, duplicated or
swapped, numbers and types changed, shapes altered, the text cut short. The tools run
in-process (their `main(argv)` with output captured), so an input takes milliseconds;
`run_case` bounds each with an alarm and a watchdog that ends the process if even the
alarm cannot fire (a hang inside C code).

    case = Case(seed, mutated_text, tool, argv)
    outcome = run_case(case, tmp_dir)
    assert outcome.problem is None, outcome.report()

`tests/test_fuzz.py` runs it under hypothesis: `HYPOTHESIS_PROFILE=ci` (what `make
test` runs) a small derandomized slice, `fuzz` for minutes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import fcntl
import functools
import io
import os
import pickle
import re
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from random import Random

from hypothesis import strategies as st
from xdsl.passes import ModulePass
from xdsl.printer import Printer
from xdsl.xdsl_opt_main import xDSLOptMain

from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec, Spec
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipeline_names import pass_text
from affinec.driver.pipelines import default_passes, wgmma_passes
from affinec.frontend.naive import build
from affinec.ir.context import make_context
from affinec.tools.cli import main as affinec_main
from affinec.tools.hopper_matmul import matmul_module
from affinec.tools.opt import main as opt_main

SEED_SPECS: tuple[Spec, ...] = (
    ConvSpec(n=1, c=2, h=5, w=5, k=2, r=3, s=3, padding=(1, 1)),
    ConvSpec(
        n=1,
        c=2,
        h=6,
        w=5,
        k=3,
        r=2,
        s=3,
        stride=(2, 1),
        dilation=(1, 2),
        padding=(1, 2),
        layout="nhwc",
        filter_layout="rsck",
        dtype="f16",
        epilogue="bias-relu",
    ),
    MatmulSpec(m=5, n=4, k=6, epilogue="relu"),
    OuterSpec(m=3, n=4, dtype="f16"),
)
"""Small specs, so that checking a mutated module takes milliseconds; each goes the
default pipeline's way (`affinec-default`)."""

TENSOR_CORE_SPEC = MatmulSpec(m=8, n=8, k=16, dtype="f16")
"""A spec that goes the way `affinec compile` takes it (`config_for`): for an f16
product, the tensor-core route (`mma.sync` warp bands, pipelined copies)."""
GROUPED_SPEC = ConvSpec(
    1, 32, 4, 4, 32, 1, 1, groups=2, layout="nhwc", filter_layout="rsck",
    dtype="f16", epilogue="bias,residual,relu",
)  # fmt: skip
"""Another on `config_for`'s tensor-core route: a group dimension folded into the
tiles, a composed epilogue through the staged output, the shared-memory planner."""

SPLIT_SPECS = (
    (MatmulSpec(m=8, n=8, k=48, dtype="f16", epilogue="relu"), 3),
    (ConvSpec(1, 6, 4, 4, 3, 3, 3, padding=1, epilogue="bias-relu"), 2),
)
"""Split reductions (`affinec-split-reduction`, config_for's configuration for the
split): two bands, then two kernels, a workspace argument; tensor cores and SIMT."""

TIME_BOUND = 30.0
"""Seconds an input may take before it counts as a hang. Inputs take well under a
second; the bound is generous for slow, shared CI machines."""

WATCHDOG = 4 * TIME_BOUND
"""Seconds after which the process is ended, with every thread's stack on stderr:
for a hang the alarm cannot interrupt (inside C code)."""


LEVELS = (
    "linalg", "naive", "tiled", "mapped", "mma", "gpu", "outlined", "lowered", "cf",
    "llvm",
)  # fmt: skip
"""The levels of the default pipeline, as the fuzzer groups its seeds: MLIR's named
linalg ops (the entrance, in the custom and the generic form); the naive IR;
tiled, split, sunk and promoted (grid/block bands); mapped to threads; `nvgpu` ops
at the affine level (the tensor-core route: async copies, warp bands of `mma.sync`);
a `gpu.launch`; outlined into a `gpu.func`; lowered affine (scf); cf; llvm + nvvm."""


def level_of(text: str) -> str:
    """The level (of `LEVELS`) of a module's text, from the ops it holds."""
    if "linalg." in text:
        return "linalg"
    if "llvm.func" in text:
        return "llvm"
    if "cf.br" in text or "cf.cond_br" in text:
        return "cf"
    if "gpu.func" in text:
        return "outlined" if "affine." in text else "lowered"
    if "gpu.launch" in text:
        return "gpu"
    if "nvgpu." in text:
        return "mma"
    if 'affinec.mapping = "thread"' in text:
        return "mapped"
    return "tiled" if "affinec.mapping" in text else "naive"


@dataclass(frozen=True)
class Seed:
    """A module printed after `after` (a pass, or `naive`), its level, and the
    passes the default pipeline still runs on it."""

    spec: str
    after: str
    text: str
    rest: tuple[str, ...]

    @property
    def level(self) -> str:
        return level_of(self.text)


SHARED_DIRECTORY = "AFFINEC_TESTS_SHARED"
"""The variable naming a directory the processes of one test run share (set by
tests/conftest.py under pytest-xdist): the seeds are built there once."""


@functools.cache
def seeds() -> tuple[Seed, ...]:
    """Every seed spec's IR after every pass of its pipeline: built by the first
    process of the run that asks (the others wait for it and read them), or here
    where no directory is shared."""
    shared = os.environ.get(SHARED_DIRECTORY)
    if not shared:
        return _built_seeds()
    path = Path(shared) / "fuzzing-seeds.pickle"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return pickle.loads(path.read_bytes())  # noqa: S301 -- this run's own
        found = _built_seeds()
        partial = path.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(found))
        partial.replace(path)
        return found


def _built_seeds() -> tuple[Seed, ...]:
    routes = [(spec, default_passes()) for spec in SEED_SPECS]
    for spec in (TENSOR_CORE_SPEC, GROUPED_SPEC):
        routes.append((spec, default_passes(config_for(spec))))
    for spec, splits in SPLIT_SPECS:
        routes.append((spec, default_passes(config_for(spec, splits=splits))))
    routes.append((DYNAMIC_SPEC, default_passes(config_for(DYNAMIC_SPEC))))
    found = [seed for spec, passes in routes for seed in _seeds(spec, passes)]
    return (*found, *_linalg_seeds(), *_hopper_seeds(), *_wgmma_route_seeds())


LINALG_OPS = (
    (
        "f16",
        "linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = "
        "dense<2> : tensor<2xi64>}",
        ((1, 9, 9, 16), (3, 3, 16, 16), (1, 4, 4, 16)),
    ),
    (
        "f32",
        "linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<[1, 2]> : "
        "tensor<2xi64>, strides = dense<1> : tensor<2xi64>}",
        ((1, 6, 6, 8), (3, 3, 8), (1, 4, 2, 8)),
    ),
    (
        "f32",
        "linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, "
        "strides = dense<[2, 1]> : tensor<2xi64>}",
        ((1, 2, 3, 7, 7), (2, 4, 3, 3, 3), (1, 2, 4, 3, 5)),
    ),
    ("f16", "linalg.matmul", ((16, 32), (32, 8), (16, 8))),
    ("f32", "linalg.batch_matmul", ((2, 4, 8), (2, 8, 4), (2, 4, 4))),
    (
        "f32",
        "linalg.conv_2d_nhwc_fhwc {dilations = dense<1> : tensor<2xi64>, "
        "strides = dense<[1, 2]> : tensor<2xi64>}",
        ((1, 6, 6, 3), (4, 3, 3, 3), (1, 4, 2, 4)),
    ),
)
"""Named ops as MLIR's front ends write them: a strided convolution for the tensor
cores, a dilated depthwise one, torch-mlir's grouped one, a product, a batched one
and TOSA's convolution (no spec)."""


def _linalg_seeds() -> list[Seed]:
    """Each of `LINALG_OPS` in a function that fills its output with zeros first, in
    MLIR's custom form and in its generic one (the op's body shown)."""
    found = []
    for dtype, op, shapes in LINALG_OPS:
        x, w, y = (f"memref<{'x'.join(map(str, s))}x{dtype}>" for s in shapes)
        text = (
            f"func.func @f(%x: {x}, %w: {w}, %y: {y}) {{\n"
            f"  %zero = arith.constant 0.0 : {dtype}\n"
            f"  linalg.fill ins(%zero : {dtype}) outs(%y : {y})\n"
            f"  {op} ins(%x, %w : {x}, {w}) outs(%y : {y})\n"
            "  func.return\n}\n"
        )
        generic = io.StringIO()
        Printer(generic, print_generic_format=True).print_op(
            parse_module(make_context(), text)
        )
        rest = ("affinec-lower-linalg", "affinec-default")
        found += [
            Seed(op.split()[0], form, printed, rest)
            for form, printed in (("custom", text), ("generic", generic.getvalue()))
        ]
    return found


DYNAMIC_SPEC = ConvSpec(
    2, 16, 4, 4, 16, 3, 3, padding=1, dtype="f16", layout="nhwc",
    filter_layout="rsck", epilogue="bias,residual,relu", dynamic_batch=True,
)  # fmt: skip
"""A convolution of any batch on the tensor cores: `memref<?x...>`, the batch a
symbol, `in_bounds` on the padded loads, a grid sized by `memref.dim`."""


HOPPER_ROUTE = (
    "nvvm-attach-target{chip=sm_90a},convert-nvgpu-to-nvvm,convert-scf-to-cf,"
    "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}"
)


def _hopper_seeds() -> list[Seed]:
    """The Hopper matmul (TMA, mbarriers, wgmma; two blocks, two stages) after each
    pass of its lowering: seeds of the lowered, cf and llvm levels."""
    text = matmul_module(128, 32, 128, 2, 64, 32)
    passes = Pipeline.parse(HOPPER_ROUTE).passes
    texts = [("hopper", text)]

    def record(p: ModulePass, m, seconds: float) -> None:
        texts.append((pass_text(p), str(m)))

    Pipeline(passes).run(parse_module(make_context(), text), callback=record)
    names = [pass_text(p) for p in passes]
    return [
        Seed("hopper matmul 128x32x128", after, printed, tuple(names[k:]))
        for k, (after, printed) in enumerate(texts)
    ]


WGMMA_SPEC = ConvSpec(
    1, 128, 8, 8, 16, 3, 3, stride=2, padding=1, dtype="f16", layout="nhwc",
    filter_layout="rsck", epilogue="bias-relu",
)  # fmt: skip
"""The seed of `affinec-wgmma-gemm`'s own route: a strided convolution tap by tap
(5-D TMA boxes of the input's phases), two multiplying warpgroups (`cooperative`),
split-K (the workspace and the kernel that adds the partial sums)."""


def _wgmma_route_seeds() -> list[Seed]:
    """The spec route after each of its passes (the nvvm target first)."""
    config = config_for(WGMMA_SPEC, arch="sm_90a", wgmma=True, splits=2)
    config = dataclasses.replace(
        config, wgmma_tile=(128, 16), wgmma_schedule="cooperative"
    )
    passes = [
        *Pipeline.parse("nvvm-attach-target{chip=sm_90a}").passes,
        *wgmma_passes(config),
    ]
    return _seeds(WGMMA_SPEC, passes)


def _seeds(spec: Spec, passes: list[ModulePass]) -> list[Seed]:
    texts = [("naive", str(build(spec)))]

    def record(p: ModulePass, m, seconds: float) -> None:
        texts.append((pass_text(p), str(m)))

    Pipeline(passes).run(build(spec), callback=record)
    names = [pass_text(p) for p in passes]
    return [
        Seed(spec.to_text(), after, text, tuple(names[k:]))
        for k, (after, text) in enumerate(texts)
    ]


# -- mutations ----------------------------------------------------------------------------

TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"?'  # a string literal, maybe unterminated
    r"|[%^@#!][\w.$-]+"  # SSA values, blocks, symbols, aliases
    r"|-?\d+(?:\.\d+)?(?:e[+-]?\d+)?"  # numbers
    r"|[A-Za-z_][\w.$]*"  # words: op names, types, keywords
    r"|->|\S"  # punctuation
)
NUMBER = re.compile(r"(?<![\w.%^@#$])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])")
TYPE = re.compile(
    r"\b(?:f16|bf16|f32|f64|i1|i8|i16|i32|i64|index|tf32|f8E4M3FN|f80|f128)\b"
)
SHAPE = re.compile(r"(?<=[<x])\d+(?=x)")
INFIX = re.compile(r" (?:\+|-|\*|floordiv|ceildiv|mod) ")

INTEGERS = (
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "-8",
    "255",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551616",
    "100000000000000000000000000000",
)
FLOATS = ("1.5", "0.0", "-0.0", "1e300", "-3.4e38", "6.1e-5", "0x7FC00000")
TYPES = (
    "f16",
    "bf16",
    "f32",
    "f64",
    "i1",
    "i8",
    "i16",
    "i32",
    "i64",
    "i3",
    "i128",
    "index",
    "tf32",
    "f8E4M3FN",
    "f80",
    "f128",
    "complex<f32>",
    "vector<4xf32>",
    "none",
    "memref<?xf32>",
    "memref<4xf32, 3>",
    "!llvm.ptr",
)
FRAGMENTS = (
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "<",
    ">",
    ",",
    ":",
    "=",
    "->",
    '"',
    '"unterminated',
    "%undefined",
    "^bb9",
    "@missing",
    "#map",
    "d0 * d1",
    "d0 floordiv d1",
    "d1 mod d0",
    "s0 * d0",
    " * %i",
    " floordiv 0",
    " mod 0",
    " ceildiv -1",
    "{affinec.mapping = 3}",
    '{affinec.mapping = "bogus"}',
    '{affinec.mapping = "thread"}',
    '{affinec.mapping = "grid"}',
    "affine.yield",
    "func.return",
    "gpu.barrier",
    "llvm.return",
    "cf.br ^bb0",
    "%zero = arith.constant 0 : index",
    "%q = arith.divsi %zero, %zero : index",
    "memref<1000000000x1000000000xf32>",
    "memref<0xf32>",
    "dense<1.0>",
    "loc(unknown)",
    "// comment",
    "\\",
    "\x00",
)


def _tokens(text: str) -> list[re.Match[str]]:
    return list(TOKEN.finditer(text))


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def _pick(rnd: Random, matches: list[re.Match[str]]) -> re.Match[str] | None:
    return rnd.choice(matches) if matches else None


def delete_token(rnd: Random, text: str) -> str:
    m = _pick(rnd, _tokens(text))
    return text if m is None else _splice(text, m.start(), m.end(), "")


def duplicate_token(rnd: Random, text: str) -> str:
    m = _pick(rnd, _tokens(text))
    return text if m is None else _splice(text, m.end(), m.end(), " " + m.group())


def replace_token(rnd: Random, text: str) -> str:
    """A token replaced by any other token of the text (a keyword by a value...)."""
    tokens = _tokens(text)
    m, other = _pick(rnd, tokens), _pick(rnd, tokens)
    if m is None or other is None:
        return text
    return _splice(text, m.start(), m.end(), other.group())


def _kind(token: str) -> str:
    """A token's class: SSA value, block, symbol, string, number, word, punctuation."""
    if token[0] in '%^@#!"':
        return token[0]
    if token[0].isdigit() or (token[0] == "-" and token[1:2].isdigit()):
        return "0"
    return "a" if token[0].isalpha() or token[0] == "_" else "."


def replace_like_token(rnd: Random, text: str) -> str:
    """A token replaced by another of its class (a value by another value, an op name
    by another word): edits that often still parse, and reach the passes."""
    tokens = _tokens(text)
    m = _pick(rnd, tokens)
    if m is None:
        return text
    like = [t for t in tokens if _kind(t.group()) == _kind(m.group())]
    other = _pick(rnd, like)
    assert other is not None
    return _splice(text, m.start(), m.end(), other.group())


def swap_tokens(rnd: Random, text: str) -> str:
    tokens = _tokens(text)
    a, b = _pick(rnd, tokens), _pick(rnd, tokens)
    if a is None or b is None or a.start() == b.start():
        return text
    a, b = sorted((a, b), key=lambda m: m.start())
    return (
        text[: a.start()]
        + b.group()
        + text[a.end() : b.start()]
        + a.group()
        + text[b.end() :]
    )


def insert_fragment(rnd: Random, text: str) -> str:
    """A piece of syntax that breaks things in known ways, somewhere."""
    at = rnd.randint(0, len(text))
    return _splice(text, at, at, rnd.choice(FRAGMENTS))


def change_number(rnd: Random, text: str) -> str:
    m = _pick(rnd, list(NUMBER.finditer(text)))
    if m is None:
        return text
    if rnd.random() < 0.1 or any(c in m.group() for c in ".e"):
        new = rnd.choice(FLOATS)  # mostly where a float was
    elif rnd.random() < 0.6:
        new = rnd.choice(INTEGERS)
    else:
        new = str(rnd.randint(-(2 ** rnd.randint(1, 70)), 2 ** rnd.randint(1, 70)))
    return _splice(text, m.start(), m.end(), new)


def change_type(rnd: Random, text: str) -> str:
    m = _pick(rnd, list(TYPE.finditer(text)))
    if m is None:
        return text
    return _splice(text, m.start(), m.end(), rnd.choice(TYPES))


def change_shape(rnd: Random, text: str) -> str:
    m = _pick(rnd, list(SHAPE.finditer(text)))
    if m is None:
        return text
    new = rnd.choice(("0", "1", "3", "?", "1000000", "99999999999"))
    return _splice(text, m.start(), m.end(), new)


def change_operator(rnd: Random, text: str) -> str:
    """An affine or arithmetic infix operator changed: `+` into `*`, `floordiv`..."""
    m = _pick(rnd, list(INFIX.finditer(text)))
    if m is None:
        return text
    new = rnd.choice((" + ", " - ", " * ", " floordiv ", " ceildiv ", " mod "))
    return _splice(text, m.start(), m.end(), new)


def _lines(rnd: Random, text: str) -> tuple[list[str], int]:
    lines = text.splitlines(keepends=True)
    return lines, rnd.randrange(max(len(lines), 1))


def delete_line(rnd: Random, text: str) -> str:
    lines, k = _lines(rnd, text)
    return "".join(lines[:k] + lines[k + 1 :])


def duplicate_line(rnd: Random, text: str) -> str:
    lines, k = _lines(rnd, text)
    return "".join(lines[: k + 1] + lines[k:])


def swap_lines(rnd: Random, text: str) -> str:
    lines, k = _lines(rnd, text)
    j = rnd.randrange(max(len(lines), 1))
    if lines:
        lines[k], lines[j] = lines[j], lines[k]
    return "".join(lines)


def truncate(rnd: Random, text: str) -> str:
    return text[: rnd.randint(0, len(text))]


Mutation = Callable[[Random, str], str]

MUTATIONS: tuple[Mutation, ...] = (
    delete_token,
    duplicate_token,
    replace_token,
    replace_like_token,
    replace_like_token,
    swap_tokens,
    insert_fragment,
    change_number,
    change_number,
    change_number,
    change_number,
    change_type,
    change_type,
    change_shape,
    change_shape,
    change_operator,
    change_operator,
    delete_line,
    duplicate_line,
    swap_lines,
    truncate,
)
"""Each edits a text, choosing positions and replacements uniformly (hypothesis's
own draws favour small numbers, so the first lines). The edits that keep
the text parseable (numbers, tokens of a kind) come more often: they reach the
verifiers, the passes, the interpreter and the emitter."""


# -- commands -----------------------------------------------------------------------------

XDSL_TARGETS = tuple(sorted(set(xDSLOptMain(args=[]).available_targets) - {"llvm"}))
"""The `-t` targets of plain xdsl-opt (affinec-opt has them, with ours)."""


@dataclass(frozen=True)
class Case:
    """One input: a mutated seed and the command run on it."""

    seed: Seed | None
    """What it was mutated from (None for a case written by hand)."""
    text: str
    tool: str
    """`affinec-opt` or `affinec`."""
    argv: tuple[str, ...]
    """Arguments after the input file (for `affinec`, `check` comes first)."""

    def command(self, path: str) -> list[str]:
        if self.tool == "affinec":
            return ["check", path, *self.argv]
        return [path, *self.argv]

    def shell(self) -> str:
        import shlex

        return shlex.join([self.tool, *self.command("input.mlir")])


@st.composite
def commands(draw, seed: Seed) -> tuple[str, tuple[str, ...]]:
    """A command line that reads a module of the seed's level."""
    rest = ",".join(seed.rest)
    choices: list[tuple[str, tuple[str, ...]]] = [("affinec-opt", ())]
    if seed.rest:
        choices += [
            ("affinec-opt", ("-p", seed.rest[0])),
            ("affinec-opt", ("-p", rest)),
            ("affinec-opt", ("-p", rest, "-t", "ptx")),
            ("affinec", ("-p", rest)),
        ]
    else:
        choices += [
            ("affinec-opt", ("-t", "ptx")),
            ("affinec-opt", ("-t", "llvm")),
            ("affinec", ()),
        ]
    # xDSL's other targets are refused before the input is read: now and then.
    others = draw(st.sampled_from(XDSL_TARGETS))
    target = draw(st.sampled_from(("ptx", "llvm", "ptx{arch=sm_90}", "mlir", others)))
    choices.append(("affinec-opt", ("-t", target)))
    return draw(st.sampled_from(choices))


@st.composite
def mutated_cases(draw, level: str | None = None) -> Case:
    """A seed (of `level`, or any), mutated one to three times, and a command to
    run on it."""
    pool = [s for s in seeds() if level is None or s.level == level]
    seed = draw(st.sampled_from(pool))
    rnd = draw(st.randoms(use_true_random=False))
    text = seed.text
    for _ in range(rnd.choice((1, 1, 1, 2, 2, 3))):
        text = rnd.choice(MUTATIONS)(rnd, text)
    tool, argv = draw(commands(seed))
    return Case(seed, text, tool, argv)


# -- running ------------------------------------------------------------------------------


class Hang(BaseException):
    """Raised by the alarm in an input that ran past `TIME_BOUND`. A BaseException,
    so that no `except Exception` in the tools swallows it."""


LOCATED = re.compile(r"^\S+:\d+:\d+: error: \S", re.M)
UNLOCATED = re.compile(r"^error: \S", re.M)


@dataclass(frozen=True)
class Outcome:
    case: Case
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    problem: str | None
    """None when the outcome keeps the promise; else what went wrong."""

    def report(self) -> str:
        seed = self.case.seed
        origin = "written by hand"
        if seed is not None:
            origin = f"seed: {seed.spec} after {seed.after} ({seed.level})"
        return (
            f"{self.problem} after {self.seconds:.1f} s\n{origin}\n"
            f"command: {self.case.shell()}\n"
            f"exit code: {self.code}\n--- stderr ---\n{self.stderr[-3000:]}\n"
            f"--- input ---\n{self.case.text}"
        )


def judge(case: Case, code: int | None, stdout: str, stderr: str) -> str | None:
    """What is wrong with an outcome, or None: exit 0, or exit 1 with a one-line
    error (located when it is about the input's IR) or a FAILED check verdict."""
    if "Traceback" in stderr or "Traceback" in stdout:
        return "a traceback"
    if "internal error" in stderr:
        return "an internal error"
    if code == 0:
        return None
    if code != 1:
        return f"exit code {code}"
    if LOCATED.search(stderr) or UNLOCATED.search(stderr):
        return None
    if case.tool == "affinec" and "FAILED" in stdout:
        return None
    return "exit code 1 without an error message"


def run_case(case: Case, directory: Path) -> Outcome:
    """Run `case`'s tool in-process on its text, bounded in time."""
    path = directory / "input.mlir"
    path.write_text(case.text, errors="surrogateescape")
    main = affinec_main if case.tool == "affinec" else opt_main
    stdout, stderr = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    code: int | None = None
    problem: str | None = None
    with (
        _time_bound(),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        warnings.catch_warnings(),  # xDSL's targets warn about foreign modules
    ):
        warnings.simplefilter("ignore")
        try:
            code = main(case.command(str(path)))
        except Hang:
            problem = f"a hang (over {TIME_BOUND:g} s)"
            stderr.write(traceback.format_exc())
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
            if e.code not in (0, 1, 2, None):
                problem = f"exit code {e.code}"
        except BaseException:  # noqa: BLE001 -- anything escaping is the finding
            problem = "a traceback"
            stderr.write(traceback.format_exc())
    seconds = time.perf_counter() - start
    out, err = stdout.getvalue(), stderr.getvalue()
    if problem is None:
        problem = judge(case, code, out, err)
    return Outcome(case, code, out, err, seconds, problem)


@contextlib.contextmanager
def _time_bound():
    def alarm(signum, frame):
        raise Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_BOUND)
    faulthandler.dump_traceback_later(WATCHDOG, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
