"""The modules a pipeline leaves after the passes a test names, for sm_90a: the
levels that Hopper's lockstep tests run both ways; and those modules with their
block barriers erased, to race."""

from collections.abc import Collection

from xdsl.dialects.builtin import ModuleOp

from affinec.base.spec import Spec
from affinec.dialects import gpu
from affinec.driver.config import KernelConfig
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipeline_names import pass_text
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build


def sm_90a_levels(
    spec: Spec, config: KernelConfig, names: Collection[str]
) -> dict[str, ModuleOp]:
    """A copy of the module after each pass of `names` (by name, options left out)
    of `config`'s default pipeline for sm_90a, every one of them reached."""
    levels: dict[str, ModuleOp] = {}
    passes = [*Pipeline.parse("nvvm-attach-target{chip=sm_90a}").passes]
    passes += default_passes(config)

    def keep(p, module, _seconds) -> None:
        name = pass_text(p).split("{")[0]
        if name in names:
            levels[name] = module.clone()

    Pipeline(passes).run(build(spec), callback=keep)
    assert set(levels) == set(names)
    return levels


def erase_barriers(module: ModuleOp) -> None:
    """Every `gpu.barrier` of `module` erased."""
    for op in [o for o in module.walk() if isinstance(o, gpu.BarrierOp)]:
        op.detach()
        op.erase()
