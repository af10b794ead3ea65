"""affinec's passes, one per file (imported as `affinec.passes`).

`get_all_passes` is the registry `affinec-opt`, the pipeline API and the `xdsl.universe`
entry point read; each entry imports its pass lazily, as xDSL's own registry does.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every affinec pass, by the name pipelines use."""
    return {}


def register_named_pipelines() -> None:
    """Register the named pipelines (`affinec-opt --list-passes` shows them)."""
