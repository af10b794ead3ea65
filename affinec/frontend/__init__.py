"""From a spec to the naive IR the pipeline starts from, and what that IR means.

- `naive`: `build(spec)`, the `affine.parallel` module of a spec (the contraction
  written as loops, zero padding as padded loads, the epilogue after the sum).
- `contraction`: the index algebra of a spec (which loops are parallel, which
  reduce, how each array is indexed), read back from IR by the passes.
- `reference`: the float64 result of a spec and the tolerance a result is judged by.
- `networks`: the convolutions of real networks (ResNet-50, VGG-16, MobileNetV2,
  ...) as specs with their counts.
"""
