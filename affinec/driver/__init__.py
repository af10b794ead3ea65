"""The pipeline and what drives it: `pipelines` (the named recipes and their
options), `config` and `kernel_config` (the typed knobs and `config_for`),
`checking` (the interpreter's proof of each stage against float64), `pipeline`
(`Pipeline`: passes run, printed and checked), `compiler` (`compile_to_ptx`: spec
to a loaded kernel) and `benchmark` (a kernel timed against cuDNN in the same run).
"""
