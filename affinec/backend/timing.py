"""How long a kernel takes on the GPU: `time_launches` (batches of back-to-back
launches queued behind a spin kernel, between two CUDA events, so that the events
measure the GPU and not Python's launch overhead) and `time_kernel` (a runtime
kernel on given inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from affinec.backend.cuda_launch import launch_function
from affinec.backend.runtime import Kernel

_SPIN_PTX = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry affinec_spin(.param .u64 cycles)
{
    .reg .pred %p;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [cycles];
    mov.u64 %rd2, %clock64;
WAIT:
    mov.u64 %rd3, %clock64;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p, %rd4, %rd1;
    @%p bra WAIT;
    ret;
}
"""

_spin_function = None


def _spin(cycles: int) -> None:
    """Keep the GPU busy for `cycles` clock cycles (one thread spinning on %clock64),
    on the default stream."""
    global _spin_function
    if _spin_function is None:
        from numba import cuda

        module = cuda.current_context().create_module_ptx(_SPIN_PTX)
        _spin_function = module.get_function("affinec_spin")
    launch_function(_spin_function, (1, 1, 1), (1, 1, 1), 0, [np.uint64(cycles)], None)


SPIN_CLOCK_HZ = 2.0e9
"""An upper bound of the SM clock (the H100's boost is 1.98 GHz): a spin of
`seconds * SPIN_CLOCK_HZ` cycles lasts at least `seconds`."""


def time_launches(
    launch: Callable[[int], None],
    sets: int = 1,
    *,
    rounds: int = 10,
    target_ms: float = 20.0,
    max_batch: int = 500,
) -> float:
    """GPU milliseconds per `launch(k)` (`k` rotating over `sets` input sets): the
    median over `rounds` batches of back-to-back launches between two CUDA events.

    Each batch is queued behind a spin kernel that keeps the GPU busy until the host
    has queued the whole batch, so the launches run back to back and the events
    measure GPU time, not Python's launch overhead (tens of microseconds, as long as
    a small convolution). A batch whose spin ended before the host finished queuing
    is timed again with a longer spin. Batches hold about `target_ms` of work.
    """
    import statistics
    import time as clock

    from numba import cuda

    def timed(batch: int, spin_seconds: float) -> tuple[float, float, bool]:
        start, end = cuda.event(), cuda.event()
        cuda.synchronize()
        _spin(int(spin_seconds * SPIN_CLOCK_HZ))
        start.record()
        host = clock.perf_counter()
        for k in range(batch):
            launch(k % sets)
        host = clock.perf_counter() - host
        starved = start.query()  # the spin ended before the batch was queued
        end.record()
        end.synchronize()
        return cuda.event_elapsed_time(start, end) / batch, host, starved

    first, host, _ = timed(1, 0.0)  # also loads modules, picks cuDNN's algorithm
    batch = max(1, min(max_batch, round(target_ms / max(first, 1e-3))))
    spin = 2 * host * batch + 1e-3
    _, host, _ = timed(batch, spin)  # warm-up
    spin = 2 * host + 1e-3
    times = []
    while len(times) < rounds:
        ms, host, starved = timed(batch, spin)
        if starved:
            spin = 2 * spin
            continue
        times.append(ms)
    return statistics.median(times)


def time_kernel(
    kernel: Kernel, inputs: Sequence[Any], repeat: int = 10, warmup: int = 3
) -> float:
    """Median GPU milliseconds of the kernel on `inputs` (copied to the device once);
    see `time_launches`."""
    arguments = kernel.check(*inputs)
    for a in arguments:
        a.to_device()
    for _ in range(warmup):
        kernel.launch(arguments)
    return time_launches(lambda _: kernel.launch(arguments), rounds=repeat)
