"""affinec: an MLIR-style multi-level IR compiler for affine convolutions.

    import affinec
    spec = affinec.ConvSpec(n=1, c=8, h=8, w=8, k=8, r=3, s=3, padding=1)
    module = affinec.build(spec)                 # the naive IR
    affinec.interpret(module, "conv", x, f, y)   # on the CPU, any level
    kernel = affinec.compile(spec)               # PTX, loaded on first call
    y = kernel(x, f)                             # on the GPU (numpy, numba, torch)

Names are imported on first use, so `import affinec` stays cheap.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from affinec.backend.runtime import Kernel
    from affinec.base.spec import Spec
    from affinec.driver.config import KernelConfig

_EXPORTS = {
    "ConvSpec": "affinec.base.spec",
    "MatmulSpec": "affinec.base.spec",
    "OuterSpec": "affinec.base.spec",
    "parse_spec": "affinec.base.spec",
    "build": "affinec.frontend.naive",
    "interpret": "affinec.interpreter",
    "Interpreter": "affinec.interpreter",
    "Pipeline": "affinec.driver.pipeline",
    "compile_to_ptx": "affinec.driver.compiler",
    "KernelConfig": "affinec.driver.config",
    "cuda_available": "affinec.backend.runtime",
    "Kernel": "affinec.backend.runtime",
}

__all__ = [*_EXPORTS, "compile", "__version__"]

try:
    __version__ = metadata.version("affinec")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"


_MODULES = {
    "reference": "affinec.frontend.reference",
    "testing": "affinec.testing",
    "networks": "affinec.frontend.networks",
    "chips": "affinec.hardware.chips",
}
"""Modules reachable as attributes of the package before they are imported
(`affinec.reference` is always the module: its function is
`affinec.reference.reference`)."""


def __getattr__(name: str) -> Any:
    import importlib

    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # the next use finds it without this hook
        return value
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    raise AttributeError(f"module 'affinec' has no attribute {name!r}")


def compile(  # shadows the builtin on purpose: affinec.compile, like torch.compile
    spec_or_module: Spec | ModuleOp,
    config: KernelConfig | None = None,
    *,
    pipeline: str | None = None,
    arch: str | None = None,
    target: str | None = None,
    tune: bool = False,
    cache: str | None = None,
    **knobs: Any,
) -> Kernel:
    """Compile a spec (or naive IR) to a `Kernel` that runs on the GPU.

    `config` (or its fields as `knobs`: tile sizes, threads per block, ...) sets the
    default pipeline's knobs, `pipeline` replaces it. Given none of them, the
    configuration comes from the tuning cache when it holds one for the spec on
    this GPU with this compiler (`affinec tune`; `cache` names the file, see
    `affinec.tuning.cache`), tuned on the spot first if `tune`, and else from
    `config_for` (picked without measuring); `kernel.info["config_source"]` says
    which. `arch` is `"sm_80"`, `"sm_90"`, ... or `"sm_90a"` (Hopper's `wgmma` and
    TMA route, `wgmma=True`, is asked for by name) as `compile_to_ptx`, the tuner
    and `--arch` name it (`target` is its older name); by default the current GPU's
    (sm_80 without one: its PTX also runs on newer GPUs). See
    `affinec.driver.compiler.compile_to_ptx`.
    """
    from affinec.backend.runtime import current_arch
    from affinec.driver.compiler import compile_to_ptx

    if arch is not None and target is not None and arch != target:
        raise ValueError(f"arch={arch!r} and target={target!r}: give one")
    arch = arch or target or current_arch()
    if config is None and not knobs and pipeline is None:
        from affinec.tuning import compile_cached

        compiled = compile_cached(
            spec_or_module, arch, tune_if_missing=tune, cache=cache
        )
        return compiled.runtime_kernel()
    if tune:
        raise ValueError(
            "tune=True picks the configuration: give no config, knobs or pipeline"
        )
    compiled = compile_to_ptx(
        spec_or_module, config, pipeline=pipeline, arch=arch, **knobs
    )
    return compiled.runtime_kernel()
