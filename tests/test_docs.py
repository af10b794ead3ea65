"""What the documentation promises a reader holds outside the suite too: the
hypothesis example passes when copied into a test file of one's own, and the
install hints name what exists. (Every code block of the pages runs in
tests/test_doc_blocks.py.)"""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import affinec.testing

ROOT = Path(__file__).parent.parent


def _readme_hypothesis_example() -> str:
    text = (ROOT / "README.md").read_text()
    found = [
        b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "@given" in b
    ]
    assert len(found) == 1, "the README shows one hypothesis test"
    return found[0]


def _docstring_example() -> str:
    """The indented example of affinec.testing's docstring."""
    doc = affinec.testing.__doc__ or ""
    match = re.search(r"\n\n((?:    .*\n|\n)+)", doc)
    assert match, "affinec.testing's docstring has an indented example"
    return textwrap.dedent(match[1]).strip() + "\n"


def test_the_readme_and_the_docstring_show_the_same_example():
    assert _docstring_example() == _readme_hypothesis_example().strip() + "\n"


def test_the_hypothesis_example_passes_as_written(tmp_path):
    """The README's test, in a file of its own run by a fresh pytest that loads no
    conftest (so none of this suite's hypothesis profiles) outside CI (where
    hypothesis loads its own `ci` profile, without a deadline): hypothesis's
    defaults, its 200 ms deadline included, apply, and the example passes."""
    try:  # the variables by which hypothesis knows it runs in CI
        from hypothesis._settings import _CI_VARS as ci_variables
    except ImportError:
        ci_variables = {"CI": None}
    example = _readme_hypothesis_example()
    sanity = textwrap.dedent(
        """

        def test_hypothesis_defaults_apply():
            from datetime import timedelta

            from hypothesis import settings

            assert settings.default.deadline == timedelta(milliseconds=200)
        """
    )
    (tmp_path / "test_my_pass.py").write_text(example + sanity)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"HYPOTHESIS_PROFILE", "AFFINEC_VERIFY_EACH", "PYTEST_ADDOPTS"}
        and k not in ci_variables
        and not k.startswith("PYTEST_XDIST")
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--noconftest", "-p", "no:cacheprovider"]
        + ["-p", "no:xdist", "--rootdir", str(tmp_path), "test_my_pass.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "2 passed" in result.stdout


@pytest.mark.parametrize("pattern", [r"pip install[^\n`]*affinec\["])
def test_no_page_or_module_installs_from_a_package_index(pattern):
    """affinec is installed from its checkout (`pip install -e '.[extra]'`), never
    `pip install affinec[...]`: it is not on a package index."""
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *ROOT.glob("docs/*.md")]
    for folder in ("affinec", "dialects", "passes", "benchmarks", "scripts"):
        files += (ROOT / folder).rglob("*.py")
    offenders = [
        str(f.relative_to(ROOT)) for f in files if re.search(pattern, f.read_text())
    ]
    assert offenders == []


_WORK_PERIODS = ("sitt" + "ing", "sess" + "ion")
"""The words a diary counts its days in (spelt in parts, so that this file does not
match the checks below itself)."""
_PERIOD = "|".join(_WORK_PERIODS)
_SCRIPT_NAME = "gpu_" + _WORK_PERIODS[1]
"""The one script whose name holds such a word (`scripts/gpu_*.sh`): a name, not a
narration."""


def test_no_page_narrates_the_projects_making():
    """The pages say what the tool does and what it measured, not who built it
    when: none of the words a diary counts its days in."""
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *ROOT.glob("docs/**/*.md")]
    for page in pages:
        text = page.read_text().replace(_SCRIPT_NAME, "")
        found = re.search(rf"(?i)[^\n]*\b({_PERIOD})s?\b[^\n]*", text)
        assert found is None, f"{page.relative_to(ROOT)}: {found[0]!r}"


_NARRATION = re.compile(
    r"(?i)\b(this|that|the|previous|next|last|same|a later|an earlier"
    r"|(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh"
    r"|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth"
    rf"|nineteenth|twentieth)) {_WORK_PERIODS[1]}s?('s)?\b|\b{_WORK_PERIODS[0]}s?\b"
)


def test_no_docstring_or_help_narrates_the_projects_making():
    """Code speaks to users: no docstring, comment or help text tells which period
    of work built what (a library's own use of such words, Ray's say, is another
    matter)."""
    files = []
    for folder in (
        "affinec",
        "dialects",
        "passes",
        "benchmarks",
        "scripts",
        "examples",
    ):
        files += (ROOT / folder).rglob("*.py")
    found = [
        f"{f.relative_to(ROOT)}: {m[0]}"
        for f in files
        if (m := _NARRATION.search(f.read_text()))
    ]
    assert found == []


def test_the_readme_is_a_manual():
    """Read in ten minutes: at most 250 lines, the two commands a fresh machine
    needs, links into docs/ that exist."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).is_file(), link
