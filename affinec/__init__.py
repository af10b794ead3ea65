"""affinec: an MLIR-style multi-level IR compiler for affine convolutions."""
