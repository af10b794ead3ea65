"""Compiling candidates, in parallel processes, into what the tuner needs of each.

The compiler is pure Python plus llvmlite: half a second of one core per
configuration, no GPU. Workers get picklable inputs (the spec's text, the
configuration's fields, the architecture) and return a `Compiled`: the runtime
`Kernel` (PTX and launch geometry, ready to load), ptxas's resources, the instruction
mix of the PTX, and how long it took; or the reason the passes, LLVM or ptxas refused
it. A refusal is an answer, not an error: `PassError` is how the passes say a
configuration does not fit (too much shared memory, a register tile over the block),
and anything else a worker raises is recorded as an internal failure of the compiler
(the tests hold the search space to have none).

Processes are spawned, not forked: the tuning process may hold a CUDA context, which
a forked child must not inherit.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields
from typing import Any

from xdsl.utils.exceptions import DiagnosticException

from affinec.backend.ptxas import PtxasNotFound, Resources
from affinec.backend.runtime import Kernel
from affinec.base.spec import parse_spec
from affinec.driver.config import KernelConfig, with_knobs
from affinec.tuning.cost import InstructionMix, instruction_mix

REFUSED = "refused"
"""The passes, the emitter or ptxas refused the configuration (with a reason)."""
FAILED = "failed"
"""The compiler broke on it: an internal error, reported as such."""
COMPILED = "compiled"
SKIPPED = "skipped"
"""Not compiled: the time budget ran out first."""


def config_to_json(config: KernelConfig) -> dict[str, Any]:
    """The configuration's fields as JSON values (tuples as lists)."""
    return {
        f.name: list(v) if isinstance(v := getattr(config, f.name), tuple) else v
        for f in fields(config)
    }


def config_from_json(data: object) -> KernelConfig:
    """The configuration `config_to_json` wrote; ValueError naming what is wrong
    (an unknown knob, a value of the wrong type)."""
    if not isinstance(data, dict):
        raise ValueError(f"a configuration is a JSON object, got {data!r}")
    defaults = KernelConfig()
    knobs: dict[str, object] = {}
    for name, value in data.items():
        if not hasattr(defaults, name):
            raise ValueError(f"unknown knob {name!r} in a stored configuration")
        expected = getattr(defaults, name)
        if isinstance(expected, tuple):
            if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            ):
                raise ValueError(f"knob {name!r}: expected a list of integers")
            value = tuple(value)
        elif isinstance(expected, bool):
            if not isinstance(value, bool):
                raise ValueError(f"knob {name!r}: expected true or false")
        elif isinstance(expected, int) and (
            not isinstance(value, int) or isinstance(value, bool)
        ):
            raise ValueError(f"knob {name!r}: expected an integer")
        knobs[name] = value
    return with_knobs(defaults, **knobs)


@dataclass
class Compiled:
    """One candidate after compiling."""

    index: int
    """Its position in the list given to `compile_all`."""
    config: KernelConfig
    status: str
    """`compiled`, `refused` or `failed`."""
    reason: str = ""
    seconds: float = 0.0
    kernel: Kernel | None = None
    resources: Resources | None = None
    mix: InstructionMix | None = None

    @property
    def ok(self) -> bool:
        return self.status == COMPILED


def compile_one(index: int, spec_text: str, knobs: dict, arch: str) -> Compiled:
    """Compile one candidate (what a worker process runs; picklable in and out)."""
    from affinec.backend.ptxas import PtxasError
    from affinec.driver.compiler import compile_to_ptx

    config = config_from_json(knobs)
    start = time.perf_counter()
    try:
        compiled = compile_to_ptx(parse_spec(spec_text), config, arch=arch)
        resources = compiled.resources()
    except PtxasNotFound:
        raise
    except (DiagnosticException, PtxasError) as e:
        # PassError, EmitterError, PtxasError: the first line says what is wrong.
        return Compiled(index, config, REFUSED, _first_line(e), _since(start))
    except Exception as e:  # the compiler broke: say so, never take the tuner down
        reason = f"{type(e).__name__}: {_first_line(e)}"
        return Compiled(index, config, FAILED, reason, _since(start))
    kernel = compiled.runtime_kernel()
    kernel.info["tolerance"] = compiled.tolerance
    return Compiled(
        index,
        config,
        COMPILED,
        seconds=time.perf_counter() - start,
        kernel=kernel,
        resources=resources,
        mix=instruction_mix(compiled.ptx),
    )


def _first_line(e: BaseException) -> str:
    from affinec.base.diagnostics import format_exception

    text = format_exception(e).strip()
    text = text.removeprefix("error: ")
    return text.splitlines()[0] if text else type(e).__name__


def _since(start: float) -> float:
    return time.perf_counter() - start


def default_jobs() -> int:
    """Worker processes: every core but one (the one measuring on the GPU)."""
    return max(1, (os.cpu_count() or 2) - 1)


def make_pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of `jobs` spawned compiler processes."""
    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=multiprocessing.get_context("spawn")
    )


class Compilation:
    """The compiles of one spec's candidates, running (in a pool) or done (inline).

    `results()` waits for them in order of completion, calling `progress(done)`
    after each; compiles not started by `deadline` are cancelled and reported as
    refused for lack of time.
    """

    def __init__(
        self,
        spec_text: str,
        configs: Sequence[KernelConfig],
        arch: str,
        pool: ProcessPoolExecutor | None,
    ) -> None:
        self.spec_text = spec_text
        self.configs = list(configs)
        self.arch = arch
        self.pool = pool
        self.futures: dict[Future[Compiled], int] = {}
        self.broken = False
        self.after: Callable[[], None] | None = None
        """Called once the results are in (the next spec's compiles start then)."""
        if pool is not None:
            try:
                for i, c in enumerate(self.configs):
                    future = pool.submit(
                        compile_one, i, spec_text, config_to_json(c), arch
                    )
                    self.futures[future] = i
            except BrokenProcessPool:
                self.broken = True

    def results(
        self,
        progress: Callable[[Compiled], None] | None = None,
        deadline: float | None = None,
    ) -> list[Compiled]:
        """Every candidate's outcome; then `after`, once, if it is set."""
        try:
            return self._results(progress, deadline)
        finally:
            after, self.after = self.after, None
            if after is not None:
                after()

    def _results(
        self,
        progress: Callable[[Compiled], None] | None,
        deadline: float | None,
    ) -> list[Compiled]:
        out: list[Compiled | None] = [None] * len(self.configs)
        if self.pool is None:
            for i, config in enumerate(self.configs):
                if deadline is not None and time.monotonic() > deadline:
                    out[i] = _out_of_time(i, config)
                else:
                    out[i] = compile_one(
                        i, self.spec_text, config_to_json(config), self.arch
                    )
                if progress:
                    progress(out[i])  # pyright: ignore[reportArgumentType]
            return [c for c in out if c is not None]
        if self.broken:
            return [Compiled(i, c, FAILED, DIED) for i, c in enumerate(self.configs)]
        pending = set(self.futures)
        while pending:
            timeout = (
                None if deadline is None else max(0.0, deadline - time.monotonic())
            )
            done, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            if not done:  # out of time: cancel what has not started, wait the rest
                for future in pending:
                    future.cancel()
                deadline = None
                continue
            for future in done:
                pending.discard(future)
                i = self.futures[future]
                out[i] = self._outcome(i, future)
                if progress:
                    progress(out[i])  # pyright: ignore[reportArgumentType]
        return [c for c in out if c is not None]

    def _outcome(self, i: int, future: Future[Compiled]) -> Compiled:
        if future.cancelled():
            return _out_of_time(i, self.configs[i])
        try:
            return future.result()
        except PtxasNotFound:
            raise
        except BrokenProcessPool:
            return Compiled(i, self.configs[i], FAILED, DIED)
        except Exception as e:
            return Compiled(i, self.configs[i], FAILED, f"{type(e).__name__}: {e}")

    def cancel(self) -> None:
        for f in self.futures:
            f.cancel()


DIED = (
    "the compiler process died (out of memory, or a script that starts the tuner "
    "without `if __name__ == '__main__':`)"
)


def _out_of_time(i: int, config: KernelConfig) -> Compiled:
    return Compiled(i, config, SKIPPED, "not compiled: the time budget ran out")


class InlineExecutor(Executor):
    """Runs each task as it is submitted, in this process (one compiler process)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as e:  # the future carries it, as a pool's would
            future.set_exception(e)
        return future


def end_processes(pool: Executor) -> None:
    """End a pool's processes now: the compiles they run are not wanted (the budget
    ran out), and waiting for them would outlast it. `ProcessPoolExecutor` has no
    public way to (before Python 3.14's `terminate_workers`)."""
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
