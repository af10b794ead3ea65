"""`convert-scf-to-cf` lowers every scf op in one walk: the module it leaves is
the one a walk repeated until nothing matches leaves (xDSL's recursive walker),
op for op, on nests of loops, branches and switches and on a compiled kernel."""

from __future__ import annotations

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker
from xdsl.transforms.convert_scf_to_cf import IfLowering, SwitchLowering

from affinec.base.diagnostics import verify
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.ir.context import make_context
from affinec.passes.convert_scf_to_cf import AnnotatedForLowering, ConvertScfToCf

NESTS = """
func.func @f(%n: index, %m: memref<64xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %n step %c1 {
    %big = arith.cmpi sgt, %i, %c8 : index
    scf.if %big {
      scf.for %j = %c0 to %c8 step %c1 {
        %s = arith.addi %i, %j : index
        %v = arith.index_cast %s : index to i32
        // (xDSL's switch lowering takes a case of one block: no loop in it)
        scf.index_switch %j
        case 2 {
          memref.store %v, %m[%i] : memref<64xi32>
          scf.yield
        }
        default {
          memref.store %v, %m[%j] : memref<64xi32>
          scf.yield
        }
        scf.for %k = %c0 to %c8 step %c1 {
          memref.store %v, %m[%k] : memref<64xi32>
        } {affinec.unroll}
      }
    } else {
      %w = scf.if %big -> (i32) {
        %a = arith.constant 1 : i32
        scf.yield %a : i32
      } else {
        %b = arith.constant 2 : i32
        scf.yield %b : i32
      }
      memref.store %w, %m[%i] : memref<64xi32>
    }
  }
  func.return
}
"""


def _repeated_walk(module: ModuleOp) -> None:
    PatternRewriteWalker(
        GreedyRewritePatternApplier(
            [SwitchLowering(), IfLowering(), AnnotatedForLowering()]
        )
    ).rewrite_module(module)


def _no_scf(module: ModuleOp) -> bool:
    return all(op.dialect_name() != "scf" for op in module.walk())


def test_nests_are_lowered_in_one_walk_as_in_repeated_ones() -> None:
    once = parse_module(make_context(), NESTS)
    repeated = once.clone()
    ConvertScfToCf().apply(Context(), once)
    _repeated_walk(repeated)
    assert _no_scf(once)
    verify(once)
    assert str(once) == str(repeated)
    assert "affinec.unroll" in str(once)  # moved to the back edge


@pytest.mark.parametrize(
    "spec",
    [
        ConvSpec(1, 16, 8, 8, 16, 3, 3, padding=1, dtype="f16"),
        ConvSpec(2, 8, 6, 6, 8, 3, 3, padding=1),
    ],
    ids=str,
)
def test_a_kernel_is_lowered_in_one_walk_as_in_repeated_ones(spec) -> None:
    passes = default_passes()
    k = next(i for i, p in enumerate(passes) if p.name == "convert-scf-to-cf")
    once = build(spec)
    Pipeline(passes[:k]).run(once, verify_each=False)
    repeated = once.clone()
    ConvertScfToCf().apply(Context(), once)
    _repeated_walk(repeated)
    assert _no_scf(once)
    assert str(once) == str(repeated)
