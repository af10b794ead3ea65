"""`--verify-diagnostics`: MLIR's way of testing errors, as `mlir-opt` implements it.

The input says, in comments, which diagnostics it expects and on which line:

    // expected-error @+1 {{operand cannot be used as a symbol}}
    affine.for %j = 0 to %i {
    %v = affine.load %A[%k] : memref<8xf32>  // expected-error {{dimension id}}
    // expected-error-re @-2 {{operand {{[0-9]+}} of}}

A designator is `expected-error`, `-warning`, `-remark` or `-note`, optionally `-re`
(the text between inner `{{ }}` is a regular expression, the rest literal), then an
optional line: `@+N` / `@-N` (relative), `@above` / `@below` (the nearest line above
or below that holds no designator, blank lines included, as mlir-opt 22 counts) or
`@unknown` (a diagnostic without a location).
Without one, the diagnostic is expected on the designator's own line. The text
matches when it is a substring of the diagnostic's message (a search, with `-re`).

Checking passes when every diagnostic emitted is expected and every expectation is
met; otherwise each mismatch is reported as MLIR words it, located:

    f.mlir:3:5: error: unexpected error: 'affine.for' op ...
    f.mlir:9:6: error: expected error "dimension id" was not produced
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from affinec.base.diagnostics import SourceLocation

SEVERITIES = ("error", "warning", "remark", "note")

_DESIGNATOR = re.compile(
    r"expected-(error|note|remark|warning)(-re)? *"
    r"(@([+-][0-9]+|above|below|unknown))? *\{\{(.*)\}\}\s*$"
)


@dataclass(frozen=True)
class Diagnostic:
    """One diagnostic a tool emitted: where (None: no location), how severe, what."""

    location: SourceLocation | None
    severity: str
    message: str


@dataclass
class Expectation:
    """One `expected-*` designator of the input."""

    severity: str
    pattern: re.Pattern[str]
    text: str
    line: int | None
    """The line the diagnostic is expected on; None for `@unknown`."""
    where: SourceLocation
    """The designator itself, where a failure to meet it is reported."""
    met: bool = False

    def matches(self, diagnostic: Diagnostic) -> bool:
        return diagnostic.severity == self.severity and self.matches_but_severity(
            diagnostic
        )

    def matches_but_severity(self, diagnostic: Diagnostic) -> bool:
        """Same place (line of the same file, or both unknown) and matching text."""
        where = diagnostic.location
        if where is None:
            if self.line is not None:
                return False
        elif where.filename != self.where.filename or where.line != self.line:
            return False
        return self.pattern.search(diagnostic.message) is not None


class DesignatorError(Exception):
    """A designator that cannot be understood (e.g. `@+5` past the end of the file)."""

    def __init__(self, where: SourceLocation, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


def _pattern(text: str, is_regex: bool) -> re.Pattern[str]:
    """The pattern of a designator's text: literal, or with `{{regex}}` parts."""
    if not is_regex:
        return re.compile(re.escape(text))
    parts: list[str] = []
    rest = text
    while (start := rest.find("{{")) != -1:
        end = rest.find("}}", start + 2)
        if end == -1:
            break
        parts.append(re.escape(rest[:start]))
        parts.append(f"(?:{rest[start + 2 : end]})")
        rest = rest[end + 2 :]
    parts.append(re.escape(rest))
    return re.compile("".join(parts))


def parse_expectations(
    text: str, filename: str, line_offset: int = 0
) -> list[Expectation]:
    """The designators of `text`, whose first line is line `line_offset + 1` of
    `filename`. Raises `DesignatorError` for one that cannot be placed."""
    lines = text.splitlines()
    found: list[Expectation] = []
    pending_below: list[Expectation] = []
    last_plain_line: int | None = None
    for k, line in enumerate(lines):
        number = line_offset + k + 1
        match = _DESIGNATOR.search(line)
        if match is None:
            for e in pending_below:
                e.line = number
            pending_below.clear()
            last_plain_line = number
            continue
        severity, regex, _, offset, body = match.groups()
        where = SourceLocation(filename, number, match.start() + 1)
        try:
            pattern = _pattern(body, regex is not None)
        except re.error as e:
            raise DesignatorError(where, f"invalid regex in designator: {e}") from None
        expectation = Expectation(severity, pattern, body, number, where)
        if offset is None:
            pass
        elif offset == "unknown":
            expectation.line = None
        elif offset == "above":
            if last_plain_line is None:
                raise DesignatorError(where, "no line above for '@above'")
            expectation.line = last_plain_line
        elif offset == "below":
            pending_below.append(expectation)
        else:
            expectation.line = number + int(offset)
            last = line_offset + len(lines)
            if not line_offset < expectation.line <= last:
                raise DesignatorError(
                    where,
                    f"'@{offset}' points outside the input (line {expectation.line})",
                )
        found.append(expectation)
    if pending_below:
        raise DesignatorError(pending_below[0].where, "no line below for '@below'")
    return found


def check(expected: list[Expectation], emitted: list[Diagnostic]) -> list[Diagnostic]:
    """The failures of a verification, in MLIR's words: one per emitted diagnostic
    that no expectation matches (a near miss, same line and text but another
    severity, is reported at the designator), then one per expectation never met.
    An expectation may be met by several diagnostics, as in MLIR."""
    failures: list[Diagnostic] = []
    for diagnostic in emitted:
        match = next((e for e in expected if e.matches(diagnostic)), None)
        if match is not None:
            match.met = True
            continue
        near = next((e for e in expected if e.matches_but_severity(diagnostic)), None)
        if near is not None:
            message = (
                f"'{diagnostic.severity}' diagnostic emitted when expecting a "
                f"'{near.severity}'"
            )
            failures.append(Diagnostic(near.where, "error", message))
        else:
            message = f"unexpected {diagnostic.severity}: {diagnostic.message}"
            failures.append(Diagnostic(diagnostic.location, "error", message))
    for e in expected:
        if not e.met:
            message = f'expected {e.severity} "{e.text}" was not produced'
            failures.append(Diagnostic(e.where, "error", message))
    return failures
