"""affinec's optional parts and the extra that installs each.

The core (the compiler, the command lines, the interpreter) needs none of them;
`affinec.torch` needs torch, `affinec.testing` hypothesis, the tuner's plots
matplotlib, tuning over a Ray cluster (`affinec.tuning.distributed`) ray. A module
of affinec that imports one of them turns the bare `ModuleNotFoundError` into one
that names the extra:

    try:
        import torch
    except ModuleNotFoundError as error:
        raise missing_extra(error, "affinec.torch") from None
"""

EXTRAS = {
    "torch": "torch",
    "hypothesis": "testing",
    "matplotlib": "plots",
    "ray": "ray",
}
"""The optional packages, and the extra of affinec's pyproject.toml that has each."""


class MissingExtra(ModuleNotFoundError):
    """An optional package is not installed; the message says which extra has it."""


def install_hint(package: str) -> str:
    """How to install the extra that has `package` (affinec installs from its
    checkout, not from a package index)."""
    extra = EXTRAS[package]
    return f"pip install -e '.[{extra}]' in affinec's checkout"


def missing_extra(error: ModuleNotFoundError, needed_by: str) -> ModuleNotFoundError:
    """`error` as a `MissingExtra` naming the extra to install, where the module
    missing is an optional package's; else `error` itself (a broken install of
    anything else is not an extra's business)."""
    package = (error.name or "").partition(".")[0]
    if package not in EXTRAS:
        return error
    return MissingExtra(
        f"{needed_by} needs {package}, which is not installed: "
        f"{install_hint(package)} (the `{EXTRAS[package]}` extra)",
        name=package,
    )


__all__ = ["EXTRAS", "MissingExtra", "install_hint", "missing_extra"]
