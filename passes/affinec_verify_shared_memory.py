"""`affinec-verify-shared-memory`: refuse a block whose shared memory can race.

Changes nothing. Proves, without running the kernel, that every read of shared
memory comes after the wait that lands the asynchronous copies writing it and after
a barrier that makes other threads' writes visible, that no write lands on elements
still being read or still being copied into, and that no copy is in flight when the
kernel ends (`affinec/transforms/gpu/shared_memory_hazards.py` has the rules). Two
accesses with no barrier between, one of them a write, are compared element by
element: where two threads may touch one element (or the check cannot tell which
thread touches which), the kernel is refused, and the error names the element and
the two threads it found. The
passes that move copies, waits and barriers (`affine-pipeline-data-transfer`,
`affinec-insert-barriers`, `affinec-mma-sync`, `affinec-map-threads`,
`affinec-convert-parallel-to-gpu`, `gpu-kernel-outlining`) run the same check on
their result, so a pipeline never emits a kernel that fails it.

    affine.for %t = 0 to 2 {
      <copies of tile %t + 1 into stage (%t + 1) mod 2>
      %g = nvgpu.device_async_create_group
      nvgpu.device_async_wait %g {numGroups = 3 : i32}
      gpu.barrier
      <ldmatrix from stage %t mod 2>
    }

is refused at the `nvgpu.ldmatrix`:

    error: 'nvgpu.ldmatrix' op reads %input_shared[0, *, *, *] (at %t = 0), which the
    asynchronous copy into %input_shared[0, *, *, *] may still be writing: the last
    wait, 'nvgpu.device_async_wait %0 {numGroups = 3 : i32}', leaves its group in
    flight with 1 newer one (the copy: ...)

A copy band and the band reading what it copied, in one loop with no barrier
between (`affinec-insert-barriers` left out), is refused at the read:

    error: 'affine.load' op reads %input_shared[0, 0..3, 0..6, 0..5], which
    'affine.store %input, %input_shared[%0, %1, %2, %3] : ...' wrote into
    %input_shared[0, 0..3, 0..6, 0..5] with no gpu.barrier between: other threads'
    writes may not be visible yet (thread (1, 0, 0) writes %input_shared[0, 0, 0, 1],
    thread (0, 0, 0) reads it)

Runs on grid-mapped bands, `gpu.launch` bodies and kernels down to `lower-affine`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.transforms.gpu.shared_memory_hazards import check_shared_memory_hazards


@dataclass(frozen=True)
class AffinecVerifySharedMemory(ModulePass):
    """Refuse shared-memory races: reads before their copies land, writes over what
    is still read, copies left in flight."""

    name = "affinec-verify-shared-memory"

    barriers: bool = True
    """Check the barriers too (false: only the asynchronous copies' waits, for IR
    whose barriers `affinec-insert-barriers` has yet to place)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_shared_memory_hazards(op, barriers=self.barriers)
