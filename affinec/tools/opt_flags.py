"""`affinec-opt`'s flags: MLIR's options added to xdsl-opt's argument parser, the
help of xDSL's flags that affinec gives MLIR's meaning, and MLIR's spellings of
flags (one dash as well as two, every pass as a flag) rewritten into argparse's.
`affinec.tools.opt` runs what they ask for.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

SPLIT_MARKER = "// -----"
"""What separates the chunks of `--split-input-file` (MLIR's default marker)."""


def add_mlir_arguments(arg_parser: argparse.ArgumentParser) -> set[str]:
    """Add MLIR's flags to xdsl-opt's `arg_parser` and word the help of those of
    xDSL's that take MLIR's meaning; argparse's errors become one line and exit
    code 1. Returns every long option the parser knows (without its `--`)."""

    def error(message: str) -> NoReturn:
        # one line and exit code 1, as every other error (argparse: usage, 2)
        arg_parser.exit(
            1, f"error: affinec-opt: {message} (see 'affinec-opt --help')\n"
        )

    arg_parser.error = error  # pyright: ignore[reportAttributeAccessIssue]
    # xDSL has `--split-input-file` and `--verify-diagnostics` already; affinec
    # gives them MLIR's meaning (see `affinec.tools.opt.AffinecOptMain.run`), and
    # the marker MLIR's takes.
    arg_parser.add_argument(
        "--split-input-marker",
        default=SPLIT_MARKER,
        metavar="MARKER",
        help="what separates the chunks of --split-input-file (also "
        f"--split-input-file=MARKER); default '{SPLIT_MARKER}'",
    )
    arg_parser.add_argument(
        "--pass-pipeline",
        default="",
        help="the pipeline in MLIR's syntax, e.g. "
        "'builtin.module(func.func(affine-loop-tile{tile-sizes=1,64,16,16}))'",
    )
    arg_parser.add_argument(
        "--mlir-print-ir-before-all",
        action="store_true",
        help="print the IR to stderr before every pass",
    )
    arg_parser.add_argument(
        "--mlir-print-ir-after-all",
        action="store_true",
        help="print the IR to stderr after every pass",
    )
    arg_parser.add_argument(
        "--mlir-print-ir-before",
        metavar="PASS[,PASS...]",
        default="",
        help="print the IR to stderr before each pass of these names",
    )
    arg_parser.add_argument(
        "--mlir-print-ir-after",
        metavar="PASS[,PASS...]",
        default="",
        help="print the IR to stderr after each pass of these names",
    )
    arg_parser.add_argument(
        "--mlir-print-op-generic",
        action="store_true",
        help="print the output in the generic form (= --print-op-generic)",
    )
    arg_parser.add_argument(
        "--mlir-timing",
        action="store_true",
        help="report the time of parsing, each pass and output on stderr "
        "(also --time-passes)",
    )
    arg_parser.add_argument(
        "--list-passes",
        action="store_true",
        help="list the passes, their options and the named pipelines, then exit",
    )
    arg_parser.add_argument(
        "--debug",
        action="store_true",
        help="show Python tracebacks instead of one-line errors",
    )
    actions = arg_parser._actions  # pyright: ignore[reportPrivateUsage]
    for action in actions:
        if "--split-input-file" in action.option_strings:
            action.help = (
                "process each chunk between `// -----` lines on its own, going on "
                "after one fails, as mlir-opt does (--split-input-file=MARKER: "
                "another marker)"
            )
        if "--passes" in action.option_strings:
            # xDSL lists its ~150 passes here; ours come first, and with options
            action.help = (
                "the pass pipeline, e.g. 'affinec-default' or "
                "'affine-loop-tile{tile-sizes=1,64,16,16},affinec-split'; "
                "`affinec-opt --list-passes` lists affinec's passes, their "
                "options and the named pipelines (xDSL's passes work too)"
            )
        if "--target" in action.option_strings:
            # xDSL lists its own targets too; affinec-opt emits these three
            action.choices = None
            action.help = (
                "the output: mlir (the IR, the default), llvm (the kernels' LLVM "
                "IR) or ptx (ptx{arch=sm_90 opt-level=3}); llvm and ptx take the llvm + "
                "nvvm level (after convert-gpu-to-nvvm)"
            )
        if "--verify-diagnostics" in action.option_strings:
            action.help = (
                "check the diagnostics against the input's `// expected-error` "
                "(-warning, -remark, -note; @+N, @-N, @above, @below, @unknown; "
                "-re) designators, as mlir-opt does"
            )
    long_options = {
        option[2:]
        for action in actions
        for option in action.option_strings
        if option.startswith("--")
    }
    return long_options


def mlir_spellings(
    argv: Sequence[str], long_options: set[str], passes: set[str]
) -> tuple[list[str], list[str]]:
    """`argv` with MLIR's spellings made argparse's, and the pass flags taken out.

    mlir-opt takes every long option with one dash as well as two
    (`-split-input-file`) and every pass as a flag (`-lower-affine`,
    `--affine-loop-tile="tile-size=32 separate"`), in pipeline order. Returns the
    rewritten arguments and the pass flags as pipeline elements (`name{options}`).
    Options win over passes of the same name; short options (`-p`, `-o`) stay.
    """
    rewritten: list[str] = []
    pass_flags: list[str] = []
    for arg in argv:
        if not arg.startswith("-") or arg in ("-", "--") or len(arg) < 3:
            rewritten.append(arg)
            continue
        body = arg[2:] if arg.startswith("--") else arg[1:]
        name, has_value, value = body.partition("=")
        if name in long_options:
            if name == "split-input-file" and has_value:
                # mlir-opt's optional marker, which argparse cannot take here.
                rewritten += [f"--{name}", f"--split-input-marker={value}"]
            else:
                rewritten.append(f"--{body}")
        elif name in passes:
            pass_flags.append(f"{name}{{{value}}}" if has_value and value else name)
        else:
            rewritten.append(arg)
    return rewritten, pass_flags
