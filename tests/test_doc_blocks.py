"""Every code block of README.md and docs/*.md that is Python or a shell command runs
as written, so a reader can trust what a page shows.

A page's blocks run in their order, in one fresh directory (the repository's top-level
entries linked into it, so `python examples/...` works and what a command writes lands
there): ```python blocks in one namespace per page, ```sh / ```bash blocks with
`bash -e` and the virtual environment's bin first on PATH, ```console blocks' `$ `
lines the same way (the other lines are output, not compared). An HTML comment on the
line before a fence marks it:

- `<!-- gpu -->`: needs a CUDA GPU; the page's blocks run with it in
  `test_a_pages_gpu_blocks_run` (marked `gpu`, skipped without one);
- `<!-- no-run -->`: not run at all (output, or minutes long such as `make test`).

A block that defines hypothesis tests does not call them; `tests/test_docs.py` runs
the README's outside the suite's hypothesis profiles.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"python", "sh", "bash", "console"}
MARKS = {"gpu", "no-run"}

FENCE = re.compile(
    r"^(?P<marks>(?:<!--[^\n]*-->[ \t]*\n)*)```(?P<lang>[\w+-]*)[^\n]*\n(?P<code>.*?)^```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    marks: frozenset[str]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, with the marks of the comments just before them."""
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        marks = frozenset(re.findall(r"<!--\s*([\w-]+)\s*-->", m["marks"]))
        line = text.count("\n", 0, m.start("lang")) + 1
        out.append(Block(page.name, line, m["lang"], m["code"], marks))
    return out


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in RUN and "no-run" not in b.marks]


def shell_text(block: Block) -> str:
    if block.lang != "console":
        return block.code
    return "\n".join(
        line[2:] for line in block.code.splitlines() if line.startswith("$ ")
    )


def _workspace(tmp_path: Path) -> Path:
    for entry in ROOT.iterdir():
        if entry.name not in {".git", ".hypothesis", ".pytest_cache", ".ruff_cache"}:
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


def _environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    # what a user's shell has: no verification after every pass (the suite's
    # conftest sets it), and a tuning cache of the page's own
    env.pop("AFFINEC_VERIFY_EACH", None)
    env["AFFINEC_TUNING_CACHE"] = str(tmp_path / "tuning-cache.json")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run_page(page: Path, tmp_path: Path, monkeypatch, gpu: bool) -> int:
    """Run the page's blocks in order (GPU blocks only when `gpu`); how many ran."""
    work = _workspace(tmp_path)
    env = _environment(tmp_path)
    monkeypatch.chdir(work)
    monkeypatch.delenv("AFFINEC_VERIFY_EACH", raising=False)
    monkeypatch.setenv("AFFINEC_TUNING_CACHE", env["AFFINEC_TUNING_CACHE"])
    namespace: dict = {"__name__": f"docs.{page.stem}"}
    ran = 0
    for block in runnable(page):
        if "gpu" in block.marks and not gpu:
            continue
        ran += 1
        if block.lang == "python":
            code = compile(block.code, block.where, "exec", dont_inherit=True)
            exec(code, namespace)  # noqa: S102
            continue
        result = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", shell_text(block)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, (
            f"{block.where}: exit {result.returncode}\n"
            f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        )
    return ran


IDS = [p.relative_to(ROOT).as_posix() for p in PAGES]


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_a_pages_blocks_run(page, tmp_path, monkeypatch):
    if not any("gpu" not in b.marks for b in runnable(page)):
        pytest.skip("no block to run without a GPU")
    _run_page(page, tmp_path, monkeypatch, gpu=False)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if any("gpu" in b.marks for b in runnable(p))],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_a_pages_gpu_blocks_run(page, tmp_path, monkeypatch):
    _run_page(page, tmp_path, monkeypatch, gpu=True)


def test_every_block_says_how_it_runs():
    """Every fence names its language, marks are the known ones, and a block
    that looks like a command or Python is one the runner runs (or is marked)."""
    for page in PAGES:
        for block in blocks(page):
            assert block.marks <= MARKS, f"{block.where}: unknown mark {block.marks}"
            if block.lang in RUN:
                continue
            first = block.code.lstrip().split("\n", 1)[0]
            looks_runnable = re.match(
                r"(\$ |\.venv/|affinec(-opt)? |python |pip |make |import |from \w+ import)",
                first,
            )
            assert not looks_runnable, (
                f"{block.where}: a ```{block.lang} block that looks like code to run; "
                "fence it as python or sh, or mark it <!-- no-run -->"
            )


def test_the_collector_reads_marks_and_languages(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n<!-- gpu -->\n```python\nx = 1\n```\n\n```sh\necho hi\n```\n\n"
        "<!-- no-run -->\n```console\n$ make test\nok\n```\n\n```mlir\nfunc\n```\n"
    )
    found = blocks(page)
    assert [(b.lang, sorted(b.marks), b.line) for b in found] == [
        ("python", ["gpu"], 4),
        ("sh", [], 8),
        ("console", ["no-run"], 13),
        ("mlir", [], 18),
    ]
    assert [b.lang for b in runnable(page)] == ["python", "sh"]
    assert shell_text(Block("p", 1, "console", "$ a b\nout\n$ c\n", frozenset())) == (
        "a b\nc"
    )
