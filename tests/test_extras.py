"""The core runs without the extras (torch, hypothesis, matplotlib), and a module that
needs one names the extra to install when it is missing."""

import subprocess
import sys
import textwrap

from affinec.base.extras import EXTRAS, MissingExtra, install_hint, missing_extra

# a package set to None in sys.modules cannot be imported: as if not installed
_WITHOUT_EXTRAS = (
    "import sys\nsys.modules.update(torch=None, hypothesis=None, matplotlib=None)\n"
)


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_EXTRAS + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_missing_extra_is_named():
    result = _python(
        """
        import importlib
        from affinec.base.extras import MissingExtra
        for module in ("affinec.torch", "affinec.torch.networks", "affinec.testing"):
            try:
                importlib.import_module(module)
            except MissingExtra as e:
                print(module, "|", e)
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for module, package in [
        ("affinec.torch", "torch"),
        ("affinec.torch.networks", "torch"),
        ("affinec.testing", "hypothesis"),
    ]:
        [line] = [x for x in lines if x.startswith(module + " |")]
        assert f"needs {package}, which is not installed" in line
        assert f"pip install -e '.[{EXTRAS[package]}]'" in line


def test_the_plots_name_their_extra():
    result = _python(
        """
        from affinec.tuning import plots
        assert not plots.plots_available()
        try:
            plots._pyplot()
        except ModuleNotFoundError as e:
            print(e)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "pip install -e '.[plots]'" in result.stdout


def test_the_demo_and_the_compiler_need_no_extra():
    """What `make demo` installs (the core) is enough for the demo's path: build,
    every pass interpreted, PTX and ptxas's report (on a small spec here)."""
    result = _python(
        """
        import io
        from affinec.base.spec import ConvSpec
        from affinec.tools.demo import run_demo
        from affinec.tools.cli import main
        out = io.StringIO()
        assert run_demo(ConvSpec(n=1, c=2, h=3, w=3, k=2, r=1, s=1), out=out)
        assert "every stage within" in out.getvalue()
        assert main(["gen", "conv", "--n", "1", "--c", "2", "--h", "3", "--w", "3",
                     "--k", "2", "--r", "1", "--s", "1", "-o", "/dev/null"]) == 0
        loaded = {"torch", "hypothesis", "matplotlib"} & {
            name for name, m in sys.modules.items() if m is not None}
        assert not loaded, loaded
        """
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_missing_extra_leaves_other_errors_alone():
    other = ModuleNotFoundError("No module named 'numpy'", name="numpy")
    assert missing_extra(other, "x") is other
    named = missing_extra(ModuleNotFoundError("gone", name="torch.fx"), "affinec.torch")
    assert isinstance(named, MissingExtra) and named.name == "torch"
    assert (
        install_hint("hypothesis")
        == "pip install -e '.[testing]' in affinec's checkout"
    )
