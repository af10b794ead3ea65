"""The vocabulary every level shares: what is computed (`spec`: the convolution,
matrix and outer products; `dtypes`: their element types) and how a failure is told
(`diagnostics`: located errors in MLIR's wording, with `mlir_wording`,
`irdl_verify` and the semi-affine maps of `semi_affine` beneath them).

Nothing here imports another folder of affinec.
"""
