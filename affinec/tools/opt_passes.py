"""`affinec-opt --list-passes`: every pass with a one-sentence summary and its
options (their kinds, defaults and the docstrings under the pass's fields), then the
named pipelines and xDSL's passes.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import IO

from xdsl.passes import ModulePass, get_pass_option_infos

from affinec.driver.pipeline import available_passes
from affinec.driver.pipeline_names import NAMED_PIPELINES, pipeline_text


def list_passes(out: IO[str]) -> None:
    """Every pass with its options and summary, then the named pipelines."""
    from affinec.driver.pipelines import named_passes
    from affinec.passes import get_all_passes

    ours = get_all_passes()
    print("affinec passes:", file=out)
    for name in sorted(ours):
        _describe_pass(ours[name](), out)
    print("\nnamed pipelines:", file=out)
    for name, named in sorted(NAMED_PIPELINES.items()):
        text = pipeline_text(named_passes(name, None, 1))
        print(f"  {name}: {named.summary}\n      = {text}", file=out)
    others = sorted(set(available_passes()) - set(ours))
    print(f"\nxDSL passes (also available): {', '.join(others)}", file=out)


_OPTION_KINDS = {
    "tuple[int, ...]": "integers separated by commas",
    "bool": "true or false",
    "int": "an integer",
    "str": "a string",
    "tuple[str, ...]": "names separated by commas",
}


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(])")


def summary(doc: str | None) -> str:
    """The first sentence of a docstring, whole however many lines it spans."""
    paragraph = (doc or "").strip().split("\n\n")[0]
    text = " ".join(paragraph.split())
    return _SENTENCE_END.split(text, maxsplit=1)[0]


def _describe_pass(cls: type[ModulePass], out: IO[str]) -> None:
    print(f"  {cls.name}: {summary(cls.__doc__)}", file=out)
    docs = _option_docs(cls)
    for info in get_pass_option_infos(cls):
        default = f", default {info.default_value}" if info.default_value else ""
        option = info.name.replace("_", "-")
        written = info.expected_type.strip("'\"")
        kind = _OPTION_KINDS.get(written, written)
        print(f"      {option}: {kind}{default}", file=out)
        if info.name in docs:
            for line in textwrap.wrap(docs[info.name], 72):
                print(f"          {line}", file=out)


def _option_docs(cls: type) -> dict[str, str]:
    """The docstrings under a dataclass's fields (Python keeps them only in the
    source), joined into one line each."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and hasattr(tree.body[0], "body") else []
    docs: dict[str, str] = {}
    for field_, after in zip(body, body[1:], strict=False):
        if (
            isinstance(field_, ast.AnnAssign)
            and isinstance(field_.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field_.target.id] = " ".join(after.value.value.split())
    return docs
