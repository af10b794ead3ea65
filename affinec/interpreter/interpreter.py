"""The interpreter's entry points: `Interpreter(module)` and `interpret(...)`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import IndexType, IntegerType, MemRefType, ModuleOp
from xdsl.ir import Attribute

from affinec.base.diagnostics import not_a_module
from affinec.dialects import gpu
from affinec.dialects.nvvm import KERNEL

# Importing the emitter modules registers their emitters.
from affinec.interpreter import (  # noqa: F401
    affine_ops,
    arith_ops,
    async_copies,
    gpu_memory_ops,
    gpu_ops,
    llvm_ops,
    math_ops,
    mbarriers,
    memref_ops,
    vector_ops,
    warp_ops,
    warpgroup_steps,
    warpgroups,
)
from affinec.interpreter.codegen import FunctionWriter, ProgramWriter, Source
from affinec.interpreter.control_ops import function_global, write_body
from affinec.interpreter.lockstep import write_llvm_lockstep_kernel
from affinec.interpreter.support import (
    DEFAULT_MAX_STEPS,
    InterpreterError,
    StepBudget,
    errors_at,
    numpy_dtype,
)


def _dynamic_text(shape: tuple[int, ...]) -> str:
    return f"({', '.join('?' if d < 0 else str(d) for d in shape)})"


def _check_argument(k: int, name: str, t: Attribute, value: Any) -> Any:
    """`value` as the function's parameter `k` of type `t` takes it, or an error."""
    what = f"argument {k} (%{name})" if name else f"argument {k}"
    if isinstance(t, MemRefType):
        dtype = numpy_dtype(t.get_element_type())
        if not isinstance(value, np.ndarray):
            raise InterpreterError(
                f"{what}: expected a numpy array for {t}, got {type(value).__name__}"
            )
        static = tuple(t.get_shape())
        fits = value.ndim == len(static) and all(
            d < 0 or d == n for d, n in zip(static, value.shape, strict=False)
        )  # a dynamic size takes the array's own
        if not fits or value.dtype != dtype:
            shape = static if min(static, default=0) >= 0 else _dynamic_text(static)
            raise InterpreterError(
                f"{what}: expected an array of shape {shape} and dtype {dtype} for "
                f"{t}, got shape {value.shape} and dtype {value.dtype}"
            )
        if not value.flags.writeable:
            raise InterpreterError(f"{what}: the array is read-only")
        return value
    if isinstance(t, IndexType | IntegerType):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise InterpreterError(
                f"{what}: expected an integer for {t}, got {value!r}"
            )
        return int(value)
    dtype = numpy_dtype(t)
    if not isinstance(value, float | int | np.floating):
        raise InterpreterError(f"{what}: expected a number for {t}, got {value!r}")
    return dtype.type(value)


class Interpreter:
    """Every function of a module decoded into Python, ready to run.

    Decoding happens once, here; `run` can then be called many times. The module
    must not change while the interpreter is in use (passes rewrite in place: build a
    new interpreter after them).
    """

    def __init__(
        self,
        module: ModuleOp,
        max_steps: int = DEFAULT_MAX_STEPS,
        why: str = "the interpreter's limit",
        lanes: bool = True,
        lockstep: bool = True,
    ) -> None:
        """Decode `module`; each run may take `max_steps` loop iterations and
        simulated threads (`why` says where that limit comes from, for its error).
        With `lanes`, a band whose body allows it runs all its iterations at once
        as numpy vectors (`affinec.interpreter.lanes`: the same results, bit for
        bit, as iteration by iteration, which `lanes=False` keeps). With `lockstep`,
        a kernel that allows it runs a block's threads together
        (`affinec.interpreter.lockstep`: the same results, bit for bit, as thread by
        thread, which `lockstep=False` keeps)."""
        if not isinstance(module, ModuleOp):
            raise not_a_module(module)
        self.module = module
        self.budget = StepBudget(max_steps, why)
        self._program = program = ProgramWriter(self.budget, lanes, lockstep)
        self.functions: dict[str, func.FuncOp] = {}
        for op in module.body.block.ops:
            if isinstance(op, func.FuncOp) and op.body.blocks:
                self.functions[op.sym_name.data] = op
                with errors_at(op):
                    program.add_source(_write_function(program, op))
            elif isinstance(op, gpu.ModuleOp):
                for kernel in op.body.block.ops:
                    with errors_at(kernel):
                        _write_kernel(program, op, kernel)
        self.source = program.source
        """The Python the module was decoded into (for the curious and for debugging)."""
        self._namespace = program.build()

    def call(self, name: str, *args: Any) -> tuple[Any, ...]:
        """Run `@name` on already-checked arguments; return its results.

        Every error the program causes comes out as an `InterpreterError` located
        at the op whose generated line raised it: the interpreter's own, and
        Python's arithmetic, index and recursion errors.
        """
        self.budget.reset()
        try:
            with np.errstate(all="ignore"):
                return self._namespace[function_global(name)](*args)
        except InterpreterError as e:
            if e.op is None:
                e.op = self._program.op_at(e.__traceback__)
            raise
        except (ArithmeticError, IndexError, RecursionError, MemoryError) as e:
            op = self._program.op_at(e.__traceback__)
            raise InterpreterError(_python_error(e), op) from e

    def run(self, name: str, *args: Any) -> tuple[Any, ...]:
        """Run `@name` on numpy arrays (and scalars), in place; return the arguments.

        Every argument is checked against the function's signature first.
        """
        fn = self.functions.get(name)
        if fn is None:
            known = ", ".join(f"@{n}" for n in self.functions) or "none"
            raise InterpreterError(
                f"no function @{name} in the module (it has {known})"
            )
        params = fn.body.blocks[0].args
        if len(args) != len(params):
            raise InterpreterError(
                f"@{name} takes {len(params)} arguments, {len(args)} were given"
            )
        checked = [
            _check_argument(k, p.name_hint or "", p.type, a)
            for k, (p, a) in enumerate(zip(params, args, strict=True))
        ]
        self.call(name, *checked)
        return tuple(args)


def _write_function(program: ProgramWriter, op: func.FuncOp) -> Source:
    w = FunctionWriter(program)
    params = [w.define(a) for a in op.body.blocks[0].args]
    write_body(w, op.body)
    return w.function(f"def {function_global(op.sym_name.data)}({', '.join(params)}):")


def _write_kernel(program: ProgramWriter, module: gpu.ModuleOp, kernel) -> None:
    """A kernel of a `gpu.module`, at the gpu level or the llvm level."""
    if isinstance(kernel, gpu.FuncOp):
        program.add_source(gpu_ops.write_kernel(program, module, kernel))
    elif isinstance(kernel, llvm.FuncOp) and kernel.body.blocks:
        name = gpu_ops.kernel_global(module.sym_name.data, kernel.sym_name.data)
        plan = (
            gpu_ops.lockstep_plan(program, kernel)
            if KERNEL in kernel.attributes
            else None
        )
        if plan is not None:
            program.add_source(write_llvm_lockstep_kernel(program, kernel, plan, name))
        else:
            program.add_source(
                llvm_ops.write_llvm_kernel(program, module, kernel, name)
            )


def _python_error(e: BaseException) -> str:
    """What a Python error raised by the generated code means for the program."""
    match e:
        case ZeroDivisionError():
            return "division by zero"
        case RecursionError():
            return "calls nest too deeply (a function that calls itself without end?)"
        case MemoryError():
            return "out of memory"
    return f"{type(e).__name__}: {e}"


def interpret(module: ModuleOp, func_name: str, *arrays: Any) -> tuple[Any, ...]:
    """Run `@func_name` of `module` on numpy arrays, in place, and return them."""
    return Interpreter(module).run(func_name, *arrays)


__all__: Sequence[str] = ["Interpreter", "InterpreterError", "interpret"]
