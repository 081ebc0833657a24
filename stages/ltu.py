"""Stage ltu: LTU attackers against every defender → ``metrics/ltu.json``, per-sample scores, ROC data."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from privaudit.artifacts import atomic_dir, ensure_writable, write_json
from privaudit.attacks.ltu import LtuData
from privaudit.attacks.ltu_attackers import AttackerOptions, check_attacker_names, evaluate_defender
from privaudit.attacks.sample_risk import RiskOptions
from privaudit.config import Params
from privaudit.defenders.specs import DefenderSpecBase
from privaudit.defenders.trained_files import load_trained_defender, read_defender_outputs
from privaudit.features.feature_set import FeatureSet, load_feature_set
from privaudit.features import resolve_device
from privaudit.seeding import rng_for
from stages._runner import run_stage


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
    p.add_argument("--features", type=Path, default=Path("data/features"))
    p.add_argument("--split", type=Path, default=Path("data/split"))
    p.add_argument("--metrics", type=Path, default=Path("metrics/ltu.json"))
    p.add_argument("--out", type=Path, default=Path("data/ltu"))


def _ltu_data(defender_dir: Path, spec: DefenderSpecBase, fs: FeatureSet) -> LtuData:
    """Align a defender's outputs with the features; load M_D for white-box attackers."""
    outputs, _ = read_defender_outputs(defender_dir)
    frame = outputs.set_index(outputs["id"].astype(str)).loc[fs.ids]
    proba = frame[[f"p_{c}" for c in range(fs.n_classes)]].to_numpy(np.float64)
    model = load_trained_defender(defender_dir, spec, fs.n_classes, device="cpu")
    return LtuData(X=fs.X, y=fs.y, proba=proba, is_defender=fs.is_defender, ids=fs.ids,
                   train_rows=np.flatnonzero(fs.is_defender), n_classes=fs.n_classes, spec=spec, model=model)


#: per-sample risk defaults while ``ltu.risk_*`` are not (yet) params keys: K reference models
#: (0 = off), the level and the multiplicity correction of the "most exposed" flag
RISK_DEFAULTS = {"risk_reference_models": 32, "risk_level": 0.05, "risk_correction": "bh"}


def risk_options(lp: object, n_jobs: int, device: str) -> RiskOptions | None:
    """RiskOptions from ``ltu.risk_reference_models``, ``ltu.risk_level``, ``ltu.risk_correction``."""
    get = {k: getattr(lp, k, v) for k, v in RISK_DEFAULTS.items()}
    if int(get["risk_reference_models"]) == 0:
        return None
    return RiskOptions(reference_models=int(get["risk_reference_models"]), level=float(get["risk_level"]),
                       correction=str(get["risk_correction"]), n_jobs=n_jobs, device=device)  # type: ignore[arg-type]


def _body(args: argparse.Namespace, params: Params) -> None:
    """Play ltu.rounds LTU rounds per attacker; Eq. 1 privacy and Eq. 2 utility per defender."""
    lp = params.ltu
    check_attacker_names(list(lp.attackers))
    ensure_writable(args.metrics, args.out)
    fs = load_feature_set(args.features, args.split)
    options = AttackerOptions(n_jobs=lp.n_jobs, reference_models=lp.reference_models,
                              reference_fraction=lp.reference_fraction, learned_mode=lp.learned_mode,
                              rmia_a=lp.rmia_a, rmia_gamma=lp.rmia_gamma, device=resolve_device(params.base.device))
    risk = risk_options(lp, lp.n_jobs, options.device)
    metrics, roc = {}, {}
    with atomic_dir(args.out) as tmp:
        for spec in params.defenders:
            name = spec.name
            _, info = read_defender_outputs(args.defenders / name)
            data = _ltu_data(args.defenders / name, spec, fs)
            ev = evaluate_defender(data, lp.rounds, list(lp.attackers), rng_for(params.base.seed, "ltu", name), options,
                                   risk, progress=lambda line, name=name: print(f"ltu: {name}: {line}", flush=True))
            metrics[name] = ev.metrics(info["utility"], info["utility_stderr"])
            roc[name] = ev.roc
            ev.scores.to_parquet(tmp / f"{name}.scores.parquet", index=False)
            write_json(tmp / f"{name}.roc.json", ev.roc)
            b = ev.best
            print(f"ltu: {name}: A_ltu={b.accuracy:.3f} privacy={b.privacy:.3f}±{b.privacy_stderr:.3f} ({b.attacker}), "
                  f"utility={info['utility']:.3f}, Theorem 1/2 bounds {ev.bounds['theorem1']:.3f}/{ev.bounds['theorem2']:.3f}"
                  + ("  WARNING: below the theorem's lower bound" if metrics[name]["below_theorem_bound"] else ""))
            if ev.risk is not None:
                r = ev.risk.info
                print(f"ltu: {name}: per-sample risk: {r['flagged']} of {r['tested']} Defender samples flagged "
                      f"({r['correction']} at {r['level']:g}, {r['reference_models']} reference models); negative "
                      f"control: {r['reserved_flagged']} of {r['reserved_tested']} Reserved samples at the same cutoff")
    try:
        from privaudit.validation import validate_metrics  # type: ignore[attr-defined]
    except ImportError:
        validate_metrics = None
    if validate_metrics is not None:
        validate_metrics("ltu", metrics)
    write_json(args.metrics, metrics)


if __name__ == "__main__":
    sys.exit(run_stage("ltu", _args, _body, torch_threads=1))
