"""ResNet-50's first layer through the reference design's tiling, splitting and sinking.

    python examples/resnet50_conv1.py            # the IR after each pass
    python examples/resnet50_conv1.py --check    # and the same pipeline, proven on a
                                                 # smaller convolution by the interpreter

The convolution is the reference design's: 128 images of 4 channels, 224x224, 64
filters of 7x7, stride 2, padding 3, in blocks of 1x64x16x16 outputs. The full-size
IR is only printed: interpreting its 1.2e10 multiply-adds on the CPU would take days.
`--check` runs the same passes, with the block scaled down to the smaller spec, under
`Pipeline.run(check=True)`, which interprets the IR after every pass and stops at the
first pass that changes a bit of the output.
"""

from __future__ import annotations

import argparse

from affinec.base.spec import ConvSpec
from affinec.driver.pipeline import Pipeline, print_ir_after_each
from affinec.frontend.naive import build

RESNET50_CONV1 = ConvSpec(n=128, c=4, h=224, w=224, k=64, r=7, s=7, stride=2, padding=3)
PIPELINE = "affine-loop-tile{tile-sizes=1,64,16,16},affinec-split,affinec-sink"

SMALL = ConvSpec(n=2, c=2, h=17, w=15, k=6, r=7, s=7, stride=2, padding=3)
"""The same layer shape, small enough to interpret in a second: 2 images, 2
channels, 6 filters of 7x7; 9x8 outputs, so 4x4 blocks leave partial tiles."""
SMALL_PIPELINE = "affine-loop-tile{tile-sizes=1,6,4,4},affinec-split,affinec-sink"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--pipeline", default=PIPELINE)
    parser.add_argument(
        "--check", action="store_true", help="prove the passes on a smaller spec"
    )
    args = parser.parse_args()

    module = build(RESNET50_CONV1)
    print("// -----// The naive IR //----- //")
    print(module, end="\n\n")
    Pipeline.parse(args.pipeline).run(module, callback=print_ir_after_each())

    if args.check:
        small = build(SMALL)
        Pipeline.parse(SMALL_PIPELINE).run(small, check=True)
        print(
            f"// {SMALL_PIPELINE} on `{SMALL.to_text()}`: every stage computes, "
            "bit for bit, what the naive IR computes."
        )


if __name__ == "__main__":
    main()
