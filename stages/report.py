"""Stage report: release gate → ``metrics/gate.json``; ``reports/audit.html``, ``audit.md``, plots."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import json

import pandas as pd

from privaudit.artifacts import ensure_writable, read_json, write_json
from privaudit.config import Params
from privaudit.provenance import build_manifest, provenance_stamp
from privaudit.report import ReportInputs, build_report, evaluate_gate
from privaudit.validation import validate_metrics
from stages._runner import run_stage

REPORT_FILES = ("audit.html", "audit.md", "plots")


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ltu", type=Path, default=Path("metrics/ltu.json"))
    p.add_argument("--ltu-scores", type=Path, default=Path("data/ltu"),
                   help="folder with <defender>.scores.parquet and <defender>.roc.json")
    p.add_argument("--curves", type=Path, default=Path("data/audit/epsilon_vs_trials"),
                   help="folder with <defender>.csv (trials, eps_k1, eps_ksqrt)")
    p.add_argument("--audit", type=Path, default=Path("metrics/audit.json"))
    p.add_argument("--bounds", type=Path, default=Path("metrics/bounds.json"))
    p.add_argument("--gate", type=Path, default=Path("metrics/gate.json"))
    p.add_argument("--out", type=Path, default=Path("reports"))
    p.add_argument("--repo", type=Path, default=Path("."))


def _body(args: argparse.Namespace, params: Params) -> None:
    """Evaluate the release gate and write the self-contained audit report."""
    ensure_writable(args.gate, args.out / "audit.html")
    ltu, audit, bounds = read_json(args.ltu), read_json(args.audit), read_json(args.bounds)
    for kind, value in (("ltu", ltu), ("audit", audit), ("bounds", bounds)):
        validate_metrics(kind, value)  # inputs
    gate = evaluate_gate(ltu, audit, bounds, params.gate)
    validate_metrics("gate", gate)  # output, before anything is written
    scores = {
        name: pd.read_parquet(args.ltu_scores / f"{name}.scores.parquet")
        for name in ltu if (args.ltu_scores / f"{name}.scores.parquet").is_file()
    }
    roc = {
        name: json.loads((args.ltu_scores / f"{name}.roc.json").read_text())
        for name in ltu if (args.ltu_scores / f"{name}.roc.json").is_file()
    }
    curves = {
        name: pd.read_csv(args.curves / f"{name}.csv")[["trials", "eps_k1", "eps_ksqrt"]]
        for name in audit if (args.curves / f"{name}.csv").is_file()
    }
    table1 = {}
    for entry in params.report.table1 or []:
        path = Path(entry)
        if not path.is_file():
            raise FileNotFoundError(f"report.table1: {path} not found (run benchmarks/ltu_table1.py or set it to null)")
        table1[path.stem.removeprefix("table1_")] = pd.read_csv(path)
    manifest = build_manifest(
        args.repo, params.model_dump(mode="json"), params.base.seed,
        {"source": Path("data/source"), "split": Path("data/split"), "features": Path("data/features")},
    )
    inputs = ReportInputs(ltu=ltu, audit=audit, bounds=bounds, gate=gate, manifest=manifest,
                          privacy_scores=scores or None, roc={k: v for k, v in roc.items() if v} or None,
                          epsilon_vs_trials=curves or None, table1=table1 or None)
    args.out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".report.tmp-", dir=args.out))
    try:
        build_report(inputs, staging, title=params.report.title, most_exposed=params.report.most_exposed)
        for name in REPORT_FILES:
            src, dst = staging / name, args.out / name
            if not src.exists():
                continue
            if dst.is_dir():
                shutil.rmtree(dst)
            os.replace(src, dst)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # ties the verdict to the inputs/params/dvc.lock it was computed from (privaudit verdict checks it)
    write_json(args.gate, {**gate, "provenance": provenance_stamp(args.repo, "report")})
    print(f"report: verdict {'PASS' if gate['passed'] else 'FAIL'} → {args.out / 'audit.html'}")


if __name__ == "__main__":
    sys.exit(run_stage("report", _args, _body))
