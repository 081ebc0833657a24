"""The ``privaudit`` console command.

Subcommands are registered in :func:`_commands` (name → :class:`Command`); adding one means
writing an ``add_arguments`` function and a handler returning an exit code.

``privaudit verdict [--gate metrics/gate.json]`` prints the release-gate verdict and exits
0 on pass, 1 on fail, 2 when the gate file is missing, corrupt or stale. The gate's warnings
(``warnings`` of ``metrics/gate.json``; they never change the exit code) follow the verdict line,
each prefixed ``WARNING``. Per defender it prints ``PASS``, ``PASS (no DP claim)`` (nothing certified: only
the LTU floors were checked), ``FAIL`` or ``NOT AUDITED`` and, for a claiming defender, its strongest gated ε̂
against the claim (read from ``audit.json`` beside the gate, ``--audit``).

``privaudit release <defender> [--name NAME] [--identity ID] [--repo .]`` appends the defender to the ledger of
releases (``releases.yaml``, :mod:`privaudit.claims.ledger`): its DP claim (ε, δ, neighbourhood, mechanism),
the data set's identity and digest (``data/source/meta.json``, written by the ingest stage) and the audit that
passed it (the commit of the audit files, the sha256 of ``metrics/gate.json``). Exit codes: 0 recorded; 1
refused by the verdict — the defender FAILED the gate, is NOT AUDITED, or makes no DP claim; 2 the release
cannot be vouched for — the gate is missing, corrupt or stale (as for ``verdict``; a release made since the gate
was computed makes it stale, since the next gate must compose it), the defender is not in the gate, the audit
files (``dvc.lock``, ``params.yaml``, ``metrics/``) are modified or untracked in git (or there is no git work
tree), the data stamp or the ledger cannot be read, the name is taken, this model of the defender (its model
file's sha256) is already released, ``--identity`` is not the identity the audit ran with (a check, never an
override), or the data's identity is not the one the gate's total budget was checked for. Each refusal names why
and the fix.

Stale: the gate's ``provenance`` block (written by the report stage,
:func:`privaudit.repro.provenance.provenance_stamp`) no longer matches the workspace — an input of
the report changed, a param changed that a stage of the pipeline has not run with, a stage's
output was replaced but a later stage has not run on it (a failed ``dvc repro`` / ``dvc exp
run``), code or raw data the pipeline depends on changed since it ran (``src/privaudit``,
``stages/``, ``data/external``), a user trainer file or a local module it imports changed, or the gate or report on disk
is missing or not the version ``dvc.lock`` records (e.g. a ``dvc checkout`` that could not restore
the report after ``git checkout <rev> -- dvc.lock metrics``). The verdict then names what changed and asks for
``dvc repro``; ``--no-check`` prints the stored verdict anyway. A gate without provenance
(older format) is refused the same way.

``privaudit warm [--log FILE] -- COMMAND ...`` runs the command (``dvc repro``, ``dvc exp run``) with a warm stage server
(:mod:`privaudit.repro.warm`): each ``python -m stages.<name>`` it starts runs in a fork of one process that imported
Great Expectations, torch, scikit-learn, skops and scipy once; exit code of the command.

``privaudit history [--defender NAME] [--json] [--repo DIR]`` prints the audit history kept on the git ref
``refs/privaudit/history`` (one record per pipeline run, written by the ``history`` stage,
:mod:`privaudit.history`) with the regressions flagged: exit 0, 1 when the latest run has a regression, 2
when the history cannot be read (no git repository, a corrupt line, an unknown defender).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from privaudit.messages import cap
from privaudit.verdict.metrics_files import AuditEntry, GateResult, read_entries, read_gate

__all__ = ["AUDIT_FILES", "EXIT_FAIL", "EXIT_PASS", "EXIT_USAGE", "ReleaseRefused", "check_fresh", "find_repo", "main",
           "print_verdict"]

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_USAGE = 2


@dataclass(frozen=True)
class Command:
    """A subcommand: help text, an argument adder and a handler returning the exit code."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace, TextIO, TextIO], int]


# --------------------------------------------------------------------------- verdict


def _verdict_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``privaudit verdict``."""
    parser.add_argument(
        "--gate",
        type=Path,
        default=None,
        help="gate result written by the report stage (default: metrics/gate.json of the audit's repository, the "
        "nearest folder at or above the current one holding dvc.yaml)",
    )
    parser.add_argument(
        "--repo",
        type=Path,
        default=None,
        help="repository the gate was computed in (default: the nearest folder holding dvc.yaml "
        "above the gate file, else the current directory)",
    )
    parser.add_argument(
        "--audit",
        type=Path,
        default=None,
        help="metrics/audit.json beside the gate, for each claiming defender's strongest ε̂ against its claim "
        "(default: audit.json in the gate's folder; absent: the verdict is printed without it)",
    )
    parser.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="print the stored verdict without checking that it matches the workspace",
    )
    color = parser.add_mutually_exclusive_group()
    color.add_argument(
        "--rich", dest="rich", action="store_true", default=None, help="force rich output"
    )
    color.add_argument("--plain", dest="rich", action="store_false", help="force plain text output")


def _nearest_pipeline(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``dvc.yaml``, or ``None``."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / "dvc.yaml").is_file():
            return folder
    return None


def find_repo(gate: Path) -> Path:
    """The nearest folder at or above ``gate``'s folder holding ``dvc.yaml``; else the working directory."""
    return _nearest_pipeline(gate.resolve().parent) or Path.cwd()


def project_root() -> Path:
    """The audit's repository when a command is run anywhere inside it: the nearest folder at or above the working
    directory holding ``dvc.yaml``, relative to the working directory (``.`` at the root, so messages name
    ``metrics/gate.json`` as before); else ``.`` (whose missing files the command then names)."""
    found = _nearest_pipeline(Path.cwd())
    return Path(os.path.relpath(found)) if found is not None else Path(".")


def _where_hint() -> str:
    """``""`` inside an audit's repository; else a hint that the command runs there."""
    if _nearest_pipeline(Path.cwd()) is not None:
        return ""
    return f" (no dvc.yaml in {Path.cwd()} or above it: run privaudit inside the audit's repository)"


def _repo(args: argparse.Namespace) -> Path:
    """``--repo`` as given, else :func:`project_root`."""
    return args.repo if args.repo is not None else project_root()


STALE_HINT = "run `dvc repro` to recompute it (or pass --no-check to print it anyway)"


def check_fresh(gate: GateResult, gate_path: Path, repo: Path) -> str | None:
    """``None`` when ``gate`` matches the workspace in ``repo``; else the refusal message."""
    from privaudit.repro.provenance import provenance_drift

    try:
        problems = provenance_drift(gate.provenance, repo)
    except ValueError as exc:
        return (f"gate file {gate_path} cannot be checked against the workspace: {exc}; rerun the report "
                f"stage with this privaudit (`dvc repro`, or `dvc repro -f -s report` when nothing else "
                f"changed) or pass --no-check to print it anyway")
    except Exception as exc:  # noqa: BLE001 - a corrupt dvc.lock/params.yaml: refuse, do not crash
        return f"gate file {gate_path} cannot be checked against the workspace in {repo}: {exc}; {STALE_HINT}"
    if not problems:
        return None
    shown = problems[:5] + ([f"and {len(problems) - 5} more"] if len(problems) > 5 else [])
    return cap(f"gate file {gate_path} is stale: " + "; ".join(shown)) + f"; {STALE_HINT}"


def _states(gate: GateResult, audit: Mapping[str, AuditEntry]) -> dict[str, tuple[str, str | None]]:
    """Per defender: its state's words (``PASS``, ``PASS (no DP claim)``, ``FAIL``, ``NOT AUDITED``) and, for a
    claiming defender, its strongest ε̂ against the claim (:mod:`privaudit.report.first_screen`). Without
    ``metrics/audit.json`` a defender's claim is unknown: plain ``PASS`` / ``FAIL``."""
    from privaudit.report.first_screen import defender_state, state_label, strongest_line
    from privaudit.verdict.gate import NOT_AUDITED

    out: dict[str, tuple[str, str | None]] = {}
    for name, verdict in gate.defenders.items():
        if not audit:
            out[name] = ("PASS" if verdict.passed else "FAIL", None)
            continue
        entry = audit.get(name)
        state = defender_state(entry, verdict, any(NOT_AUDITED in r for r in verdict.reasons))
        out[name] = (state_label(state), strongest_line(entry))
    return out


def _plain_verdict(gate: GateResult, out: TextIO, audit: Mapping[str, AuditEntry]) -> None:
    """Plain-text verdict: PASS/FAIL line, the gate's warnings, per-defender lines (state, the strongest ε̂
    against the claim), reasons indented."""
    out.write(f"privaudit verdict: {'PASS' if gate.passed else 'FAIL'}\n")
    for warning in gate.warnings:
        out.write(f"WARNING: {warning}\n")
    states = _states(gate, audit)
    for name, verdict in gate.defenders.items():
        word, strongest = states[name]
        out.write(f"  {word}  {name}\n")
        if strongest:
            out.write(f"        {strongest}\n")
        for reason in verdict.reasons:
            out.write(f"        - {reason}\n")
    for reason in gate.unlisted_reasons():
        out.write(f"  - {reason}\n")


def _rich_verdict(gate: GateResult, out: TextIO, audit: Mapping[str, AuditEntry]) -> None:
    """Verdict with rich (colours, a table); user strings are escaped from rich markup."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=out, force_terminal=True, highlight=False)
    style = "bold white on green" if gate.passed else "bold white on red"
    console.print(f"[{style}] {'PASS' if gate.passed else 'FAIL'} [/] privaudit release gate")
    for warning in gate.warnings:
        console.print(f"[bold black on yellow] WARNING [/] {escape(warning)}")
    table = Table(show_header=True, header_style="bold")
    table.add_column("Defender")
    table.add_column("Gate")
    table.add_column("Strongest ε̂ vs claim; reasons")
    states = _states(gate, audit)
    for name, verdict in gate.defenders.items():
        label, strongest = states[name]
        colour = "red" if not verdict.passed else "green" if label == "PASS" else "yellow"
        word = f"[{colour}]{escape(label)}[/]"
        lines = ([escape(strongest)] if strongest else []) + [f"• {escape(r)}" for r in verdict.reasons]
        empty = "[dim]LTU floors hold; no DP claim checked[/]" if label == "PASS (no DP claim)" else "[dim]all checks passed[/]"
        table.add_row(escape(name), word, "\n".join(lines) or empty)
    if gate.defenders:
        console.print(table)
    for reason in gate.unlisted_reasons():
        console.print(f"[red]•[/] {escape(reason)}")


def print_verdict(gate: GateResult, out: TextIO, use_rich: bool, audit: Mapping[str, AuditEntry] | None = None) -> None:
    """Print a gate result to ``out`` (rich or plain); with ``audit`` (``metrics/audit.json``'s entries) each
    claiming defender shows its strongest ε̂ against its claim and a PASS without a claim reads
    ``PASS (no DP claim)``."""
    (_rich_verdict if use_rich else _plain_verdict)(gate, out, audit or {})


def _read_audit(path: Path, err: TextIO) -> dict[str, AuditEntry]:
    """``metrics/audit.json``'s entries, or ``{}`` (with a note on ``err``) when it is absent or unreadable: the
    verdict and its exit code never depend on it."""
    if not path.exists():
        return {}
    try:
        return read_entries("audit", path)
    except ValueError as exc:
        err.write(f"privaudit verdict: note: {path} not shown ({exc})\n")
        return {}


def _verdict(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Handler of ``privaudit verdict``."""
    gate_path: Path = args.gate if args.gate is not None else project_root() / "metrics" / "gate.json"
    try:
        gate = read_gate(gate_path)
    except ValueError as exc:
        err.write(f"privaudit verdict: error: {exc}{'' if args.gate is not None else _where_hint()}\n")
        return EXIT_USAGE
    if args.check:
        stale = check_fresh(gate, gate_path, args.repo if args.repo is not None else find_repo(gate_path))
        if stale is not None:
            err.write(f"privaudit verdict: error: {stale}\n")
            return EXIT_USAGE
    use_rich = args.rich if args.rich is not None else bool(getattr(out, "isatty", lambda: False)())
    audit = _read_audit(args.audit if args.audit is not None else gate_path.parent / "audit.json", err)
    try:
        print_verdict(gate, out, use_rich, audit)
        out.flush()
    except BrokenPipeError:  # the reader stopped early (`privaudit verdict | head -1`): the verdict's code stands
        _reader_gone(out)
    return EXIT_PASS if gate.passed else EXIT_FAIL


# --------------------------------------------------------------------------- release

#: the audit files a release names by commit: they must be committed, unchanged, when it is recorded
AUDIT_FILES: tuple[str, ...] = ("dvc.lock", "params.yaml", "metrics")


class ReleaseRefused(Exception):
    """``privaudit release`` refuses; ``code`` is the exit code, the message says why and the fix."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _release_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``privaudit release``."""
    parser.add_argument("defender", help="the defender (params.yaml defenders[].name) released")
    parser.add_argument("--name", default=None,
                        help="the release's name in the ledger (default: <defender>-<first 12 digits of the commit>)")
    parser.add_argument("--identity", default=None,
                        help="refuse unless the audit ran with this data set identity (the one the ingest stage "
                             "recorded in data/source/meta.json: params dataset.identity or the data source); "
                             "a check, never an override")
    parser.add_argument("--repo", type=Path, default=None,
                        help="the repository root holding dvc.yaml, releases.yaml and metrics/ (default: the nearest "
                        "folder at or above the current one holding dvc.yaml)")


def _git_lines(repo: Path, *args: str) -> list[str]:
    """The output lines of ``git args`` in ``repo``; :class:`ReleaseRefused` (exit 2) outside a git work tree."""
    import subprocess

    try:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=30, check=True)
    except FileNotFoundError:
        raise ReleaseRefused("git is not installed: a release names the commit of its audit, so it needs git", EXIT_USAGE) from None
    except subprocess.CalledProcessError as exc:
        raise ReleaseRefused(f"{repo.resolve()} is not a git work tree with a commit (git {' '.join(args)}: "
                             f"{exc.stderr.strip() or exc.returncode}): a release names the commit of its audit; "
                             "run `git init` and commit the audit files first", EXIT_USAGE) from None
    return out.stdout.splitlines()


def _audit_commit(repo: Path) -> str:
    """The commit holding the audit files, refused (exit 2) when any of them is modified or untracked."""
    dirty = _git_lines(repo, "status", "--porcelain", "--untracked-files=all", "--", *AUDIT_FILES)
    if dirty:
        shown = ", ".join(line[3:] for line in dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        raise ReleaseRefused(
            f"the audit files are not committed ({shown}): a release names the commit of the audit that passed it; "
            f"commit them first (git add {' '.join(AUDIT_FILES)} && git commit)", EXIT_USAGE)
    return _git_lines(repo, "rev-parse", "HEAD")[0].strip()


def _check_releasable(defender: str, gate: GateResult, entry: AuditEntry | None) -> None:
    """Refuse (exit 1) a defender the gate did not pass with a DP claim; exit 2 when the gate does not know it."""
    from privaudit.report.first_screen import defender_state
    from privaudit.verdict.gate import NOT_AUDITED

    verdict = gate.defenders.get(defender)
    if verdict is None:
        raise ReleaseRefused(f"defender {defender!r} is not in the gate (it judged {sorted(gate.defenders)}): name one "
                             "of those, or add it to params.yaml defenders and run `dvc repro`", EXIT_USAGE)
    state = defender_state(entry, verdict, any(NOT_AUDITED in r for r in verdict.reasons))
    why = "; ".join(verdict.reasons[:3]) + (f"; and {len(verdict.reasons) - 3} more" if len(verdict.reasons) > 3 else "")
    if state == "not-audited":
        raise ReleaseRefused(f"defender {defender!r} is NOT AUDITED: {why}; make its audits run (`privaudit verdict` "
                             "names what is missing), then `dvc repro`", EXIT_FAIL)
    if state == "fail":
        raise ReleaseRefused(f"defender {defender!r} FAILED the release gate: {why}; fix the recipe or its claim and "
                             "rerun `dvc repro`", EXIT_FAIL)
    if state == "pass-noclaim":
        raise ReleaseRefused(f"defender {defender!r} makes no DP claim: the ledger composes claims, and a release "
                             "without one has an unbounded ε. Only a DP recipe claims one: a dp_sgd defender (its "
                             "epsilon, delta) or a kind: python trainer that declares claimed_epsilon and "
                             "claimed_delta in params.yaml (then rerun `dvc repro`); a recipe without a DP mechanism "
                             "(torch_mlp, logistic_regression, sklearn) cannot be released under the ledger",
                             EXIT_FAIL)


def _release(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Handler of ``privaudit release``."""
    try:
        name = _record_release(args)
    except ReleaseRefused as exc:
        err.write(f"privaudit release: refused: {cap(str(exc))}\n")
        return exc.code
    out.write(f"privaudit release: recorded {name!r} in {_repo(args) / 'releases.yaml'}; commit it "
              "(git add releases.yaml && git commit): the next `dvc repro` composes it with every candidate\n")
    return EXIT_PASS


def _model_file(repo: Path, defender: str) -> Path | None:
    """The released model file of ``defender`` (``data/defenders/<name>/model.*``, written by the defenders stage),
    or ``None`` where there is not exactly one."""
    found = sorted((repo / "data" / "defenders" / defender).glob("model.*"))
    return found[0] if len(found) == 1 else None


def _record_release(args: argparse.Namespace) -> str:
    """Check everything, then append the release; returns its name (:class:`ReleaseRefused` otherwise)."""
    from datetime import datetime, timezone

    from privaudit.artifacts import file_digest
    from privaudit.claims.ledger import (LEDGER_FILE, LedgerAudit, LedgerClaim, LedgerDataset, Release, append_release,
                                         read_ledger)
    from privaudit.data.sources import read_source_stamp

    repo = _repo(args)
    gate_path, audit_path = repo / "metrics" / "gate.json", repo / "metrics" / "audit.json"
    try:
        gate = read_gate(gate_path)
    except ValueError as exc:
        raise ReleaseRefused(f"{exc}{'' if args.repo is not None else _where_hint()}", EXIT_USAGE) from None
    stale = check_fresh(gate, gate_path, repo)
    if stale is not None:
        raise ReleaseRefused(stale.replace(" (or pass --no-check to print it anyway)", "")
                             + " so that the release is checked against the workspace as it is", EXIT_USAGE)
    try:
        entry = read_entries("audit", audit_path).get(args.defender)
    except (ValueError, OSError) as exc:
        raise ReleaseRefused(f"{audit_path} cannot be read ({exc}); rerun `dvc repro`", EXIT_USAGE) from None
    _check_releasable(args.defender, gate, entry)
    claim = entry.claim if entry is not None else None
    if claim is None:  # (a passing defender without an audit.json entry: refused above as no DP claim)
        raise ReleaseRefused(f"defender {args.defender!r} has no DP claim in {audit_path}", EXIT_FAIL)
    commit = _audit_commit(repo)
    try:
        stamp = read_source_stamp(repo / "data" / "source")
        ledger = read_ledger(repo / LEDGER_FILE)
    except (ValueError, OSError) as exc:
        raise ReleaseRefused(str(exc), EXIT_USAGE) from None
    identity = stamp.identity
    if args.identity is not None and args.identity != identity:  # a release under another identity is never composed
        raise ReleaseRefused(f"--identity {args.identity!r} is not the data set identity this audit ran with "
                             f"({identity!r}, data/source/meta.json): the gate composes the releases of the audit's "
                             f"identity only; set dataset.identity: {args.identity!r} in params.yaml and rerun "
                             "`dvc repro`, or drop --identity", EXIT_USAGE)
    if gate.ledger is not None and gate.ledger.identity != identity:
        raise ReleaseRefused(f"the gate checked gate.total_budget for data set identity {gate.ledger.identity!r}, "
                             f"not {identity!r}: rerun `dvc repro`", EXIT_USAGE)
    gate_hash = file_digest(gate_path)
    model = _model_file(repo, args.defender)
    model_hash = file_digest(model, "sha256") if model is not None else None
    earlier = next((r for r in ledger.releases if r.defender == args.defender and (
        r.audit.gate_hash == gate_hash or (model_hash is not None and r.audit.model_sha256 == model_hash))), None)
    if earlier is not None:  # the same model again (a later gate differs: it composed the earlier release)
        raise ReleaseRefused(f"this model of {args.defender!r} ({model or 'its audit'}) is already released as "
                             f"{earlier.name!r}; retrain (a change to its recipe, data or seed) before releasing "
                             "again", EXIT_USAGE)
    release = Release(
        name=args.name or f"{args.defender}-{commit[:12]}", defender=args.defender,
        date=datetime.now(timezone.utc).replace(microsecond=0),
        dataset=LedgerDataset(identity=identity, digest=stamp.digest),
        claim=LedgerClaim(epsilon=claim.epsilon, delta=claim.delta, neighbourhood=claim.neighbourhood,
                          mechanism=claim.mechanism),
        audit=LedgerAudit(commit=commit, gate_hash=gate_hash, model_sha256=model_hash))
    try:
        append_release(repo / LEDGER_FILE, release)
    except (ValueError, OSError) as exc:
        raise ReleaseRefused(str(exc), EXIT_USAGE) from None
    return release.name
# --------------------------------------------------------------------------- warm


def _warm_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``privaudit warm``."""
    parser.add_argument("--log", type=Path, default=None,
                        help="append a JSON line per stage the server ran (module, pid, exit code, seconds) to this file")
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                        help="the command to run, e.g. -- dvc repro")


def _warm(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Handler of ``privaudit warm``: run the command with a warm stage server (:mod:`privaudit.repro.warm`)."""
    from privaudit.repro.warm.session import run_warm

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        print("privaudit warm: no command given; usage: privaudit warm -- dvc repro", file=err)
        return EXIT_USAGE
    return run_warm(command, log=args.log)


# --------------------------------------------------------------------------- history


def _history_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``privaudit history``."""
    parser.add_argument("--defender", default=None, help="only this defender's numbers and regressions")
    parser.add_argument("--json", action="store_true", help="the records and regressions as JSON")
    parser.add_argument("--repo", type=Path, default=None,
                        help="the audit's git repository (default: the nearest folder at or above the current one "
                        "holding dvc.yaml)")


def _history(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Handler of ``privaudit history``."""
    import json

    from privaudit.history.regression import find_regressions
    from privaudit.history.store import HistoryStore
    from privaudit.history.workspace import changed_code_files

    try:
        records = HistoryStore(_repo(args)).read()
    except ValueError as exc:
        err.write(f"privaudit history: error: {cap(str(exc))}\n")
        return EXIT_USAGE
    known = list(dict.fromkeys(n for r in records for n in r.defenders))
    if args.defender is not None and args.defender not in known:
        err.write(f"privaudit history: error: --defender {args.defender!r} is in no record; recorded defenders: "
                  f"{', '.join(known) or 'none'}\n")
        return EXIT_USAGE
    regressions = [g for g in find_regressions(records, changed_files=changed_code_files(_repo(args)))
                   if args.defender in (None, g.defender)]
    shown = [args.defender] if args.defender else known
    if args.json:
        rows = [{**r.model_dump(mode="json"), "run": i + 1,
                 "defenders": {n: d.model_dump(mode="json") for n, d in r.defenders.items() if n in shown}}
                for i, r in enumerate(records)]
        flags = [{"run": g.record + 1, "defender": g.defender, "kind": g.kind, "audit": g.audit, "epsilon": g.epsilon,
                  "median": g.median, "spread": g.spread, "threshold": g.threshold, "earlier": g.earlier,
                  "changes": list(g.changes)} for g in regressions]
        out.write(json.dumps({"records": rows, "regressions": flags}, indent=2, ensure_ascii=False) + "\n")
    else:
        if not records:
            out.write("privaudit history: no run recorded yet (the `history` stage of `dvc repro` records each run)\n")
        for i, record in enumerate(records):
            commit = (record.commit or "no commit")[:12] + (" (dirty)" if record.dirty else "")
            out.write(f"#{i + 1}  {record.when.strftime('%Y-%m-%d %H:%M:%SZ')}  {record.trigger}  {commit}  "
                      f"{'PASS' if record.passed else 'FAIL'}\n")
            for name in shown:
                d = record.defenders.get(name)
                if d is None:
                    continue
                eps = ", ".join(f"{b.kind} {b.epsilon:.3g}" for b in d.eps_hat) or "no gated ε̂"
                util = "" if d.utility is None else f"; utility {d.utility:.3g}"
                out.write(f"    {d.verdict:<11} {name}: ε̂ {eps}{util}\n")
            for g in regressions:
                if g.record == i:
                    out.write(f"    REGRESSION  {g.text()}\n")
    latest = len(records) - 1
    return EXIT_FAIL if any(g.record == latest for g in regressions) else EXIT_PASS


# --------------------------------------------------------------------------- entry point


def _commands() -> dict[str, Command]:
    """The subcommands, by name."""
    return {
        "verdict": Command(
            help="print the release-gate verdict; exit 0 on pass, 1 on fail, 2 if the file is missing/corrupt/stale",
            add_arguments=_verdict_arguments,
            handler=_verdict,
        ),
        "release": Command(
            help="record a defender that passed a fresh release gate in releases.yaml; exit 0 recorded, 1 refused "
                 "by the verdict (FAIL, NOT AUDITED, no DP claim), 2 not checkable (gate missing or stale, audit "
                 "files uncommitted, ledger or data stamp unreadable)",
            add_arguments=_release_arguments,
            handler=_release,
        ),
        "warm": Command(
            help="run a command (e.g. -- dvc repro) with a warm stage server: the stages' heavy libraries are "
                 "imported once, not once per stage; exit code of the command",
            add_arguments=_warm_arguments,
            handler=_warm,
        ),
        "history": Command(
            help="print the audit history (refs/privaudit/history) with regressions flagged; exit 1 when the latest "
                 "run has a regression, 2 if it cannot be read",
            add_arguments=_history_arguments,
            handler=_history,
        ),
    }


def build_parser(commands: dict[str, Command] | None = None) -> argparse.ArgumentParser:
    """The argument parser with one subparser per command."""
    commands = commands if commands is not None else _commands()
    parser = argparse.ArgumentParser(
        prog="privaudit", description="Membership-inference and differential-privacy audits."
    )
    from privaudit import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in commands.items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``privaudit`` command; returns the exit code (argparse errors exit 2)."""
    commands = _commands()
    parser = build_parser(commands)
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return commands[args.command].handler(args, sys.stdout, sys.stderr)
    except BrokenPipeError:  # stdout's reader stopped early (`privaudit history | head`): no traceback
        _reader_gone(sys.stdout)
        return EXIT_USAGE


def _reader_gone(out: TextIO) -> None:
    """After a ``BrokenPipeError`` on ``out``: point the process's stdout at ``/dev/null``, so that the interpreter's
    own flush at exit does not fail again (the recipe of Python's ``signal`` documentation, "Note on SIGPIPE")."""
    if out is sys.stdout:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
