"""affinec's interpreter against MLIR's own execution (mlir-opt 22 lowering to the
llvm dialect, `mlir-runner` running it on the CPU): the same module, the same
inputs, the same bits out.

Every proof of a pass compares the interpreter with itself, one level against the
one before, and the naive level against a float64 reference within a tolerance.
These tests check the interpreter against an executor it shares nothing with:
- random arith, math and scf programs over every integer and float type, and on
  vectors (each op's rounding, wrapping, NaN and signed-zero rules);
- the same programs as kernels lowered by affinec's `convert-gpu-to-nvvm` (MLIR
  runs affinec's llvm-level kernel, so the lowering meets an executor of its own);
- the host levels of the default pipeline (the naive IR and each affine pass's
  output until the first GPU op) taken through affinec's `lower-affine`;
- whole compiled SIMT kernels whose threads never meet, run by MLIR one thread
  after the other.
Skipped where mlir-opt 22 or its runner is absent.
"""

from __future__ import annotations

import io
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mlir_opt import mlir_opt, parse, printed
from mlir_runner import needs_mlir_runner, run_with_mlir
from xdsl.dialects import arith, func, llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    ModuleOp,
    StringAttr,
    bf16,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.printer import Printer

from affinec.base.diagnostics import verify
from affinec.base.dtypes import numpy_dtype
from affinec.base.spec import ConvSpec
from affinec.dialects import gpu
from affinec.dialects.affinec import MAPPING
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import (
    ConvertGpuToNvvm,
    ConvertScfToCf,
    LowerAffine,
    default_passes,
)
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import poisoned_output, random_inputs
from affinec.interpreter import Interpreter
from affinec.testing import kernel_configs, specs
from strategies import examples, mma_cases, with_nans

pytestmark = needs_mlir_runner

INTS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
FLOATS = ["f16", "bf16", "f32", "f64"]
"""The integer types and their widths; the float types."""
WIDER_INT = [
    ("i8", "i16"),
    ("i8", "i32"),
    ("i16", "i32"),
    ("i16", "i64"),
    ("i32", "i64"),
]
WIDER_FLOAT = [
    ("f16", "f32"),
    ("f16", "f64"),
    ("bf16", "f32"),
    ("bf16", "f64"),
    ("f32", "f64"),
]
SAME_WIDTH = [("i16", "f16"), ("i16", "bf16"), ("i32", "f32"), ("i64", "f64")]
CMPI = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
CMPF = [
    "false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
    "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true",
]  # fmt: skip
INT_OPS = [
    "addi",
    "subi",
    "muli",
    "andi",
    "ori",
    "xori",
    "maxsi",
    "minsi",
    "maxui",
    "minui",
]
DIVISIONS = ["divsi", "remsi", "floordivsi", "ceildivsi", "divui", "remui", "ceildivui"]
SHIFTS = ["shli", "shrsi", "shrui"]
FLOAT_OPS = ["addf", "subf", "mulf", "divf", "maximumf", "minimumf"]
EITHER_ZERO = ["maxnumf", "minnumf"]
"""Which zero these return for -0 and +0 is unspecified (LLVM's maxnum/minnum)."""
TYPES = {
    "i8": i8,
    "i16": i16,
    "i32": i32,
    "i64": i64,
    "f16": f16,
    "bf16": bf16,
    "f32": f32,
    "f64": f64,
}
INPUTS = 4
"""Values of each type a program loads."""


class Program:
    """A function `@f` being written: one input buffer of `INPUTS`
    values and one output buffer per type; every value it makes is stored."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.pools: dict[str, list[str]] = {
            t: [] for t in [*INTS, *FLOATS, "i1", "index"]
        }
        self.stored: dict[str, int] = {t: 0 for t in [*INTS, *FLOATS]}
        self.stores: list[tuple[str, str, int, str | None]] = []
        """(value, element type, position, the value's vector type or None)"""
        self.count = 0
        for k in range(INPUTS):
            self.lines.append(f"%c{k} = arith.constant {k} : index")
        for t in [*INTS, *FLOATS]:
            for k in range(INPUTS):
                self.pools[t].append(
                    self.op(f"memref.load %in_{t}[%c{k}] : memref<{INPUTS}x{t}>")
                )

    def op(self, text: str) -> str:
        name = f"%v{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {text}")
        return name

    def constant(self, value: int | float, t: str) -> str:
        return self.op(f"arith.constant {value} : {t}")

    def keep(self, value: str, t: str) -> None:
        """`value` joins its pool and is stored (an i1 as an i8, an index as an i64,
        a vector with `vector.store`, a 2-D one row by row)."""
        self.pools.setdefault(t, []).append(value)
        if t.startswith("vector<"):
            shape, element = _vector_shape(t)
            rows = [value]
            if len(shape) == 2:
                row_type = f"vector<{shape[1]}x{element}>"
                rows = [
                    self.op(f"vector.extract {value}[{i}] : {row_type} from {t}")
                    for i in range(shape[0])
                ]
            for row in rows:
                # at a multiple of its size: the GPU faults on a misaligned vector
                at = -(-self.stored[element] // shape[-1]) * shape[-1]
                self.stores.append((row, element, at, t))
                self.stored[element] = at + shape[-1]
            return
        if t == "i1":
            value, t = self.op(f"arith.extui {value} : i1 to i8"), "i8"
            self.pools[t].append(value)
        elif t == "index":
            value, t = self.op(f"arith.index_cast {value} : index to i64"), "i64"
            self.pools[t].append(value)
        self.stores.append((value, t, self.stored[t], None))
        self.stored[t] += 1

    def _parameters(self) -> list[tuple[str, str]]:
        sizes = self.output_sizes()
        return [(f"%in_{t}", f"memref<{INPUTS}x{t}>") for t in [*INTS, *FLOATS]] + [
            (f"%out_{t}", f"memref<{n}x{t}>") for t, n in sizes.items()
        ]

    def _body(self, terminator: str) -> str:
        sizes = self.output_sizes()
        stores = [
            f"%s{t}_{k} = arith.constant {k} : index\n    "
            + (
                f"memref.store {value}, %out_{t}[%s{t}_{k}] : memref<{sizes[t]}x{t}>"
                if vector_type is None
                else f"vector.store {value}, %out_{t}[%s{t}_{k}] : "
                f"memref<{sizes[t]}x{t}>, vector<{_vector_shape(vector_type)[0][-1]}x{t}>"
            )
            for value, t, k, vector_type in self.stores
        ]
        return "\n    ".join([*self.lines, *stores, terminator])

    def text(self) -> str:
        """A module with the program as `func.func @f`."""
        params = ", ".join(f"{name}: {t}" for name, t in self._parameters())
        body = self._body("func.return")
        return f"builtin.module {{\n  func.func @f({params}) {{\n    {body}\n  }}\n}}\n"

    def kernel_text(self) -> str:
        """A module whose `func.func @f` launches the program, a kernel, on one
        thread."""
        params = ", ".join(f"{name}: {t}" for name, t in self._parameters())
        args = ", ".join(f"{name} : {t}" for name, t in self._parameters())
        body = self._body("gpu.return")
        return (
            "builtin.module attributes {gpu.container_module} {\n"
            f"  func.func @f({params}) {{\n"
            "    %one = arith.constant 1 : index\n"
            "    gpu.launch_func @k::@f blocks in (%one, %one, %one) threads in "
            f"(%one, %one, %one) args({args})\n"
            "    func.return\n  }\n"
            f"  gpu.module @k {{\n  gpu.func @f({params}) kernel {{\n    {body}\n  }}\n  }}\n"
            "}\n"
        )

    def output_sizes(self) -> dict[str, int]:
        return {t: max(n, 1) for t, n in self.stored.items()}


VECTOR_SHAPES = [(2,), (4,), (2, 2), (4, 2)]
VECTOR_FLOATS = ["f16", "bf16", "f32"]
"""The vectors the programs make: of the kernels' float types, 1-D and 2-D (LLVM
arrays of 1-D vectors once lowered)."""


def _vector_type(shape: tuple[int, ...], element: str) -> str:
    return f"vector<{'x'.join(map(str, shape))}x{element}>"


def _vector_shape(t: str) -> tuple[tuple[int, ...], str]:
    *dims, element = t.removeprefix("vector<").removesuffix(">").split("x")
    return tuple(int(d) for d in dims), element


def _write_vector_op(p: Program, data: st.DataObject) -> None:
    """One random op on vectors (`vector.load`, `broadcast`, `insert`, `extract`,
    elementwise arith and `math.fma`, float casts); every vector made is stored."""
    element = data.draw(st.sampled_from(VECTOR_FLOATS))
    shape = data.draw(st.sampled_from(VECTOR_SHAPES))
    vt = _vector_type(shape, element)
    row = _vector_type(shape[-1:], element)
    vectors = lambda t: p.pools.get(t, [])  # noqa: E731
    kind = data.draw(
        st.sampled_from(
            ["load", "broadcast", "insert", "extract", "float", "fma", "cast"]
        )
    )
    if kind not in ("load", "broadcast") and not vectors(vt):
        kind = "broadcast"
    pick = lambda t: data.draw(st.sampled_from(vectors(t)))  # noqa: E731
    match kind:
        case "load" if len(shape) == 1:
            at = data.draw(st.sampled_from(range(0, INPUTS, shape[0])))  # aligned
            p.keep(
                p.op(
                    f"vector.load %in_{element}[%c{at}] : memref<{INPUTS}x{element}>, {vt}"
                ),
                vt,
            )
        case "load" | "broadcast":  # of a scalar (affinec broadcasts no vector)
            scalar = data.draw(st.sampled_from(p.pools[element]))
            p.keep(p.op(f"vector.broadcast {scalar} : {element} to {vt}"), vt)
        case "insert":
            if len(shape) == 2 and vectors(row) and data.draw(st.booleans()):
                at = data.draw(st.integers(0, shape[0] - 1))
                p.keep(
                    p.op(
                        f"vector.insert {pick(row)}, {pick(vt)} [{at}] : {row} into {vt}"
                    ),
                    vt,
                )
            else:
                at = ", ".join(str(data.draw(st.integers(0, d - 1))) for d in shape)
                scalar = data.draw(st.sampled_from(p.pools[element]))
                p.keep(
                    p.op(
                        f"vector.insert {scalar}, {pick(vt)} [{at}] : {element} into {vt}"
                    ),
                    vt,
                )
        case "extract":
            at = ", ".join(str(data.draw(st.integers(0, d - 1))) for d in shape)
            p.keep(
                p.op(f"vector.extract {pick(vt)}[{at}] : {element} from {vt}"), element
            )
        case "float":
            name = data.draw(st.sampled_from(FLOAT_OPS))
            p.keep(p.op(f"arith.{name} {pick(vt)}, {pick(vt)} : {vt}"), vt)
        case "fma" if element == "f32":
            p.keep(p.op(f"math.fma {pick(vt)}, {pick(vt)}, {pick(vt)} : {vt}"), vt)
        case "fma" | "cast":  # (an fma of f16 or bf16 would round twice on MLIR's side)
            if element == "f32":
                narrow = _vector_type(
                    shape, data.draw(st.sampled_from(["f16", "bf16"]))
                )
                p.keep(p.op(f"arith.truncf {pick(vt)} : {vt} to {narrow}"), narrow)
            else:
                wide = _vector_type(shape, "f32")
                p.keep(p.op(f"arith.extf {pick(vt)} : {vt} to {wide}"), wide)


def _signed_min(t: str) -> int:
    return -(2 ** (INTS[t] - 1))


KINDS = [
    "int", "division", "shift", "cmpi", "select", "int cast", "index", "float",
    "either zero", "negf", "fma", "cmpf", "float cast", "int to float", "float to int",
    "bitcast", "if", "loop",
]  # fmt: skip


def _write_op(p: Program, data: st.DataObject) -> None:
    """One random op (with the guards that keep it defined) on values of the
    pools."""

    def choose(options: list[str]) -> str:
        return data.draw(st.sampled_from(options))

    pick = lambda t: data.draw(st.sampled_from(p.pools[t]))  # noqa: E731
    kind = choose(KINDS)
    it = data.draw(st.sampled_from(list(INTS)))
    ft = data.draw(st.sampled_from(list(FLOATS)))
    match kind:
        case "int":
            name = data.draw(st.sampled_from(INT_OPS))
            p.keep(p.op(f"arith.{name} {pick(it)}, {pick(it)} : {it}"), it)
        case "division":
            name = choose(DIVISIONS)
            a, b = pick(it), pick(it)
            bad = p.op(f"arith.cmpi eq, {b}, {p.constant(0, it)} : {it}")
            if not name.endswith("ui"):  # the most negative value over -1 overflows
                m1 = p.op(f"arith.cmpi eq, {b}, {p.constant(-1, it)} : {it}")
                low = p.op(
                    f"arith.cmpi eq, {a}, {p.constant(_signed_min(it), it)} : {it}"
                )
                both = p.op(f"arith.andi {m1}, {low} : i1")
                bad = p.op(f"arith.ori {bad}, {both} : i1")
            safe = p.op(f"arith.select {bad}, {p.constant(1, it)}, {b} : {it}")
            p.keep(p.op(f"arith.{name} {a}, {safe} : {it}"), it)
        case "shift":
            name = data.draw(st.sampled_from(SHIFTS))
            amount = p.op(f"arith.remui {pick(it)}, {p.constant(INTS[it], it)} : {it}")
            p.keep(p.op(f"arith.{name} {pick(it)}, {amount} : {it}"), it)
        case "cmpi":
            predicate = data.draw(st.sampled_from(CMPI))
            p.keep(p.op(f"arith.cmpi {predicate}, {pick(it)}, {pick(it)} : {it}"), "i1")
        case "select":
            if not p.pools["i1"]:
                return
            t = data.draw(st.sampled_from([it, ft]))
            p.keep(p.op(f"arith.select {pick('i1')}, {pick(t)}, {pick(t)} : {t}"), t)
        case "int cast":
            narrow, wide = data.draw(st.sampled_from(WIDER_INT))
            match data.draw(st.sampled_from(["extsi", "extui", "trunci"])):
                case "trunci":
                    p.keep(
                        p.op(f"arith.trunci {pick(wide)} : {wide} to {narrow}"), narrow
                    )
                case ext:
                    p.keep(
                        p.op(f"arith.{ext} {pick(narrow)} : {narrow} to {wide}"), wide
                    )
        case "index":
            a = p.op(f"arith.index_cast {pick(it)} : {it} to index")
            b = data.draw(st.sampled_from([*p.pools["index"], a]))
            name = data.draw(
                st.sampled_from(["addi", "subi", "muli", "maxsi", "minsi"])
            )
            p.keep(p.op(f"arith.{name} {a}, {b} : index"), "index")
        case "float":
            name = data.draw(st.sampled_from(FLOAT_OPS))
            p.keep(p.op(f"arith.{name} {pick(ft)}, {pick(ft)} : {ft}"), ft)
        case "either zero":
            name = data.draw(st.sampled_from(EITHER_ZERO))
            value = p.op(f"arith.{name} {pick(ft)}, {pick(ft)} : {ft}")
            # + 0.0 makes either zero +0 and leaves every other value as it is.
            zero = p.constant(0.0, ft)
            p.keep(p.op(f"arith.addf {value}, {zero} : {ft}"), ft)
        case "negf":
            p.keep(p.op(f"arith.negf {pick(ft)} : {ft}"), ft)
        case "fma":
            # MLIR on the CPU computes an f16 or bf16 fma in f32 and rounds twice;
            # the GPU (and the interpreter) round once: only f32 and f64 compare.
            t = data.draw(st.sampled_from(["f32", "f64"]))
            p.keep(p.op(f"math.fma {pick(t)}, {pick(t)}, {pick(t)} : {t}"), t)
        case "cmpf":
            predicate = data.draw(st.sampled_from(CMPF))
            p.keep(p.op(f"arith.cmpf {predicate}, {pick(ft)}, {pick(ft)} : {ft}"), "i1")
        case "float cast":
            narrow, wide = data.draw(st.sampled_from(WIDER_FLOAT))
            if data.draw(st.booleans()):
                p.keep(p.op(f"arith.extf {pick(narrow)} : {narrow} to {wide}"), wide)
            else:
                p.keep(p.op(f"arith.truncf {pick(wide)} : {wide} to {narrow}"), narrow)
        case "if":
            # a value from one of two ops, by a condition (branches and block
            # arguments once lowered to cf)
            if not p.pools["i1"]:
                return
            t = data.draw(st.sampled_from([it, ft]))
            a, b = pick(t), pick(t)
            then = data.draw(st.sampled_from(INT_OPS if t in INTS else FLOAT_OPS))
            p.keep(
                p.op(
                    f"scf.if {pick('i1')} -> ({t}) {{\n"
                    f"      %then = arith.{then} {a}, {b} : {t}\n"
                    f"      scf.yield %then : {t}\n"
                    f"    }} else {{\n      scf.yield {b} : {t}\n    }}"
                ),
                t,
            )
        case "loop":
            # a value carried through 0 to 4 iterations of one op
            t = data.draw(st.sampled_from([it, ft]))
            step = data.draw(st.sampled_from(INT_OPS if t in INTS else FLOAT_OPS))
            trips = p.constant(data.draw(st.integers(0, 4)), "index")
            zero, one = p.constant(0, "index"), p.constant(1, "index")
            p.keep(
                p.op(
                    f"scf.for %i = {zero} to {trips} step {one} "
                    f"iter_args(%carried = {pick(t)}) -> ({t}) {{\n"
                    f"      %next = arith.{step} %carried, {pick(t)} : {t}\n"
                    f"      scf.yield %next : {t}\n    }}"
                ),
                t,
            )
        case "bitcast":
            # A NaN's payload is not kept the same way by every executor (nor
            # compared): only integers become floats here.
            i, f = data.draw(st.sampled_from(SAME_WIDTH))
            p.keep(p.op(f"arith.bitcast {pick(i)} : {i} to {f}"), f)
        case "int to float":
            name = choose(["sitofp", "uitofp"])
            p.keep(p.op(f"arith.{name} {pick(it)} : {it} to {ft}"), ft)
        case "float to int":
            # Defined only for a number that fits: NaN becomes 0, the rest is clamped.
            signed = data.draw(st.booleans())
            x = pick(ft)
            nan = p.op(f"arith.cmpf uno, {x}, {x} : {ft}")
            x = p.op(f"arith.select {nan}, {p.constant(0.0, ft)}, {x} : {ft}")
            bound = 2.0 ** min(INTS[it] - 2, 14 if ft == "f16" else 62)
            x = p.op(f"arith.minimumf {x}, {p.constant(bound, ft)} : {ft}")
            x = p.op(
                f"arith.maximumf {x}, {p.constant(-bound if signed else 0.0, ft)} : {ft}"
            )
            name = "fptosi" if signed else "fptoui"
            p.keep(p.op(f"arith.{name} {x} : {ft} to {it}"), it)


def _numpy_dtype(t: str) -> np.dtype:
    return numpy_dtype(TYPES[t])


def _int_values(t: str, rng: np.random.Generator) -> np.ndarray:
    bits = INTS[t]
    special = [0, 1, -1, _signed_min(t), -_signed_min(t) - 1, 2, 3, -7]
    dtype = np.dtype(f"int{bits}")
    values = rng.choice(special, INPUTS).astype(dtype)
    raw = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, INPUTS, dtype=dtype)
    return np.where(rng.random(INPUTS) < 0.5, values, raw).astype(dtype)


def _float_values(t: str, rng: np.random.Generator) -> np.ndarray:
    dtype = _numpy_dtype(t)
    special = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 3.0, 1e-6, 1e-40, 65504.0]
    values = np.array(rng.choice(special, INPUTS), np.float64)
    normal = rng.standard_normal(INPUTS) * 10.0 ** rng.integers(-8, 8, INPUTS)
    with np.errstate(over="ignore"):  # large values are infinities in f16
        return np.where(rng.random(INPUTS) < 0.5, values, normal).astype(dtype)


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Bit for bit, but any NaN is any other (the payload of a NaN is not part of
    any semantics affinec keeps)."""
    if got.dtype.kind in "iu":
        return got.tobytes() == want.tobytes()
    nan = np.isnan(got)
    if not np.array_equal(nan, np.isnan(want)):
        return False
    return got[~nan].tobytes() == want[~nan].tobytes()


def _program_arrays(p: Program, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    inputs = [_int_values(t, rng) for t in INTS] + [
        _float_values(t, rng) for t in FLOATS
    ]
    outputs = [np.zeros(n, _numpy_dtype(t)) for t, n in p.output_sizes().items()]
    return inputs + outputs


def _differences(
    program: str | ModuleOp, arrays: list[np.ndarray], mlir_out: list[np.ndarray]
):
    """The buffers (index, interpreted, MLIR's) where the interpreter's run of the
    module's `@f` differs from MLIR's."""
    interpreted = [a.copy() for a in arrays]
    module = _parsed(program) if isinstance(program, str) else program
    Interpreter(module).run("f", *interpreted)
    return [
        (k, got, want)
        for k, (got, want) in enumerate(zip(interpreted, mlir_out, strict=True))
        if not _same_bits(got, want)
    ]


def _parsed(text: str) -> ModuleOp:
    module = parse(text)
    verify(module)
    return module


@given(data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(25), deadline=None)
def test_scalar_programs_compute_what_mlir_computes(data, seed):
    """Random programs over i8-i64, index, f16, bf16, f32 and f64 (values chosen by
    `scf.if`, carried through `scf.for`): the interpreter's arith, math and scf ops
    give MLIR's bits."""
    p = Program()
    for _ in range(data.draw(st.integers(10, 40))):
        _write_op(p, data)
    text = p.text()
    arrays = _program_arrays(p, seed)
    (mlir_out,) = run_with_mlir(text, [("f", arrays)])
    assert _differences(text, arrays, mlir_out) == []


def _lowered_kernel(text: str) -> ModuleOp:
    module = _parsed(text)
    Pipeline(
        [ConvertScfToCf(), ConvertGpuToNvvm(use_bare_ptr_memref_call_conv=True)]
    ).run(module)
    return module


def _kernel_for_the_cpu(lowered: ModuleOp) -> str:
    """The lowered module's kernel alone in a module MLIR runs on the CPU."""
    (kernel,) = [op for op in lowered.walk() if isinstance(op, llvm.FuncOp)]
    return _cpu_module(kernel.clone())


def _cpu_module(kernel: llvm.FuncOp) -> str:
    """A module of `kernel` (detached) for the CPU: without the GPU's attributes, its
    pointers in address space 0; in the generic form, which mlir-opt reads for every
    op affinec prints."""
    for name in list(kernel.attributes):
        if name.startswith(("gpu.", "nvvm.")):
            del kernel.attributes[name]
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(kernel)
    return f"builtin.module {{\n{out.getvalue().replace('!llvm.ptr<1>', '!llvm.ptr')}\n}}\n"


def _same_as_a_kernel(
    p: Program, seed: int, floats: dict[str, list[float]] | None = None
) -> None:
    """MLIR's bits for the program as a function; the interpreter's for it and for
    it as a kernel at the arith and the llvm level (affinec's lowering); MLIR's for
    affinec's llvm-level kernel: all the same. `floats` gives the inputs of float
    types it names (random otherwise)."""
    arrays = _program_arrays(p, seed)
    for t, values in (floats or {}).items():
        arrays[len(INTS) + FLOATS.index(t)][:] = values
    (expected,) = run_with_mlir(p.text(), [("f", arrays)])
    assert _differences(p.text(), arrays, expected) == []
    lowered = _lowered_kernel(p.kernel_text())
    assert _differences(p.kernel_text(), arrays, expected) == []
    assert _differences(lowered, arrays, expected) == []
    (ran,) = run_with_mlir(_kernel_for_the_cpu(lowered), [("f", arrays)], pointers=True)
    assert [
        k
        for k, (a, b) in enumerate(zip(ran, expected, strict=True))
        if not _same_bits(a, b)
    ] == []


@given(data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(15), deadline=None)
def test_kernels_lowered_by_affinec_compute_what_mlir_computes(data, seed):
    """The same programs as kernels, lowered by affinec's `convert-scf-to-cf` and
    `convert-gpu-to-nvvm` to the llvm dialect (branches, block arguments): MLIR
    running affinec's llvm-level kernel gives MLIR's bits for the program, and so
    does the interpreter at both levels (so the lowering and the interpreter's llvm
    ops are checked by an executor of their own)."""
    p = Program()
    for _ in range(data.draw(st.integers(10, 40))):
        _write_op(p, data)
    _same_as_a_kernel(p, seed)


@given(data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(15), deadline=None)
def test_kernels_lowered_by_mlir_and_interpreted_by_affinec_compute_what_mlir_computes(
    data, seed
):
    """The same random kernels lowered by MLIR's own `convert-gpu-to-nvvm` (not
    affinec's): affinec reads MLIR's llvm level (memref descriptors built from
    `llvm.mlir.poison`, `getelementptr inbounds|nuw`, `llvm.intr.smax`, libdevice's
    `__nv_fmaxf`) and its interpreter gives the bits MLIR's CPU execution of the
    program gives, so the interpreter's llvm level is held to a lowering it did not
    write."""
    p = Program()
    for _ in range(data.draw(st.integers(10, 40))):
        _write_op(p, data)
    arrays = _program_arrays(p, seed)
    (expected,) = run_with_mlir(p.text(), [("f", arrays)])
    lowered = mlir_opt(
        p.kernel_text(),
        "--convert-scf-to-cf",
        "--convert-gpu-to-nvvm=use-bare-ptr-memref-call-conv=1",
    )
    assert _differences(lowered, arrays, expected) == []


def test_rounded_divisions_and_conversions_in_kernels_compute_what_mlir_computes():
    """Every sign of dividend and divisor, exact and inexact, through `floordivsi`,
    `ceildivsi` and `ceildivui` (which `convert-gpu-to-nvvm` expands into a
    quotient rounded toward zero and a correction), and integers read as unsigned
    or floats rounded toward zero (`uitofp`, `fptosi`, `fptoui`), at every integer
    width: the interpreter at both levels and MLIR agree."""
    p = Program()
    for t, bits in INTS.items():
        low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (6, -3)]
        pairs += [(0, 5), (0, -5), (low, 3), (high, -3), (low, 1), (high, 2)]
        for a, b in pairs:
            x, y = p.constant(a, t), p.constant(b, t)
            for name in ("floordivsi", "ceildivsi", "ceildivui", "divui"):
                p.keep(p.op(f"arith.{name} {x}, {y} : {t}"), t)
        for value in (-1, low, high, 5):
            x = p.constant(value, t)
            for ft in FLOATS:
                p.keep(p.op(f"arith.uitofp {x} : {t} to {ft}"), ft)
        for value in (-3.75, -0.5, 0.0, 0.99, 42.5):
            for ft in FLOATS:
                x = p.constant(value, ft)
                p.keep(p.op(f"arith.fptosi {x} : {ft} to {t}"), t)
                if value >= 0:
                    p.keep(p.op(f"arith.fptoui {x} : {ft} to {t}"), t)
    _same_as_a_kernel(p, seed=0)


def test_subnormal_results_compute_what_mlir_computes():
    """Results below the smallest normal number of bf16 and f16 (f32 and f64
    subnormals and tiny normals truncated, sums and products of subnormals, all
    loaded, so that no compiler folds them) stay subnormal, rounded to nearest even,
    in the interpreter at both levels and in MLIR. The runner is told not to use
    AVX512-BF16 or AVX-NE-CONVERT, whose conversion to bf16 flushes subnormals to
    zero: on a host that has them MLIR's CPU bits were not IEEE's (the random
    programs found it on such a host)."""
    tiny = {
        "f32": [1.0e-39, -3.0e-40, 1.1e-38, 5.0e-45],
        "f64": [1.0e-39, 3.0e-6, -6.0e-8, 1.0e-310],
        "bf16": [1.0e-39, 2.5e-39, -4.0e-40, 1.2e-38],
        "f16": [3.0e-6, 1.0e-6, -5.0e-7, 6.0e-5],
    }
    p = Program()
    for source in ("f32", "f64"):
        for x in p.pools[source][:INPUTS]:
            for target in ("bf16", "f16"):
                p.keep(p.op(f"arith.truncf {x} : {source} to {target}"), target)
    for t in ("bf16", "f16"):
        x, y, z, w = p.pools[t][:INPUTS]
        for a, b in ((x, y), (y, z), (z, w)):
            for op in ("addf", "subf", "mulf"):
                p.keep(p.op(f"arith.{op} {a}, {b} : {t}"), t)
        p.keep(p.op(f"arith.extf {x} : {t} to f32"), "f32")
    _same_as_a_kernel(p, seed=0, floats=tiny)


@given(data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(10), deadline=None)
def test_vector_kernels_lowered_by_affinec_compute_what_mlir_computes(data, seed):
    """Programs on 1-D and 2-D vectors of f16, bf16 and f32 (loads, stores,
    broadcasts, inserts, extracts, elementwise ops, fma, float casts), as the staged
    output and the MMA fragments use them: affinec lowers a 2-D vector to an LLVM
    array of rows; MLIR's own execution is the judge."""
    p = Program()
    for _ in range(data.draw(st.integers(5, 25))):
        if data.draw(st.integers(0, 3)) == 0:
            _write_op(p, data)
        else:
            _write_vector_op(p, data)
    _same_as_a_kernel(p, seed)


# --------------------------------------------------------------------------------------
# The levels of the default pipeline
# --------------------------------------------------------------------------------------

_GPU_OPS = re.compile(r"\b(gpu|nvgpu|nvvm)\.[a-z]")
HOST_MAPPINGS = {"grid", "block"}
"""Bands whose iterations run one after the other on the CPU as they would in any
order on the GPU (no barrier between a block's threads yet)."""


def _host_levels(spec, config) -> list[tuple[str, ModuleOp]]:
    """The naive module and each pass's output until a GPU op or a thread mapping
    appears."""
    module = build(spec)
    levels = [("naive", module.clone())]
    Pipeline(default_passes(config)).run(
        module, callback=lambda p, m, s: levels.append((p.name, m.clone()))
    )
    host = []
    for name, level in levels:
        mappings = {
            o.attributes[MAPPING] for o in level.walk() if MAPPING in o.attributes
        }
        if (
            _GPU_OPS.search(printed(level))
            or {m.data for m in mappings if isinstance(m, StringAttr)} - HOST_MAPPINGS
        ):
            break
        host.append((name, level))
    return host


def _for_the_cpu(level: ModuleOp, name: str) -> func.FuncOp:
    """The level's function, renamed `name`, its bands unmapped and lowered by
    affinec's `lower-affine`."""
    level = level.clone()
    for op in level.walk():
        op.attributes.pop(MAPPING, None)
    Pipeline([LowerAffine()]).run(level)
    (function,) = [op for op in level.body.block.ops if isinstance(op, func.FuncOp)]
    function.detach()
    function.sym_name = StringAttr(name)
    return function


def _levels_compute_what_mlir_computes(spec, config, seed: int) -> None:
    levels = _host_levels(spec, config)
    assert levels[0][0] == "naive"
    c = contraction_of(spec)
    inputs = with_nans(random_inputs(spec, np.random.default_rng(seed)), seed)
    arrays = [*inputs, poisoned_output(spec)]
    functions = [
        _for_the_cpu(level, f"level{k}") for k, (_, level) in enumerate(levels)
    ]
    for f in functions:
        f.sym_visibility = None
    text = printed(ModuleOp(functions))
    mlir_out = run_with_mlir(text, [(f.sym_name.data, arrays) for f in functions])
    for (name, level), after in zip(levels, mlir_out, strict=True):
        interpreted = [a.copy() for a in arrays]
        Interpreter(level).run(c.name, *interpreted)
        assert interpreted[-1].tobytes() == after[-1].tobytes(), name
        assert all(
            a.tobytes() == b.tobytes()
            for a, b in zip(arrays[:-1], after[:-1], strict=True)
        )


SIMT_THREAD_REGISTERS = {
    "nvvm.read.ptx.sreg.ctaid.x": "gridSizeX",
    "nvvm.read.ptx.sreg.ctaid.y": "gridSizeY",
    "nvvm.read.ptx.sreg.ctaid.z": "gridSizeZ",
    "nvvm.read.ptx.sreg.tid.x": "blockSizeX",
    "nvvm.read.ptx.sreg.tid.y": "blockSizeY",
    "nvvm.read.ptx.sreg.tid.z": "blockSizeZ",
}
"""The registers a kernel's threads differ by, and the launch's size of each."""


def _threads_as_arguments(compiled: ModuleOp) -> tuple[str, list[int]] | None:
    """The compiled module's kernel with its block and thread numbers as i32
    arguments after its pointers, in a module MLIR runs on the CPU, and how many of
    each there are; None for a kernel whose threads meet (a barrier, shared memory,
    any other nvvm op), which running them one after the other would not honour."""
    (launch,) = [op for op in compiled.walk() if isinstance(op, gpu.LaunchFuncOp)]
    kernel = next(op for op in compiled.walk() if isinstance(op, llvm.FuncOp)).clone()
    reads = [op for op in kernel.walk() if op.name.startswith("nvvm.")]
    if any(op.name not in SIMT_THREAD_REGISTERS for op in reads) or any(
        isinstance(op, llvm.AddressOfOp) for op in kernel.walk()
    ):
        return None
    block = kernel.body.blocks[0]
    extents = []
    for name in sorted({op.name for op in reads}):
        size = getattr(launch, SIMT_THREAD_REGISTERS[name]).owner
        assert isinstance(size, arith.ConstantOp), "a launch of constant sizes"
        extents.append(size.value.value.data)
        number = block.insert_arg(i32, len(block.args))
        for op in [op for op in reads if op.name == name]:
            op.results[0].replace_all_uses_with(number)
            op.detach()
            op.erase()
    kernel.properties["function_type"] = llvm.LLVMFunctionType(
        [a.type for a in block.args], kernel.function_type.output
    )
    if (attrs := kernel.properties.get("arg_attrs")) is not None:
        added = len(block.args) - len(attrs.data)
        kernel.properties["arg_attrs"] = ArrayAttr(
            [*attrs.data, *[DictionaryAttr({})] * added]
        )
    return _cpu_module(kernel), extents


@given(data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(8), deadline=None)
def test_compiled_simt_kernels_compute_on_mlir_what_the_interpreter_computes(
    data, seed
):
    """The whole default pipeline down to the llvm level (outlining, narrowed
    indices, `lower-affine`, `convert-gpu-to-nvvm`): MLIR runs the compiled kernel,
    thread after thread with their numbers as arguments, and gives the bits the
    interpreter gives for it. Kernels without shared memory or barriers (their
    threads never meet), SIMT configurations of random specs."""
    spec = data.draw(specs())
    config = replace(data.draw(kernel_configs(spec)), promote=False, mma=False)
    module = build(spec)
    Pipeline(default_passes(config)).run(module)
    emulated = _threads_as_arguments(module)
    assume(emulated is not None)
    assert emulated is not None
    text, extents = emulated
    inputs = with_nans(random_inputs(spec, np.random.default_rng(seed)), seed)
    arrays = [*inputs, poisoned_output(spec)]
    interpreted = [a.copy() for a in arrays]
    Interpreter(module).run(contraction_of(spec).name, *interpreted)
    name = next(op for op in module.walk() if isinstance(op, llvm.FuncOp)).sym_name.data
    (ran,) = run_with_mlir(text, [(name, arrays)], pointers=True, threads=extents)
    assert ran[-1].tobytes() == interpreted[-1].tobytes()


@given(data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(12), deadline=None)
def test_the_host_levels_compute_what_mlir_computes(data, seed):
    """Random specs (every kind, layout, dtype, stride, epilogue; NaN inputs) and
    configurations: the naive level and each affine pass's, bit for bit."""
    spec = data.draw(specs())
    _levels_compute_what_mlir_computes(spec, data.draw(kernel_configs(spec)), seed)


@given(case=mma_cases(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(6), deadline=None)
def test_the_tensor_core_routes_host_levels_compute_what_mlir_computes(case, seed):
    spec, config = case
    _levels_compute_what_mlir_computes(spec, config, seed)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_a_convolution_with_nan_inputs_computes_what_mlir_computes(dtype):
    """A fixed convolution with a bias and a ReLU: NaN reaches the output the same."""
    spec = ConvSpec(1, 3, 5, 5, 4, 3, 3, padding=1, dtype=dtype, epilogue="bias-relu")
    module = build(spec)
    rng = np.random.default_rng(7)
    inputs = random_inputs(spec, rng)
    inputs[0][0, 0, 0, :2] = np.nan
    arrays = [*inputs, poisoned_output(spec)]
    text = printed(ModuleOp([_for_the_cpu(module, "conv")]))
    (after,) = run_with_mlir(text, [("conv", arrays)])
    interpreted = [a.copy() for a in arrays]
    Interpreter(module).run(contraction_of(spec).name, *interpreted)
    assert interpreted[-1].tobytes() == after[-1].tobytes()
    assert np.isnan(after[-1].astype(np.float64)).any()
    assert not np.isnan(after[-1].astype(np.float64)).all()
