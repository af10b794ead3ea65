"""The tuning cache: the best configuration found per spec, GPU and compiler version.

One JSON file, by default `$XDG_CACHE_HOME/affinec/tuning.json` (`~/.cache/...`
without XDG_CACHE_HOME); `AFFINEC_TUNING_CACHE` names another file, and so does the
`--cache` option of `affinec tune` (or `cache=` of the functions here). An entry is
keyed by the spec's text, the GPU's name and the compiler's version, because each
of the three changes which configuration is fastest, or whether it is still right:

    {"schema": 1,
     "entries": {"conv n=32 ... | NVIDIA H100 80GB HBM3 | 0.1.0+3f2a9c01d4e7": {
        "spec": "conv n=32 ...", "gpu": "NVIDIA H100 80GB HBM3",
        "compiler": "0.1.0+3f2a9c01d4e7", "arch": "sm_90",
        "config": {"tile_sizes": [1, 8, 16, 64], ...}, "ms": 0.291, ...}}}

The compiler version is the package's version plus a hash of the source files that
decide what a configuration compiles to (affinec, its dialects and passes; not the
tuner or the command lines), so any change to the compiler makes old entries stale:
`affinec tune --list` shows them as such, lookups skip them, and tuning again
replaces them. Writes go through a temporary file and a rename, under a lock, and
keep the entries other processes wrote meanwhile.

Beside the file, a journal of measurements (`tuning.measurements.jsonl` beside
`tuning.json`): one JSON line per configuration measured by `affinec tune --ray`,
appended as each measurement comes in, so that a run that stops (killed, a machine
lost) resumes without measuring again what it had measured
(`affinec.tuning.distributed`).

Why this format and not a database such as SQLite: the cache is written by one
process per tuning run (in a Ray cluster, the driver: the workers hand their results
back through Ray), so what must be safe is several runs, or `affinec tune` and a
script, writing one file on one machine at once. The lock (`flock`) serializes
them, the rename means a reader never sees half a file, and a writer that dies
leaves the previous file whole; the journal is appended under the same lock, and a
line torn by a writer killed mid-write is ended by the next writer and skipped by
readers. SQLite would give the same guarantees, not more: its locks are no safer on
a network file system than `flock`, and the cluster needs none. It would cost the
format that `affinec.compile`, `affinec tune --list` and people (it is JSON that
diffs and reads) already use. Rewriting the whole file per store is what this
costs: one write per tuned shape, a few hundred kilobytes for a zoo of hundreds of
shapes, while the per-measurement records, thousands, are appended.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from affinec.base.spec import ConvSpec, Spec
from affinec.driver.config import KernelConfig
from affinec.tuning.compiling import config_from_json, config_to_json

SCHEMA = 1
"""Bumped when an entry's fields change meaning."""
ENVIRONMENT = "AFFINEC_TUNING_CACHE"

_NOT_COMPILER = (
    "tuning",
    "cli.py",
    "cli_flags.py",
    "cli_tune.py",
    "opt.py",
    "demo.py",
    "benchmark.py",
)
"""Files of affinec that do not decide what a configuration compiles to."""


class CacheError(ValueError):
    """The cache file cannot be read or written; the message names it."""


def default_path() -> Path:
    """`$AFFINEC_TUNING_CACHE`, else `$XDG_CACHE_HOME/affinec/tuning.json`, else
    `~/.cache/affinec/tuning.json`."""
    if path := os.environ.get(ENVIRONMENT):
        return Path(path).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "affinec" / "tuning.json"


@lru_cache(maxsize=1)
def compiler_version() -> str:
    """The package version plus a hash of the compiler's source files."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("affinec")
    except PackageNotFoundError:
        release = "unknown"
    digest = hashlib.sha256()
    for package in ("affinec", "affinec.dialects", "affinec.passes"):
        found = importlib.util.find_spec(package)
        roots = list(found.submodule_search_locations or []) if found else []
        for root in roots:
            for path in sorted(Path(root).rglob("*.py")):
                relative = path.relative_to(root)
                if package == "affinec" and relative.parts[0] in _NOT_COMPILER:
                    continue
                digest.update(f"{package}/{relative.as_posix()}\0".encode())
                digest.update(path.read_bytes())
    return f"{release}+{digest.hexdigest()[:12]}"


def cache_key(spec_text: str, gpu: str, compiler: str) -> str:
    return f"{spec_text} | {gpu} | {compiler}"


def batch_bucket(n: int) -> int:
    """The batch a kernel of any batch is tuned for when called with `n`: the
    largest power of two not over it (1, 2, 4, ..., 32, 64, ...)."""
    return 1 << (max(n, 1).bit_length() - 1)


def tuning_key(spec: Spec) -> str:
    """The spec's text as the cache knows it: a convolution of any batch by its
    batch bucket (`batch_bucket`), so one tuning serves the batches of a bucket."""
    if isinstance(spec, ConvSpec) and spec.dynamic_batch:
        spec = replace(spec, n=batch_bucket(spec.n))
    return spec.to_text()


@dataclass(frozen=True)
class Entry:
    """The tuned configuration of one spec on one GPU with one compiler."""

    spec: str
    gpu: str
    compiler: str
    arch: str
    config: KernelConfig
    ms: float
    """Its measured time (the final timing)."""
    baseline_ms: float | None = None
    """The time of `config_for`'s configuration in the same run."""
    error: float | None = None
    tuned_at: str = ""
    measured: int = 0
    """Configurations measured to find it."""
    cudnn_ms: float | None = None

    @property
    def key(self) -> str:
        return cache_key(self.spec, self.gpu, self.compiler)

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "gpu": self.gpu,
            "compiler": self.compiler,
            "arch": self.arch,
            "config": config_to_json(self.config),
            "describe": self.config.describe(),
            "ms": self.ms,
            "baseline_ms": self.baseline_ms,
            "error": self.error,
            "tuned_at": self.tuned_at,
            "measured": self.measured,
            "cudnn_ms": self.cudnn_ms,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Entry:
        try:
            return Entry(
                spec=str(data["spec"]),
                gpu=str(data["gpu"]),
                compiler=str(data["compiler"]),
                arch=str(data["arch"]),
                config=config_from_json(data["config"]),
                ms=float(data["ms"]),
                baseline_ms=_optional_float(data.get("baseline_ms")),
                error=_optional_float(data.get("error")),
                tuned_at=str(data.get("tuned_at", "")),
                measured=int(data.get("measured", 0)),
                cudnn_ms=_optional_float(data.get("cudnn_ms")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"an entry that is not one: {e}") from None


def _optional_float(value: object) -> float | None:
    return None if value is None else float(value)  # pyright: ignore[reportArgumentType]


class TuningCache:
    """The cache file at `path` (`default_path()` if None)."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()

    def entries(self) -> list[Entry]:
        """Every entry, stale ones too; a `CacheError` if the file is not a cache."""
        data = self._read()
        out = []
        for key, raw in data["entries"].items():
            try:
                out.append(Entry.from_json(raw))
            except ValueError as e:
                raise CacheError(f"{self.path}: entry '{key}': {e}") from None
        return out

    def lookup(self, spec_text: str, gpu: str) -> Entry | None:
        """The entry of the spec on the GPU for this compiler, if any (a file that
        is missing or unreadable has none)."""
        key = cache_key(spec_text, gpu, compiler_version())
        try:
            raw = self._read()["entries"].get(key)
            return Entry.from_json(raw) if raw is not None else None
        except (CacheError, ValueError):
            return None

    def store(self, entry: Entry) -> None:
        """Add or replace `entry`, keeping the others (and those written since)."""
        with self._locked():
            data = self._read()
            data["entries"][entry.key] = entry.to_json()
            self._write(data)

    @property
    def journal_path(self) -> Path:
        """The journal of measurements beside the file (`tuning.json` →
        `tuning.measurements.jsonl`)."""
        return self.path.with_name(f"{self.path.stem}.measurements.jsonl")

    def append_measurements(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append `rows` (JSON objects) to the journal, one line each, under the
        cache's lock."""
        if not rows:
            return
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
        with self._locked():
            try:
                with open(self.journal_path, "ab+") as f:
                    if f.seek(0, os.SEEK_END) > 0:
                        f.seek(-1, os.SEEK_END)
                        if f.read(1) != b"\n":  # a writer died mid-line: end it
                            text = "\n" + text
                    f.write(text.encode())
            except OSError as e:
                raise CacheError(
                    f"cannot write the journal {self.journal_path}: {e}"
                ) from None

    def measurements(self) -> list[dict[str, Any]]:
        """The journal's rows (none if it is missing); a line that is not a JSON
        object (torn by a writer that died) is skipped."""
        try:
            text = self.journal_path.read_text(errors="replace")
        except FileNotFoundError:
            return []
        except OSError as e:
            raise CacheError(
                f"cannot read the journal {self.journal_path}: {e}"
            ) from None
        rows = []
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {"schema": SCHEMA, "entries": {}}
        except OSError as e:
            raise CacheError(f"cannot read the tuning cache {self.path}: {e}") from None
        except UnicodeDecodeError:
            raise CacheError(
                f"the tuning cache {self.path} is not text (not UTF-8); remove it or "
                f"point {ENVIRONMENT} elsewhere"
            ) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise CacheError(
                f"the tuning cache {self.path} is not JSON (line {e.lineno}: "
                f"{e.msg}); remove it or point {ENVIRONMENT} elsewhere"
            ) from None
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("entries"), dict)
            or data.get("schema") != SCHEMA
        ):
            raise CacheError(
                f"the tuning cache {self.path} is not one of schema {SCHEMA}; remove "
                f"it or point {ENVIRONMENT} elsewhere"
            )
        return data

    def _write(self, data: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(
                dir=self.path.parent, prefix=".tuning-", suffix=".json"
            )
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.write("\n")
            os.replace(tmp, self.path)
        except OSError as e:
            raise CacheError(
                f"cannot write the tuning cache {self.path}: {e}"
            ) from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(self.path.with_name(f".{self.path.name}.lock"), "w")  # noqa: SIM115
        except OSError as e:
            raise CacheError(
                f"cannot write the tuning cache {self.path}: {e}"
            ) from None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
