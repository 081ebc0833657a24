"""Tidy tables behind the report's figures and ``dvc plots`` CSVs (pandas/numpy only)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from privaudit.claims.neighbourhood import Neighbourhood
from privaudit.claims.claim import PrivacyClaim
from privaudit.verdict.metrics_files import AuditEntry, BlackboxBlock, LtuEntry

__all__ = [
    "CORRECTION_NAMES",
    "block_value",
    "check_most_exposed",
    "curve_stat",
    "epsilon_series",
    "exposed_label",
    "finite",
    "gdp_view_box",
    "has_risk",
    "most_exposed",
    "risk_note",
    "risk_summary",
    "privacy_score_histogram",
    "privacy_utility_table",
    "safe_name",
    "score_bins",
    "tpr_at",
    "tradeoff_claims",
    "unique_names",
]


def finite(value: Any) -> float | None:
    """``float(value)`` if it is a finite real number, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def safe_name(name: str) -> str:
    """A file-name-safe version of a defender/attacker name (``[A-Za-z0-9._-]``)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("._") or "unnamed"
    return cleaned[:80]


def unique_names(names: Sequence[str]) -> dict[str, str]:
    """Map names to distinct safe file names (suffix ``-2``, ``-3`` on collision)."""
    used: set[str] = set()
    out: dict[str, str] = {}
    for name in names:
        base = safe_name(name)
        candidate, i = base, 2
        while candidate.lower() in used:
            candidate, i = f"{base}-{i}", i + 1
        used.add(candidate.lower())
        out[name] = candidate
    return out


def privacy_utility_table(ltu: Mapping[str, LtuEntry]) -> pd.DataFrame:
    """Tidy table of LTU results: one row per defender and attacker.

    Columns: defender, attacker, strongest, accuracy, rounds, privacy, privacy_stderr,
    utility, utility_stderr. Utility is a property of the defender model, so it is the
    same on every attacker row of a defender (an attacker's own value where it has one).
    """
    rows: list[dict[str, Any]] = []
    for defender, entry in ltu.items():
        strongest = entry.strongest_attacker()
        for attacker, sub in entry.per_attacker().items():
            rows.append(
                {
                    "defender": str(defender),
                    "attacker": attacker,
                    "strongest": attacker == strongest,
                    "accuracy": finite(sub.accuracy),
                    "rounds": finite(_either(sub.rounds, entry.rounds)),
                    "privacy": finite(sub.privacy),
                    "privacy_stderr": finite(sub.privacy_stderr),
                    "utility": finite(_either(sub.utility, entry.utility)),
                    "utility_stderr": finite(_either(sub.utility_stderr, entry.utility_stderr)),
                }
            )
    columns = [
        "defender",
        "attacker",
        "strongest",
        "accuracy",
        "rounds",
        "privacy",
        "privacy_stderr",
        "utility",
        "utility_stderr",
    ]
    return pd.DataFrame(rows, columns=columns)


def _either(own: float | None, defender: float | None) -> float | None:
    """An attacker's own value, else the defender's."""
    return own if own is not None else defender


def epsilon_series(
    defender: str,
    frames: Mapping[str, pd.DataFrame] | None,
    audit: Mapping[str, AuditEntry],
) -> pd.DataFrame | None:
    """ε̂ vs trials for one defender: the given table, else the single point of audit.json."""
    if frames and defender in frames:
        frame = frames[defender]
        cols = ["trials", "eps_k1", "eps_ksqrt"]
        return (
            frame[cols]
            .apply(pd.to_numeric, errors="coerce")
            .sort_values("trials")
            .reset_index(drop=True)
        )
    entry = audit.get(defender)
    lidp = entry.lidp if entry is not None else None
    if lidp is None:
        return None
    trials = finite(lidp.trials)
    k1, ksqrt = finite(lidp.eps_lower_bound_k1), finite(lidp.eps_lower_bound)
    if trials is None or (k1 is None and ksqrt is None):
        return None
    return pd.DataFrame({"trials": [trials], "eps_k1": [k1], "eps_ksqrt": [ksqrt]}, dtype=float)


#: columns of a per-sample risk scores file (privaudit.attacks.sample_risk) that the report reads
RISK_REPORT_COLUMNS: tuple[str, ...] = ("risk", "risk_low", "risk_high", "p_value", "q_value", "flagged")

#: how the report names the multiplicity corrections of ``risk_correction``
CORRECTION_NAMES: dict[str, str] = {"bh": "Benjamini-Hochberg FDR", "bonferroni": "Bonferroni family-wise error"}


def has_risk(frame: pd.DataFrame) -> bool:
    """Whether a scores frame carries the per-sample risk columns (``ltu`` stage with reference models)."""
    return all(c in frame.columns for c in RISK_REPORT_COLUMNS)


def _flag_mask(frame: pd.DataFrame) -> pd.Series:
    """Flagged Defender rows; a Reserved row is never listed, whatever its flag says."""
    flagged = frame["flagged"].map(lambda v: isinstance(v, (bool, np.bool_)) and bool(v))
    return flagged & (frame["role"].astype(str) == "defender")


def check_most_exposed(k: object) -> None:
    """Raise ``ValueError`` unless ``k`` (``report.most_exposed``) is an integer >= 0 (0: list none)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"most_exposed must be an integer >= 0 (0: list no sample ids), got {k!r}")


def most_exposed(
    privacy_scores: Mapping[str, pd.DataFrame] | None, k: int = 10
) -> dict[str, pd.DataFrame]:
    """The most exposed samples per defender, at most ``k`` (columns rank, id, role, score, ...);
    ``k = 0`` gives empty tables.

    With per-sample risk columns (:func:`has_risk`): only the **Defender** samples whose leakage
    is significant after the multiplicity correction (``flagged``), smallest p-value first (ties:
    larger risk), with ``risk, risk_low, risk_high, p_value, q_value`` after the four base
    columns; the table is empty when none is significant. A Reserved sample is never listed: the
    model never trained on it. Without them (scores files of older runs): the ``k`` lowest
    individual privacy scores of any role, as before.

    Only ids, roles and scores are returned, never sample contents.
    """
    check_most_exposed(k)
    out: dict[str, pd.DataFrame] = {}
    for defender, frame in (privacy_scores or {}).items():
        if has_risk(frame):
            cols = ["id", "role", "score", *RISK_REPORT_COLUMNS[:-1]]
            rows = frame.loc[_flag_mask(frame), cols].copy()
            for c in cols[2:]:
                rows[c] = pd.to_numeric(rows[c], errors="coerce")
            rows["_neg_risk"] = -rows["risk"].fillna(-np.inf)
            top = rows.sort_values(["p_value", "_neg_risk", "id"], kind="mergesort").drop(columns="_neg_risk")
            top = top.head(k).reset_index(drop=True)
        else:
            scores = frame[["id", "role", "score"]].copy()
            scores["score"] = pd.to_numeric(scores["score"], errors="coerce")
            top = scores.dropna(subset=["score"]).sort_values(["score", "id"], kind="mergesort").head(k)
            top = top.reset_index(drop=True)
        top.insert(0, "rank", np.arange(1, len(top) + 1))
        out[str(defender)] = top
    return out


def risk_summary(frame: pd.DataFrame) -> dict[str, Any] | None:
    """Level, correction and counts of one defender's per-sample risk (None without risk columns).

    Keys: ``level``, ``correction`` (as stored: ``bh`` | ``bonferroni``), ``correction_name``,
    ``tested`` (Defender samples), ``flagged``, ``reserved_tested``, ``reserved_flagged`` (the
    negative control: Reserved samples the same cutoff would have flagged; None if not recorded),
    ``interval`` (coverage of the risk interval; None if not recorded).
    """
    if not has_risk(frame):
        return None
    roles = frame["role"].astype(str)
    level = (finite(pd.to_numeric(frame["risk_level"], errors="coerce").iloc[0])
             if "risk_level" in frame and len(frame) else None)
    corr = str(frame["risk_correction"].iloc[0]) if "risk_correction" in frame and len(frame) else None
    control = None
    if "control_hit" in frame.columns:
        control = int(frame.loc[roles == "reserved", "control_hit"].map(
            lambda v: isinstance(v, (bool, np.bool_)) and bool(v)).sum())
    interval = (finite(pd.to_numeric(frame["risk_interval"], errors="coerce").iloc[0])
                if "risk_interval" in frame and len(frame) else None)
    return {
        "level": level,
        "correction": corr,
        "correction_name": CORRECTION_NAMES.get(corr or "", corr),
        "tested": int((roles == "defender").sum()),
        "flagged": int(_flag_mask(frame).sum()),
        "reserved_tested": int((roles == "reserved").sum()),
        "reserved_flagged": control,
        "interval": interval,
    }


def _g(value: Any, digits: int = 3) -> str:
    v = finite(value)
    return "—" if v is None else f"{v:.{digits}g}"


def exposed_label(row: Any) -> str:
    """One flagged sample as text: ``id (risk R [low, high], p = …, q = …)``.

    ``row`` is a row of :func:`most_exposed` with risk columns (a namedtuple or mapping).
    """
    get = row.get if isinstance(row, Mapping) else lambda c: getattr(row, c, None)
    risk, low, high = finite(get("risk")), finite(get("risk_low")), finite(get("risk_high"))
    text = f"{get('id')} (risk {_g(risk)}"
    if low is not None and high is not None:
        text += f" [{_g(low)}, {_g(high)}]"
    return text + f", p = {_g(get('p_value'), 2)}, q = {_g(get('q_value'), 2)})"


def risk_note(summary: Mapping[str, Any] | None) -> str:
    """One sentence on how samples were flagged and what the negative control found."""
    if not summary:
        return "individual LTU privacy scores (lowest first; no reference-model risk in this audit)"
    level, interval = summary.get("level"), finite(summary.get("interval"))
    band = f" with a {_g(100 * interval)} % bootstrap interval over reference models" if interval else ""
    text = (f"{summary.get('flagged')} of {summary.get('tested')} Defender samples significant at "
            f"{summary.get('correction_name')} {_g(level)} (risk: per-sample LiRA log-likelihood ratio IN vs OUT"
            f"{band}; p: the model's confidence on the sample against reference models that never saw it)")
    control = summary.get("reserved_flagged")
    if control is not None:
        text += (f"; negative control: {control} of {summary.get('reserved_tested')} Reserved samples "
                 f"(never trained on) would be flagged at the same cutoff")
    return text + "."


def score_bins(scores: pd.Series) -> np.ndarray:
    """Histogram bin edges: 20 bins on [0, 1], widened if scores fall outside."""
    low = min(0.0, float(scores.min())) if len(scores) else 0.0
    high = max(1.0, float(scores.max())) if len(scores) else 1.0
    return np.linspace(low, high, 21)


def privacy_score_histogram(frame: pd.DataFrame) -> pd.DataFrame:
    """Tidy histogram of one defender's scores: bin_low, bin_high, bin_center, count_<role>..."""
    scores = pd.to_numeric(frame["score"], errors="coerce")
    valid = frame.assign(score=scores).dropna(subset=["score"])
    edges = score_bins(valid["score"])
    table = pd.DataFrame({"bin_low": edges[:-1], "bin_high": edges[1:]})
    table["bin_center"] = (table["bin_low"] + table["bin_high"]) / 2
    for role in sorted(valid["role"].astype(str).unique()):
        counts, _ = np.histogram(valid.loc[valid["role"].astype(str) == role, "score"], bins=edges)
        table[f"count_{safe_name(role)}"] = counts
    return table


def tpr_at(fpr: Sequence[float], tpr: Sequence[float], target: float) -> float:
    """TPR at a given FPR by linear interpolation of the ROC curve (sorted by FPR)."""
    f = np.asarray(fpr, dtype=float)
    t = np.asarray(tpr, dtype=float)
    if f.size == 0:
        raise ValueError("fpr is empty")
    order = np.argsort(f, kind="mergesort")
    return float(np.interp(target, f[order], t[order]))


def curve_stat(curve: Mapping[str, Any], key: str, target: float) -> float:
    """A recorded TPR@FPR value, or its interpolation from the curve."""
    value = finite(curve.get(key))
    return value if value is not None else tpr_at(curve["fpr"], curve["tpr"], target)


def block_value(block: Any, key: str) -> float | None:
    """A finite number of a metrics block, typed field or extra key (``None``: absent, null, not finite)."""
    return finite(getattr(block, key, None))


def tradeoff_claims(audit: Mapping[str, AuditEntry]) -> dict[str, tuple[PrivacyClaim, BlackboxBlock]]:
    """The defenders the trade-off figure shows: those with a black-box block and a claim comparable with
    it (:meth:`PrivacyClaim.implied_for` ``add_remove`` not ``None``), as ``{name: (add/remove claim, block)}``."""
    out: dict[str, tuple[PrivacyClaim, BlackboxBlock]] = {}
    for name, entry in audit.items():
        claim = entry.claim.implied_for(Neighbourhood.ADD_REMOVE) if entry.claim is not None else None
        if claim is not None and entry.blackbox is not None:
            out[str(name)] = (claim, entry.blackbox)
    return out


def gdp_view_box(block: BlackboxBlock) -> tuple[float, float, float, float] | None:
    """The GDP view's threshold test as ``(fpr, fnr, fpr_upper, fnr_upper)``: its observed rates on the
    runs not used for tuning (``false_positives / (runs_out - tuning_out)``, ``false_negatives / (runs_in -
    tuning_in)``) and their upper confidence bounds; ``None`` when the block lacks one of them.

    >>> b = BlackboxBlock(runs_in=100, runs_out=100, tuning_in=20, tuning_out=20, false_positives=8,
    ...                   false_negatives=40, fpr_upper=0.2, fnr_upper=0.6)
    >>> gdp_view_box(b)
    (0.1, 0.5, 0.2, 0.6)
    """
    values = [block_value(block, k) for k in ("false_positives", "false_negatives", "runs_in", "runs_out",
                                              "tuning_in", "tuning_out", "fpr_upper", "fnr_upper")]
    if any(v is None for v in values):
        return None
    fp, fn, runs_in, runs_out, tune_in, tune_out, fpr_u, fnr_u = (float(v) for v in values)  # type: ignore[arg-type]
    n_out, n_in = runs_out - tune_out, runs_in - tune_in
    if n_out <= 0 or n_in <= 0:
        return None
    return fp / n_out, fn / n_in, fpr_u, fnr_u
