"""`affinec-opt`: xdsl-opt with affinec's dialects and passes, and MLIR's spellings.

Every xdsl-opt flag works. Added, as `mlir-opt` users type them:

    --pass-pipeline='builtin.module(func.func(affine-loop-tile{tile-sizes=...}))'
    --mlir-print-ir-before-all / --mlir-print-ir-after-all   (to stderr)
    --mlir-timing                                             (a report on stderr)
    --list-passes                                             (passes and options)

Every user error (malformed IR, an op that does not verify, an unknown pass or option,
a pass that refuses its input) is one located message and exit code 1:

    conv.mlir:7:9: error: 'affine.parallel' op tile size 0 must be positive
            affine.parallel (%n, %k) = (0, 0) to (4, 8) {
            ^

`--debug` shows the Python traceback instead.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, get_pass_option_infos
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_spec
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from affinec.context import all_dialects
from affinec.diagnostics import (
    OpError,
    first_line,
    format_exception,
    is_user_error,
    parse_module,
    unprintable_op,
    verify,
    xdsl_failure,
)
from affinec.pipeline import Pipeline, PipelineError, available_passes
from affinec.pipelines import NAMED_PIPELINES, pass_text, pipeline_text


class UserError(Exception):
    """An error to report as one formatted message and exit code 1."""


class AffinecOptMain(xDSLOptMain):
    version_format = "affinec-opt (xdsl {xdsl_version})"

    def __init__(self, args: Sequence[str] | None = None) -> None:
        self.sources: dict[str, str] = {}
        self.affinec_pipeline = Pipeline([])
        self.timings: list[tuple[str, float]] = []
        super().__init__(
            description="affinec's modular optimizer driver (xdsl-opt with MLIR's "
            "flags)",
            args=args,
        )

    # -- registration -------------------------------------------------------------------

    def register_all_dialects(self) -> None:
        for name, factory in all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        for name, factory in available_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        from affinec.targets import get_all_targets

        self.available_targets.update(get_all_targets())

    def register_all_frontends(self) -> None:
        def parse_mlir(stream: IO[bytes]) -> ModuleOp:
            text = stream.read().decode("utf-8")
            name = self.get_input_name()
            offset = getattr(self, "_chunk_offset", 0)
            return parse_module(self.ctx, text, name, offset)

        self.available_frontends["mlir"] = parse_mlir

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
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
            "--mlir-timing",
            action="store_true",
            help="report the time of parsing, each pass and output on stderr",
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

    # -- the pipeline -------------------------------------------------------------------

    def setup_pipeline(self) -> None:
        self.check_target()
        if self.args.passes and self.args.pass_pipeline:
            raise UserError("give the pipeline with -p or --pass-pipeline, not both")
        text = self.args.pass_pipeline or self.args.passes
        try:
            self.affinec_pipeline = Pipeline.parse(text)
        except PipelineError as e:
            raise UserError(str(e)) from e

    def check_target(self) -> None:
        """Refuse, before reading any input, a target affinec does not emit or
        options its target does not take."""
        try:
            spec = parse_spec(self.args.target)
        except ArgSpecParseError as e:
            raise UserError(f"malformed target {self.args.target!r}: {e}") from None
        if spec.name not in AFFINEC_TARGETS:
            raise UserError(
                f"target '{spec.name}' is not supported: affinec-opt emits -t "
                f"{', '.join(AFFINEC_TARGETS)} (xDSL's other targets take xDSL's own "
                "dialects: use xdsl-opt for those)"
            )
        factory = self.available_targets[spec.name]
        try:
            factory().from_spec(spec)  # pyright: ignore
        except (ValueError, TypeError) as e:
            raise UserError(f"target '{spec.name}': {first_line(str(e))}") from None

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        self._chunk_offset = start_offset
        start = time.perf_counter()
        module = super().parse_chunk(chunk, file_extension, start_offset)
        self.timings.append(("Parse", time.perf_counter() - start))
        return module

    def prepare_input(self):
        chunks, extension = super().prepare_input()
        # Keep the whole text, for the source lines of error messages.
        if self.args.split_input_file:
            texts = [c.getvalue().decode("utf-8") for c, _ in chunks]  # pyright: ignore
            self.sources[self.get_input_name()] = "// -----".join(texts)
        else:
            stream, offset = chunks[0]
            text = stream.read()
            self.sources[self.get_input_name()] = text.decode("utf-8")
            chunks = [(io.BytesIO(text), offset)]
        return chunks, extension

    def apply_passes(self, prog: ModuleOp) -> None:
        if not self.args.disable_verify:
            verify(prog)

        def dump(when: str, p: ModulePass) -> None:
            print(f"// -----// IR Dump {when} {p.name} //----- //", file=sys.stderr)
            Printer(stream=sys.stderr).print_op(prog)
            print("\n", file=sys.stderr)

        for p in self.affinec_pipeline.passes:
            if self.args.mlir_print_ir_before_all:
                dump("Before", p)
            start = time.perf_counter()
            Pipeline([p]).run(
                prog, ctx=self.ctx, verify_each=not self.args.disable_verify
            )
            self.timings.append((pass_text(p), time.perf_counter() - start))
            if self.args.mlir_print_ir_after_all:
                dump("After", p)

    def output_resulting_program(self, prog: ModuleOp) -> str:
        start = time.perf_counter()
        try:
            text = super().output_resulting_program(prog)
        except Exception as e:
            raise _target_error(self.args.target, prog, e) from e
        self.timings.append(("Output", time.perf_counter() - start))
        return text

    # -- errors -------------------------------------------------------------------------

    def format(self, error: BaseException) -> str:
        offset = getattr(self, "_chunk_offset", 0)
        return format_exception(error, self.sources, offset)

    def print_timing(self) -> None:
        total = sum(t for _, t in self.timings) or 1e-12
        rule = "===" + "-" * 73 + "==="
        print(rule, file=sys.stderr)
        print("... Execution time report ...".center(79), file=sys.stderr)
        print(rule, file=sys.stderr)
        print(f"  Total Execution Time: {total:.4f} seconds\n", file=sys.stderr)
        print("  ----Wall Time----  ----Name----", file=sys.stderr)
        for name, t in self.timings:
            print(f"  {t:8.4f} ({100 * t / total:5.1f}%)  {name}", file=sys.stderr)
        print(f"  {total:8.4f} (100.0%)  Total", file=sys.stderr)


AFFINEC_TARGETS = ("mlir", "llvm", "ptx")
"""The targets affinec-opt emits. xDSL's others (x86, riscv, csl, mps...) take
xDSL's own dialects, and fail inside xDSL, or print nothing, on anything else."""


def _target_error(target: str, module: ModuleOp, error: Exception) -> Exception:
    """What to raise for `error` from emitting `module` as `target`: when it comes
    from inside xDSL, an error at the op xDSL cannot print (or about the module);
    else `error` itself."""
    if not is_user_error(error) or isinstance(error, DiagnosticException):
        return error
    op = unprintable_op(module)
    if op is not None:
        return OpError(op, f"xDSL cannot print this op ({xdsl_failure(error)})")
    name = parse_spec(target).name
    return UserError(f"target '{name}' cannot emit this module: {xdsl_failure(error)}")


def list_passes(out: IO[str]) -> None:
    """Every pass with its options and summary, then the named pipelines."""
    from affinec.passes import get_all_passes

    ours = get_all_passes()
    print("affinec passes:", file=out)
    for name in sorted(ours):
        _describe_pass(ours[name](), out)
    print("\nnamed pipelines:", file=out)
    for name, named in sorted(NAMED_PIPELINES.items()):
        text = pipeline_text(named.build())
        print(f"  {name}: {named.summary}\n      = {text}", file=out)
    others = sorted(set(available_passes()) - set(ours))
    print(f"\nxDSL passes (also available): {', '.join(others)}", file=out)


def _describe_pass(cls: type[ModulePass], out: IO[str]) -> None:
    doc = (cls.__doc__ or "").strip().splitlines()
    print(f"  {cls.name}: {doc[0] if doc else ''}", file=out)
    for info in get_pass_option_infos(cls):
        default = f" (default {info.default_value})" if info.default_value else ""
        option = info.name.replace("_", "-")
        print(f"      --{option}: {info.expected_type}{default}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    tool: AffinecOptMain | None = None
    try:
        tool = AffinecOptMain(argv)
        if tool.args.list_passes:
            list_passes(sys.stdout)
            return 0
        tool.run()
        if tool.args.mlir_timing:
            tool.print_timing()
        return 0
    except (
        ParseError,
        DiagnosticException,
        PipelineError,
        UserError,
        OSError,
        ValueError,
    ) as e:
        if debug:
            raise
        message = tool.format(e) if tool is not None else format_exception(e)
        print(message, file=sys.stderr)
        return 1
    except ArgSpecParseError as e:  # xDSL's, a BaseException: the -t target's text
        if debug:
            raise
        print(
            f"error: malformed target: {str(e).splitlines()[-1].strip()}",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
