"""The code of the documentation runs: every ```python block of a page, in order, in
one namespace (a page that stops working fails here)."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs"


@pytest.mark.parametrize("page", ["WRITING_A_PASS.md"])
def test_the_pages_code_runs(page):
    text = (DOCS / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert blocks
    namespace: dict = {"__name__": f"docs.{page}"}
    for block in blocks:
        exec(compile(block, f"{page}", "exec"), namespace)  # noqa: S102
