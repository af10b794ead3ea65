"""From the llvm level to a running kernel: `emitter` (LLVM IR and PTX through
llvmlite), `ptxas` (assembling and reading the register and spill report),
`targets` (the `-t ptx`/`-t llvm` outputs of `affinec-opt`), `runtime` (loading
and launching through numba.cuda, checking every argument), `cuda_launch` and
`kernel_arguments` (the launch and its parameters) and `timing` (GPU time, not
Python's).
"""
