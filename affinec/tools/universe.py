"""The `xdsl.universe` entry point: lets plain `xdsl-opt` see affinec's dialects and
passes.

xDSL refuses two universes defining one name, so only names xDSL does not define are
offered: our own dialects and passes. The dialects we re-syntax (affine, gpu) keep
xDSL's definitions inside `xdsl-opt`; `affinec-opt` is the tool that reads and prints
them in MLIR's syntax.
"""

from xdsl.dialects import get_all_dialects as xdsl_dialects
from xdsl.transforms import get_all_passes as xdsl_passes
from xdsl.universe import Universe

from affinec.ir.context import AFFINEC_DIALECTS
from affinec.passes import get_all_passes

AFFINEC_UNIVERSE = Universe(
    all_dialects={
        name: factory
        for name, factory in AFFINEC_DIALECTS.items()
        if name not in xdsl_dialects()
    },
    all_passes={
        name: factory
        for name, factory in get_all_passes().items()
        if name not in xdsl_passes()
    },
)
