"""The 3x3 convolution with ReLU of PlaidML's kernel-generation walk-through, tiled
with the tile sizes PlaidML's cost model picked.

    python examples/conv3x3_relu.py              # the IR after each pass
    python examples/conv3x3_relu.py --check      # and the passes proven on a smaller
                                                 # convolution by the interpreter

PlaidML's example: 32 images of 224x224 with 64 channels in and out (NHWC), "same"
padding, ReLU fused. Its chosen tiles are n 16, x 2, y 2, co 32 for the output and
i 2, j 3, ci 8 for the reduction. Two things follow, both visible in the IR:

- `i` (3 filter rows) in tiles of 2 leaves a partial tile, which PlaidML handles with a
  fast path without bounds checks and a slow path with them: `separate=true` does the
  same here, peeling the partial reduction tile off into its own loop nest (every
  output tile is full at this size; where one is not, the block loop is versioned
  on the grid variables by an `affine.if`, as `--check`'s smaller spec shows).
- Cutting both `i` and `ci` into several tiles reorders the sum of each output, so
  the pass asks for `reassociate=true`; the check then holds the result to the f32
  tolerance against the float64 reference rather than bit for bit.
"""

from __future__ import annotations

import argparse

from affinec.base.spec import ConvSpec
from affinec.driver.pipeline import Pipeline, print_ir_after_each
from affinec.frontend.naive import build

PLAIDML_CONV = ConvSpec(
    n=32,
    c=64,
    h=224,
    w=224,
    k=64,
    r=3,
    s=3,
    padding=1,
    layout="nhwc",
    filter_layout="rsck",
    epilogue="relu",
)
PIPELINE = (
    "affine-loop-tile{tile-sizes=16,2,2,32 reduction-tile-sizes=2,3,8 "
    "separate=true reassociate=true},affinec-split,affinec-sink,affinec-canonicalize"
)

SMALL = ConvSpec(
    n=2,
    c=8,
    h=5,
    w=5,
    k=4,
    r=3,
    s=3,
    padding=1,
    layout="nhwc",
    filter_layout="rsck",
    epilogue="relu",
)
SMALL_PIPELINE = (
    "affine-loop-tile{tile-sizes=1,2,2,4 reduction-tile-sizes=2,3,4 "
    "separate=true reassociate=true},affinec-split,affinec-sink,affinec-canonicalize"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--pipeline", default=PIPELINE)
    parser.add_argument(
        "--check", action="store_true", help="prove the passes on a smaller spec"
    )
    args = parser.parse_args()

    module = build(PLAIDML_CONV)
    print("// -----// The naive IR //----- //")
    print(module, end="\n\n")
    Pipeline.parse(args.pipeline).run(module, callback=print_ir_after_each())

    if args.check:
        small = build(SMALL)
        Pipeline.parse(SMALL_PIPELINE).run(small, check=True)
        print(
            f"// {SMALL_PIPELINE} on `{SMALL.to_text()}`: the tiling is within the "
            "f32 tolerance of the float64 reference, every later pass bit for bit "
            "equal to it."
        )


if __name__ == "__main__":
    main()
