"""The fuzzer (`tests/fuzzing.py`) under hypothesis: modules of every level of the
default pipeline, mutated, fed to `affinec-opt` and `affinec check`, must end in exit
code 0 or a one-line error with exit code 1, in time, never in a traceback.

`make test` runs a small derandomized slice (the `ci` profile: 60 inputs a level);
for minutes of it (1,500 a level):

    HYPOTHESIS_PROFILE=fuzz .venv/bin/pytest -rP tests/test_fuzz.py   # -rP: the counts

A crash found here becomes a named case in `tests/test_hardening.py`.
"""

import pytest
from hypothesis import given, settings

from fuzzing import LEVELS, mutated_cases, run_case, seeds

EXAMPLES = max(60, settings.default.max_examples)
"""Inputs per level: at least 60 (the `ci` profile's 10 would leave levels bare)."""


def test_every_level_has_seeds():
    assert {s.level for s in seeds()} == set(LEVELS)


# The ids keep the level names out of pytest's keywords (`gpu` marks GPU tests).
@pytest.mark.parametrize("level", LEVELS, ids=[f"{x}-level" for x in LEVELS])
def test_mutated_modules_fail_cleanly(level, tmp_path_factory):
    directory = tmp_path_factory.mktemp(f"fuzz-{level}")
    inputs = []

    @settings(max_examples=EXAMPLES)
    @given(mutated_cases(level))
    def fuzz(case):
        inputs.append(case)
        outcome = run_case(case, directory)
        assert outcome.problem is None, outcome.report()

    fuzz()
    # The count a long run reports (`pytest -rP` shows it).
    print(f"{level} level: {len(inputs)} mutated inputs, all ended cleanly")
