"""The one stage body of every registered audit: ``python -m stages.<audit>`` (see ``stages/whitebox.py``).

It loads what the audit's registry line says it reads (the Defender set for ``inputs: trainer``,
``--canaries`` for ``inputs: canaries``), calls :func:`privaudit.audits.runner.run_audit` and writes
``data/audit/<audit>.json`` (and, for an audit with per-defender tables, ``--tables/<defender>.csv``).
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Callable

from privaudit.artifacts import atomic_dir, ensure_writable, write_json
from privaudit.claims.registry import NOT_AUDITED_KEY, audit_line, block_audits
from privaudit.config import Params


def audit_arguments(name: str, tables: Path | None = None) -> Callable[[argparse.ArgumentParser], None]:
    """The arguments of the audit stage ``name`` (``tables``: default folder of its per-defender tables)."""

    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("--features", type=Path, default=Path("data/features"))
        p.add_argument("--split", type=Path, default=Path("data/split"))
        p.add_argument("--canaries", type=Path, default=Path("data/canaries"))
        p.add_argument("--defenders", type=Path, default=Path("data/defenders"))
        p.add_argument("--out", type=Path, default=Path(f"data/audit/{name}.json"))
        p.add_argument("--tables", type=Path, default=tables,
                       help="folder of the per-defender tables <defender>.csv, for an audit that has them")

    return add


def audit_body(name: str) -> Callable[[argparse.Namespace, Params], None]:
    """The body of the audit stage ``name``: load its inputs, run it for every defender it applies to, write."""
    line = audit_line(name)

    def body(args: argparse.Namespace, params: Params) -> None:
        from privaudit.audits.protocol import AuditInputs, DefenderData, trainer_audit_workers
        from privaudit.audits.runner import AuditPlan, run_audit
        from privaudit.validation import validate_metrics

        ensure_writable(*(p for p in (args.out, args.tables) if p is not None))
        device = "cpu"
        inputs = AuditInputs(canaries_dir=args.canaries, defenders_dir=args.defenders)
        fits_on_one_thread = contextlib.nullcontext()
        if line.inputs == "trainer":  # the audit's fits on one BLAS thread, as every audit fit (torch's: run_stage)
            from privaudit.repro.threads import one_thread

            fits_on_one_thread = one_thread(torch_too=False)
            from privaudit.repro.determinism import configure_determinism
            from privaudit.features import resolve_device
            from privaudit.features.feature_set import load_feature_set

            device = resolve_device(params.base.device)
            configure_determinism(device)
            fs = load_feature_set(args.features, args.split)
            X, y = fs.defender
            inputs = AuditInputs(defender_data=DefenderData(X, y, fs.n_classes), defenders_dir=args.defenders,
                                 workers=trainer_audit_workers(device, params.compute.workers()))
        with fits_on_one_thread:
            result = run_audit(AuditPlan.of(name, params), inputs, defenders_dir=args.defenders, device=device)
        if lines := result.lines():  # none when the audit applies to no defender: print nothing, not a blank line
            print("\n".join(lines))
        blocks = result.blocks()
        # each defender's block checked as a metrics/audit.json entry in which only this audit ran
        validate_metrics("audit", {d: {a.name: None for a in block_audits()} | {name: b} for d, b in blocks.items()
                                   if NOT_AUDITED_KEY not in b})
        tables = result.tables()
        if tables and args.tables is None:
            raise ValueError(f"the {name} audit writes per-defender tables: pass --tables DIR")
        if args.tables is not None:
            with atomic_dir(args.tables) as out:
                for defender, table in tables.items():
                    table.to_csv(out / f"{defender}.csv", index=False)
        write_json(args.out, blocks)

    body.__doc__ = f"Audit {name!r} of every defender it applies to, at its share of gate.beta (privaudit.audits.{name})."
    return body


def audit_stage(name: str, argv: list[str] | None = None, tables: Path | None = None) -> int:
    """Run the audit stage ``name`` (exit code); trainer audits train many small models with one torch thread."""
    from stages._runner import run_stage

    threads = 1 if audit_line(name).inputs == "trainer" else None
    return run_stage(name, audit_arguments(name, tables), audit_body(name), argv, torch_threads=threads)
