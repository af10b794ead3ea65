"""The pass-pipeline scripts under examples/ run and prove their passes (`--check`)."""

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_prints_every_stage_and_checks(path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", [str(path), "--check"])
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert "IR Dump After affine-loop-tile" in out
    assert "IR Dump After affinec-sink" in out
    assert 'affinec.mapping = "grid"' in out
