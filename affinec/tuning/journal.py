"""The journal of measurements that tuning a zoo over a Ray cluster keeps
(`affinec.tuning.distributed`): what one measurement is written as, the index a run
started again reads the journal through, and a measurement read back from its row.

The journal's file (appended under the cache's lock, read whole) is
`TuningCache.append_measurements` and `TuningCache.measurements`; this module says
what its rows hold.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from affinec.base.spec import Spec
from affinec.driver.config import KernelConfig
from affinec.tuning.cache import TuningCache, compiler_version, tuning_key
from affinec.tuning.compiling import config_to_json
from affinec.tuning.measure import Measurement
from affinec.tuning.tune_result import Record

Row = dict[str, Any]
Index = dict[tuple[str, str, str], dict[tuple[str, str], Row]]
"""Rows by (spec, GPU, arch), then by (kind, configuration)."""


def config_key(config: KernelConfig) -> str:
    """The configuration's key in the index: its JSON, keys sorted."""
    return json.dumps(config_to_json(config), sort_keys=True)


def journal_index(cache: TuningCache) -> Index:
    """The journal's rows of this compiler by (spec, GPU, arch), then by (kind,
    configuration); the last row of a configuration wins."""
    current = compiler_version()
    out: Index = {}
    for row in cache.measurements():
        try:
            if row["compiler"] != current:
                continue
            unit = (str(row["spec"]), str(row["gpu"]), str(row["arch"]))
            key = (str(row["kind"]), json.dumps(row["config"], sort_keys=True))
        except (KeyError, TypeError):
            continue
        out.setdefault(unit, {})[key] = row
    return out


def journal_row(
    spec: Spec, gpu: str, arch: str, kind: str, r: Record, m: Measurement, status: str
) -> Row:
    """The row of measurement `m` (of `kind`) of record `r` of `spec` on `gpu`; its
    status is `status`, or else the record's."""
    return {
        "spec": tuning_key(spec),
        "gpu": gpu,
        "compiler": compiler_version(),
        "arch": arch,
        "kind": kind,
        "config": config_to_json(r.config),
        "describe": r.config.describe(),
        "status": status or r.status,
        "ok": m.ok,
        "ms": m.ms,
        # JSON has no infinity
        "error": None if m.error is None or math.isinf(m.error) else m.error,
        "reason": m.reason,
        "seconds": m.seconds,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def measurement_of(row: Row) -> Measurement:
    """The measurement a row was written from."""
    return Measurement(
        bool(row.get("ok")),
        row.get("ms"),
        row.get("error"),
        str(row.get("reason", "")),
        float(row.get("seconds") or 0.0),
    )
