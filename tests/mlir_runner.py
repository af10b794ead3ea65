"""MLIR's own execution of a module on the CPU, for the tests that check affinec's
interpreter against it.

`run_with_mlir(module_text, calls)` adds a `main` to the module that calls each
function of `calls` on buffers holding the given arrays (each a global of bytes,
viewed as the array's memref type), lowers everything with mlir-opt 22's passes to
the llvm dialect, runs it with `mlir-runner` and reads every buffer back after the
calls, bit for bit: each is printed as 32-bit words (`printMemrefI32`), so nothing
goes through a decimal rendering. The functions must take identity-layout memrefs
of static shapes, one per array, in order; host code only (no gpu ops).
`needs_mlir_runner` skips a test where mlir-opt 22 or the runner is missing (a
failure where `AFFINEC_REQUIRE_MLIR_OPT` is set, as in CI).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from mlir_opt import MLIR_OPT

MLIR_RUNNER = (
    str(Path(MLIR_OPT).with_name("mlir-runner"))
    if MLIR_OPT is not None and Path(MLIR_OPT).with_name("mlir-runner").exists()
    else None
)
_LIBRARIES = Path(MLIR_OPT).parent.parent / "lib" if MLIR_OPT is not None else None


def _runner_library(name: str) -> Path | None:
    if _LIBRARIES is None:
        return None
    found = sorted(_LIBRARIES.glob(f"lib{name}.so*"))
    return found[0] if found else None


_RUNTIME = [
    _runner_library("mlir_runner_utils"),
    _runner_library("mlir_c_runner_utils"),
]

if (MLIR_RUNNER is None or None in _RUNTIME) and os.environ.get(
    "AFFINEC_REQUIRE_MLIR_OPT"
):
    raise RuntimeError(
        "AFFINEC_REQUIRE_MLIR_OPT is set but mlir-opt 22's mlir-runner or its runtime "
        "libraries are missing (scripts/install_mlir_opt.sh installs them)"
    )

needs_mlir_runner = pytest.mark.skipif(
    MLIR_RUNNER is None or None in _RUNTIME,
    reason="needs mlir-opt 22's mlir-runner and its runtime libraries "
    "(scripts/install_mlir_opt.sh)",
)

LOWER_TO_LLVM = (
    "--convert-scf-to-cf",
    "--convert-math-to-llvm",
    "--convert-vector-to-llvm",
    "--expand-strided-metadata",
    "--finalize-memref-to-llvm",
    "--convert-arith-to-llvm",
    "--convert-func-to-llvm",
    "--convert-cf-to-llvm",
    "--reconcile-unrealized-casts",
)
"""mlir-opt's passes from scf, arith, math, vector, memref and func to the llvm
dialect."""

_ELEMENT_TYPES = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
}


class MlirRunError(Exception):
    """mlir-opt or mlir-runner refused the module; the message is their stderr."""


def memref_type(array: np.ndarray) -> str:
    """The identity-layout memref type of `array`."""
    element = _ELEMENT_TYPES[array.dtype.name]
    return f"memref<{''.join(f'{d}x' for d in array.shape)}{element}>"


def _main(
    calls: Sequence[tuple[str, Sequence[np.ndarray]]],
    pointers: bool,
    threads: Sequence[int] = (),
) -> str:
    """Globals holding the arrays' bytes and a `main` calling each function on views
    of them (or on their addresses, with `pointers`; once for each combination of
    `range(n)` for each `n` of `threads`, those numbers as i32 arguments after the
    addresses), then printing every buffer as 32-bit words."""
    globals_, body, prints = [], ["%c0 = arith.constant 0 : index"], []
    for c, (function, arrays) in enumerate(calls):
        views = []
        for a, array in enumerate(arrays):
            raw = array.tobytes() + b"\0" * (-array.nbytes % 4)
            name, size, words = f"b{c}_{a}", len(raw), len(raw) // 4
            globals_.append(
                f'memref.global "private" @{name} : memref<{size}xi8> = '
                f'dense<"0x{raw.hex().upper()}"> {{alignment = 64 : i64}}'
            )
            body += [
                f"%{name} = memref.get_global @{name} : memref<{size}xi8>",
                f"%{name}_v = memref.view %{name}[%c0][] : memref<{size}xi8> to "
                f"{memref_type(array)}",
                f"%{name}_w = memref.view %{name}[%c0][] : memref<{size}xi8> to "
                f"memref<{words}xi32>",
            ]
            prints += [
                f"%{name}_u = memref.cast %{name}_w : memref<{words}xi32> to "
                "memref<*xi32>",
                f"func.call @printMemrefI32(%{name}_u) : (memref<*xi32>) -> ()",
            ]
            views.append(f"%{name}_v")
            if pointers:
                body += [
                    f"%{name}_a = memref.extract_aligned_pointer_as_index %{name}_v : "
                    f"{memref_type(array)} -> index",
                    f"%{name}_i = arith.index_cast %{name}_a : index to i64",
                    f"%{name}_p = llvm.inttoptr %{name}_i : i64 to !llvm.ptr",
                ]
                views[-1] = f"%{name}_p"
        if pointers:
            ids = []
            for k, extent in enumerate(threads):
                body += [
                    f"%n{c}_{k} = arith.constant {extent} : index",
                    f"%one{c}_{k} = arith.constant 1 : index",
                    f"scf.for %t{c}_{k} = %c0 to %n{c}_{k} step %one{c}_{k} {{",
                    f"%id{c}_{k} = arith.index_cast %t{c}_{k} : index to i32",
                ]
                ids.append(f"%id{c}_{k}")
            types = ", ".join(["!llvm.ptr" for _ in arrays] + ["i32" for _ in ids])
            operands = ", ".join([*views, *ids])
            body.append(f"llvm.call @{function}({operands}) : ({types}) -> ()")
            body += ["}" for _ in threads]
        else:
            types = ", ".join(memref_type(a) for a in arrays)
            body.append(f"func.call @{function}({', '.join(views)}) : ({types}) -> ()")
    return "\n".join(
        [
            *globals_,
            "func.func private @printMemrefI32(memref<*xi32>)",
            "func.func @main() {",
            *body,
            *prints,
            "func.return",
            "}",
        ]
    )


def run_with_mlir(
    module_text: str,
    calls: Sequence[tuple[str, Sequence[np.ndarray]]],
    pointers: bool = False,
    threads: Sequence[int] = (),
) -> list[list[np.ndarray]]:
    """Every buffer after MLIR's execution of the calls, as arrays like the given.
    With `pointers`, the functions are `llvm.func`s taking each buffer as a bare
    `!llvm.ptr` (as affinec's `convert-gpu-to-nvvm` passes a kernel its memrefs),
    called for every combination of numbers below `threads` (a kernel whose
    thread and block numbers are arguments, one thread after the other)."""
    assert MLIR_OPT is not None and MLIR_RUNNER is not None
    text = module_text.rstrip()
    assert text.endswith("}"), "a module in custom form"
    text = f"{text[:-1]}{_main(calls, pointers, threads)}\n}}\n"
    lowered = subprocess.run(
        [MLIR_OPT, *LOWER_TO_LLVM], input=text, capture_output=True, text=True
    )
    if lowered.returncode != 0:
        raise MlirRunError(lowered.stderr)
    libraries = ",".join(str(p) for p in _RUNTIME)
    run = subprocess.run(
        [
            MLIR_RUNNER,
            "-e",
            "main",
            "-entry-point-result=void",
            # The host's own conversion to bf16 where it has one (AVX512-BF16,
            # AVX-NE-CONVERT) flushes subnormals to zero, which IEEE's rounding and
            # the interpreter do not; a feature the host's target lacks is ignored.
            "--mattr=-avx512bf16,-avxneconvert",
            f"-shared-libs={libraries}",
        ],
        input=lowered.stdout,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if run.returncode != 0:
        raise MlirRunError(run.stderr)
    printed = iter(re.findall(r"data =\s*\[([^\]]*)\]", run.stdout))
    results = []
    for _, arrays in calls:
        after = []
        for array in arrays:
            words = [int(w) for w in next(printed).split(",") if w.strip()]
            raw = np.array(words, np.int64).astype("<u4").tobytes()[: array.nbytes]
            after.append(np.frombuffer(raw, array.dtype).reshape(array.shape).copy())
        results.append(after)
    return results
