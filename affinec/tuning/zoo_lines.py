"""The line a whole-network tuning prints for each spec as it finishes
(`affinec.tuning.many`)."""

from __future__ import annotations

from collections import Counter

from affinec.tuning.zoo_results import ShapeTuning, SpecTuning
from affinec.tuning.zoo_steps import REFUSED_ALL


def line_of_spec(t: SpecTuning) -> str:
    """The line of a spec once it is finished: its outcome and time (a ranked one's
    best prediction, a refused one's most common reason)."""
    text = f"{t.spec.to_text()}: {t.outcome}"
    e, result = t.entry, t.result
    if e is not None:
        text += f", {e.ms:.4f} ms"
        if e.baseline_ms:
            text += f" ({e.baseline_ms / e.ms:.2f}x config_for)"
    elif t.outcome == "ranked" and result is not None:
        ranked = sorted(
            (r for r in result.records if r.rank is not None), key=lambda r: r.rank or 0
        )
        if ranked:
            best = ranked[0]
            text += (
                f", {best.predicted_ms:.4f} ms predicted for {best.config.describe()}"
            )
    elif t.outcome == REFUSED_ALL and result is not None:
        reasons = Counter(r.reason for r in result.records)
        reason, n = reasons.most_common(1)[0]
        text += f": all {len(result.records)} candidates ({n}: {reason})"
    if isinstance(t, ShapeTuning) and t.outcome not in ("cached", "ranked"):
        text += (
            f"; {t.measured} measured, {t.restored} from the journal, {t.seconds:.1f} s"
        )
    return text
