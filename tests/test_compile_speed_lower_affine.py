"""`lower-affine` uses an index constant again in its block rather than making one
that `cse` would erase: after `cse` the module is the one made without, op for op,
and so is the PTX; before it, fewer constants."""

from __future__ import annotations

import pytest
from xdsl.context import Context

from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.passes import lower_affine

SPECS = [
    ConvSpec(1, 64, 16, 16, 64, 3, 3, padding=1, dtype="f16"),
    ConvSpec(1, 3, 32, 32, 64, 7, 7, stride=2, padding=3, dtype="f16"),
    ConvSpec(2, 8, 6, 6, 8, 3, 3, padding=1),
    MatmulSpec(128, 96, 64, dtype="f16"),
]


def _made_anew(monkeypatch) -> None:
    plain = lower_affine.lower_op
    monkeypatch.setattr(
        lower_affine, "lower_op", lambda op, known, _=None: plain(op, known)
    )


def _through(spec, last: str) -> tuple[str, int]:
    """The module's text after the pass `last`, and its constants after
    `lower-affine`."""
    passes = default_passes(config_for(spec))
    k = next(i for i, p in enumerate(passes) if p.name == last)
    at = next(i for i, p in enumerate(passes) if p.name == "lower-affine")
    module = build(spec)
    Pipeline(passes[: at + 1]).run(module, verify_each=False)
    constants = sum(op.name == "arith.constant" for op in module.walk())
    for p in passes[at + 1 : k + 1]:
        p.apply(Context(), module)
    return str(module), constants


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_after_cse_the_module_is_the_one_made_without(spec, monkeypatch) -> None:
    shared, fewer = _through(spec, "cse")
    with monkeypatch.context() as m:
        _made_anew(m)
        anew, more = _through(spec, "cse")
    assert shared == anew
    assert fewer < more


@pytest.mark.parametrize("spec", SPECS[:2], ids=str)
def test_the_ptx_is_the_same(spec, monkeypatch) -> None:
    from affinec.driver.compiler import compile_to_ptx

    shared = compile_to_ptx(spec, config_for(spec), arch="sm_90", verify_each=False)
    _made_anew(monkeypatch)
    anew = compile_to_ptx(spec, config_for(spec), arch="sm_90", verify_each=False)
    assert shared.ptx == anew.ptx
