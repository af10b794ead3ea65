"""scripts/kernel_digests.py, which tells whether a compiler change changed the
kernels: one kernel digested and compared with itself; records compared in words."""

from __future__ import annotations

import json

import pytest
from repository_scripts import load_script

from affinec.backend.ptxas import find_ptxas


@pytest.fixture(scope="module")
def digests():
    return load_script("scripts/kernel_digests.py")


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_a_kernel_compared_with_itself_is_the_same(digests, tmp_path, capsys):
    record = tmp_path / "before.json"
    only = ["--only", "conv1x1-256-64 f16 sm_90"]
    assert digests.main([*only, "--json", str(record)]) == 0
    (row,) = json.loads(record.read_text()).values()
    assert row["registers"] > 0 and row["spill_bytes"] == 0 and len(row["ptx"]) == 16
    assert digests.main([*only, "--against", str(record)]) == 0
    assert "0 of 1 kernels differ" in capsys.readouterr().out


def test_differences_say_what_moved(digests):
    row = {"ptx": "a", "sass": "s", "registers": 90, "spill_bytes": 0}
    row |= {"instructions": 500, **{kind: 1 for kind in digests.KINDS}}
    same_sass = {**row, "ptx": "b"}
    longer = {**row, "ptx": "c", "sass": "t", "instructions": 520, "LDS": 3}
    assert digests.differences({"k": row}, {"k": row}) == []
    assert digests.differences({"k": row}, {"k": same_sass}) == [
        "k: PTX differs, SASS identical"
    ]
    assert digests.differences({"k": row}, {"k": longer}) == [
        "k: differs (instructions 500 -> 520, LDS 1 -> 3)"
    ]
    refused = {"refused": "affinec-mma-sync: the tile does not fit"}
    assert digests.differences({"k": row}, {"k": refused}) == [
        "k: refused after (affinec-mma-sync: the tile does not fit)"
    ]
    assert digests.differences({"k": row}, {"j": row}) == [
        "j: only after",
        "k: only before",
    ]


def test_a_record_that_cannot_be_read_is_named_before_any_compile(
    digests, tmp_path, capsys
):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    for record in (broken, tmp_path / "missing.json"):
        with pytest.raises(SystemExit) as exit:
            digests.main(["--against", str(record)])
        assert exit.value.code == 2
        assert f"--against {record}: " in capsys.readouterr().err
