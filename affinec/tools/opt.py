"""`affinec-opt`: xdsl-opt with affinec's dialects and passes, and MLIR's spellings.

Every xdsl-opt flag works. Added, as `mlir-opt` users type them:

    --pass-pipeline='builtin.module(func.func(affine-loop-tile{tile-sizes=...}))'
    --mlir-print-ir-before-all / --mlir-print-ir-after-all   (to stderr)
    --mlir-timing                                             (a report on stderr)
    --list-passes                                             (passes and options)
    --lower-affine, --affine-loop-tile='tile-size=32 separate' (passes as flags)

MLIR's single-dash spellings work too (`-split-input-file`, `-lower-affine`), and
`--split-input-file` and `--verify-diagnostics` have MLIR's meaning: every chunk
between `// -----` lines is processed on its own, even after one fails, and with
`--verify-diagnostics` the `// expected-error` designators of each chunk are checked
against the diagnostics it produces (`affinec/tools/verify_diagnostics.py`).

Every user error (malformed IR, an op that does not verify, an unknown pass or option,
a pass that refuses its input) is one located message and exit code 1:

    conv.mlir:7:9: error: 'affine.parallel' op tile size 0 must be positive
            affine.parallel (%n, %k) = (0, 0) to (4, 8) {
            ^

Anything else is a bug, and says so: `error: internal error: ValueError: ...`;
`--debug` shows the Python traceback instead.

The flags and their MLIR spellings are `affinec.tools.opt_flags`'s, the listing of
`--list-passes` is `affinec.tools.opt_passes`'s; this module reads the input, runs
the pipeline and reports the diagnostics.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_spec
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    ShrinkException,
)
from xdsl.xdsl_opt_main import xDSLOptMain

from affinec import __version__
from affinec.base.diagnostics import (
    NotUtf8,
    OpError,
    collecting_remarks,
    decode_source,
    exception_notes,
    first_line,
    format_error,
    is_user_error,
    locate_exception,
    location_of,
    unprintable_op,
    verify,
    xdsl_failure,
)
from affinec.base.locating_parser import parse_module
from affinec.driver.pipeline import (
    Pipeline,
    PipelineError,
    available_passes,
    check_options,
)
from affinec.driver.pipeline_names import NAMED_PIPELINES, pass_text
from affinec.ir.context import all_dialects
from affinec.tools.opt_flags import add_mlir_arguments, mlir_spellings
from affinec.tools.opt_passes import list_passes
from affinec.tools.pipes import broken_pipe_exit
from affinec.tools.verify_diagnostics import (
    DesignatorError,
    Diagnostic,
    check,
    parse_expectations,
)


class UserError(Exception):
    """An error to report as one formatted message and exit code 1."""


USER_ERRORS = (
    ParseError,
    DiagnosticException,
    PipelineError,
    UserError,
    OSError,
    NotUtf8,
)
"""What a user's input or flags can cause; anything else is affinec's bug."""


class AffinecOptMain(xDSLOptMain):
    version_format = f"affinec-opt {__version__} (xdsl {{xdsl_version}})"

    def __init__(self, args: Sequence[str] | None = None) -> None:
        self.sources: dict[str, str] = {}
        self.affinec_pipeline = Pipeline([])
        self.pipeline_text = ""
        self.timings: list[tuple[str, float]] = []
        self.pass_flags: list[str] = []
        # xDSLOptMain builds its argparse parser and parses this list right after
        # `register_all_arguments`, which rewrites it in place into the spellings
        # argparse knows (see `affinec.tools.opt_flags.mlir_spellings`).
        self._argv = list(sys.argv[1:] if args is None else args)
        super().__init__(
            description="affinec's modular optimizer driver (xdsl-opt with MLIR's "
            "flags)",
            args=self._argv,
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
        from affinec.backend.targets import get_all_targets

        self.available_targets.update(get_all_targets())

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        long_options = add_mlir_arguments(arg_parser)
        self._argv[:], self.pass_flags = mlir_spellings(
            self._argv, long_options, set(self.available_passes) | set(NAMED_PIPELINES)
        )

    # -- the pipeline -------------------------------------------------------------------

    def setup_pipeline(self) -> None:
        # MLIR's spellings of xDSL's flags, and xDSL's of MLIR's
        self.args.print_op_generic |= self.args.mlir_print_op_generic
        self.args.mlir_timing |= self.args.time_passes
        self.check_target()
        given = [t for t in (self.args.passes, self.args.pass_pipeline) if t]
        if len(given) > 1:
            raise UserError("give the pipeline with -p or --pass-pipeline, not both")
        if given and self.pass_flags:
            raise UserError(
                "give the pipeline with -p, --pass-pipeline or as pass flags "
                f"(--{self.pass_flags[0].split('{')[0]}), not several of them"
            )
        text = given[0] if given else ",".join(self.pass_flags)
        try:
            self.affinec_pipeline = Pipeline.parse(text)
        except PipelineError as e:
            raise UserError(str(e)) from e
        self.pipeline_text = text

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
        target = self.available_targets[spec.name]()
        try:
            check_options(spec, target, "target")
            target.from_spec(spec)  # pyright: ignore
        except PipelineError as e:
            raise UserError(str(e)) from None
        except (ValueError, TypeError) as e:
            raise UserError(f"target '{spec.name}': {first_line(str(e))}") from None

    def apply_passes(self, prog: ModuleOp) -> None:
        if not self.args.disable_verify:
            verify(prog)

        def dump(when: str, p: ModulePass) -> None:
            print(f"// -----// IR Dump {when} {p.name} //----- //", file=sys.stderr)
            Printer(stream=sys.stderr).print_op(prog)
            print("\n", file=sys.stderr)

        # affinec-default: config_for's configuration for the module's spec
        pipeline = Pipeline.for_module(self.pipeline_text, prog)
        before = _pass_names(self.args.mlir_print_ir_before, "before")
        after = _pass_names(self.args.mlir_print_ir_after, "after")
        for p in pipeline.passes:
            if self.args.mlir_print_ir_before_all or p.name in before:
                dump("Before", p)
            start = time.perf_counter()
            Pipeline([p]).run(
                prog, ctx=self.ctx, verify_each=not self.args.disable_verify
            )
            self.timings.append((pass_text(p), time.perf_counter() - start))
            if self.args.mlir_print_ir_after_all or p.name in after:
                dump("After", p)

    def output_resulting_program(self, prog: ModuleOp) -> str:
        start = time.perf_counter()
        try:
            text = super().output_resulting_program(prog)
        except Exception as e:
            raise _target_error(self.args.target, prog, e) from e
        self.timings.append(("Output", time.perf_counter() - start))
        return text

    # -- input, chunk by chunk ----------------------------------------------------------

    def get_input_stream(self):
        """`-` is standard input, as for mlir-opt."""
        if self.args.input_file == "-":
            return sys.stdin.buffer, "mlir"
        return super().get_input_stream()

    def get_input_name(self) -> str:
        return (
            "<stdin>"
            if self.args.input_file in (None, "-")
            else super().get_input_name()
        )

    def read_chunks(self) -> list[tuple[str, int]]:
        """The input's chunks and the line each starts after: one chunk, or those
        between split markers (MLIR splits wherever the marker occurs)."""
        stream, extension = self.get_input_stream()
        extension = self.args.frontend or extension
        if extension != "mlir":
            stream.close()
            raise UserError(
                f"cannot read '.{extension}' input: affinec-opt reads MLIR text "
                "(give --frontend mlir for another extension)"
            )
        with stream:
            text = decode_source(stream.read(), self.get_input_name())
        self.sources[self.get_input_name()] = text
        if not self.args.split_input_file:
            return [(text, 0)]
        chunks, offset = [], 0
        for piece in text.split(self.args.split_input_marker):
            chunks.append((piece, offset))
            offset += piece.count("\n")
        return chunks

    def run(self) -> bool:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Process every chunk, even after one fails; whether all succeeded (with
        `--verify-diagnostics`: whether all produced exactly the expected
        diagnostics). Errors go to stderr as they happen."""
        chunks = self.read_chunks()
        output = self.prepare_output()
        ok = True
        try:
            for i, (text, offset) in enumerate(chunks):
                if i:
                    output.write(f"{self.args.split_input_marker}\n")
                ok = self.process_chunk(text, offset, output) and ok
                output.flush()
        except ShrinkException:
            # xDSL's `--shrink`, for shrinkray: the pass wants the input kept.
            print("Success, can shrink")
            return True
        finally:
            if output is not sys.stdout:
                output.close()
        if self.args.shrink:
            print("Failure, can't shrink")
            return False
        return ok

    def process_chunk(self, text: str, offset: int, output: IO[str]) -> bool:
        """Parse, transform and print one chunk; report its diagnostics."""
        emitted: list[Diagnostic] = []
        remarks: list = []
        try:
            start = time.perf_counter()
            module = parse_module(self.ctx, text, self.get_input_name(), offset)
            self.timings.append(("Parse", time.perf_counter() - start))
            with collecting_remarks() as remarks:
                self.apply_passes(module)
            output.write(self.output_resulting_program(module))
        except BrokenPipeError:
            raise  # not the input's fault: `main` ends quietly
        except USER_ERRORS as e:
            if self.args.debug:
                raise
            location, message = locate_exception(e, offset)
            emitted.append(Diagnostic(location, "error", message))
            for where, note in exception_notes(e, offset):
                emitted.append(Diagnostic(where, "note", note))
            if isinstance(e, ParseError) and self.args.parsing_diagnostics:
                # xDSL's flag: a parse error is the expected output.
                print(self.format(emitted.pop()), file=output)
        emitted[:0] = [
            Diagnostic(location_of(op), "remark", message) for op, message in remarks
        ]
        if self.args.verify_diagnostics:
            try:
                expected = parse_expectations(text, self.get_input_name(), offset)
            except DesignatorError as e:
                emitted = [Diagnostic(e.where, "error", e.message)]
            else:
                emitted = check(expected, emitted)
        for diagnostic in emitted:
            print(self.format(diagnostic), file=sys.stderr)
        return not any(d.severity == "error" for d in emitted)

    # -- errors -------------------------------------------------------------------------

    def format(self, diagnostic: Diagnostic) -> str:
        """`file:line:col: error: message`, the source line and a caret."""
        location = diagnostic.location
        source = None if location is None else self.sources.get(location.filename)
        return format_error(
            diagnostic.message, location, source, severity=diagnostic.severity
        )

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


def _pass_names(text: str, flag: str) -> set[str]:
    """The pass names of `--mlir-print-ir-before/after=A,B`; unknown ones refused."""
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = sorted(names - set(available_passes()))
    if unknown:
        raise UserError(
            f"--mlir-print-ir-{flag}: unknown pass '{unknown[0]}' "
            "(affinec-opt --list-passes shows them)"
        )
    return names


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run `affinec-opt`; 0 on success, 1 after any error (each one printed)."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    tool: AffinecOptMain | None = None
    try:
        tool = AffinecOptMain(argv)
        if tool.args.list_passes:
            list_passes(sys.stdout)
            return 0
        ok = tool.run()
        if tool.args.mlir_timing:
            tool.print_timing()
        return 0 if ok else 1
    except BrokenPipeError:
        # the reader of the output went away (`affinec-opt x.mlir | head`)
        return broken_pipe_exit()
    except USER_ERRORS as e:
        if debug:
            raise
        location, message = locate_exception(e)
        print(format_error(message, location), file=sys.stderr)
        return 1
    except Exception as e:
        if debug:
            raise
        print(
            f"error: internal error: {type(e).__name__}: {e} (a bug in affinec; "
            "--debug shows the traceback)",
            file=sys.stderr,
        )
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
