"""What a user runs: the command lines `affinec` (`cli`, with `cli_flags` and
`cli_tune`) and `affinec-opt` (`opt`, `verify_diagnostics`, and `universe`, which
makes affinec's dialects and passes known to xDSL's own tools), `demo`, and the
hand-written Hopper matrix product the Hopper tests start from (`hopper_matmul`).
The helpers for pass authors are `affinec.testing`, beside this folder.
"""
