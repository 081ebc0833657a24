"""The newcomer's README walk, end to end, in a real ``git clone``.

The README's own path, command by command, each shell line run through ``bash -c`` as the README or
the guide writes it: clone the repository and ``make audit`` (Quickstart), ``make verdict``; point
the data set at one's own CSV under ``data/external/`` with the README's ``dataset:`` block and audit
it again; learn the Defender-set size n the documented way before any training (``dvc repro split``
and the guide's ``python -c`` count, "Declare a mechanism"), derive q and T from it and σ with the
guide's opacus command; write a ``kind: python`` trainer (the opacus loop,
``examples/opacus_user_trainer.py``, copied to the user's own file), ``git add`` it (only staged) and
declare it with the guide's entry: claim plus ``subsampled_gaussian`` mechanism with those numbers;
``dvc exp run -S ltu.rounds=…`` and ``dvc exp show`` ("Changing parameters"), ``make audit`` after
it, then the README's defender-key experiment ``dvc exp run -S 'defenders.1.epochs=5'`` (the trainer
must survive both: ``dvc exp run`` resets git's index) and ``dvc metrics diff --precision 3``;
``dvc exp apply`` one of them; and go back as the README writes it (``git checkout HEAD -- params.yaml
dvc.lock metrics``, ``dvc checkout --allow-missing && dvc repro``, ``privaudit verdict``). Checked:
each command's exit code, the verdict ``make`` prints and its exit code (0 on PASS, 2 otherwise,
naming the verdict's own code), which stages reran, the declared mechanism recorded for the Defender
size the stage trained on, and that the outputs a command restores are byte-identical to the ones it
restores. Not run as written: ``-S ltu.rounds=2000 -S lidp.trials=64`` (the walk uses a smaller
``ltu.rounds``; the sizes are the only difference).

The repository cloned is this working tree with a tiny ``params.yaml`` (the walk checks the commands,
not the numbers). ``make`` runs with the interpreter's venv linked as ``.venv`` and its setup target
marked up to date (``-o``): the shared venv is never reinstalled from the clone.
Measured: the whole walk passed in 29 min 44 s (2026-11-27, 2 shared cores, load ~3 with the fast suite running
beside it). Hence ``slow``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from sklearn.datasets import load_breast_cancer

from tests.pipeline.conftest import merged_params, pipeline_env

pytestmark = pytest.mark.slow

DVC = [sys.executable, "-m", "dvc"]
VERDICT = [sys.executable, "-m", "privaudit.cli", "verdict", "--plain"]
GIT_ID = ["-c", "user.name=privaudit-newcomer", "-c", "user.email=newcomer@example.invalid"]
#: `make audit` without its setup prerequisite: the stamp is taken as up to date (never reinstall the shared venv)
MAKE_AUDIT = ["make", "-o", ".venv/.privaudit-installed", "audit"]

#: the repository's params with a tiny audit (the shipped defaults take minutes per stage on 2 cores)
PARAMS = merged_params({
    "base": {"seed": 7, "device": "cpu"},
    "dataset": {"name": "digits", "max_samples": 300},
    # index 1 is a torch MLP, as in the shipped params: the README's `-S 'defenders.1.epochs=5'` applies as written
    "defenders": [{"name": "logreg", "kind": "logistic_regression"},
                  {"name": "mlp", "kind": "torch_mlp", "hidden": [8], "epochs": 2, "batch_size": 32}],
    "ltu": {"rounds": 100, "reference_models": 4, "risk_reference_models": 8},
    "game3": {"canaries": 30, "tau_steps": 4},
    "lidp": {"trials": 4, "tau_quantiles": 4},
    "blackbox": {"runs": 40, "runs_no_claim": 20, "sequential_runs": 8, "block": 40},
})

README = "README.md"
GUIDE = "docs/howto/declare-mechanism.md"
TRAINER = "trainers/mine.py"


def run(cmd: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """:func:`tests.pipeline.conftest.run` with room for a whole ``make audit`` on a loaded 2-core machine."""
    proc = subprocess.run(cmd, cwd=cwd, env=pipeline_env(), capture_output=True, text=True, timeout=1800)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _source_repo(repo_root: Path, dest: Path) -> Path:
    """This working tree (tracked and new files, as they are now) committed as a repository to clone."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo_root,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        src = repo_root / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / "params.yaml").write_text(yaml.safe_dump(PARAMS, sort_keys=False))
    run(["git", "init", "-q"], dest)
    _commit(dest, "the repository, with a tiny audit")
    return dest


def _commit(ws: Path, message: str, *paths: str) -> None:
    run(["git", "add", *(paths or ["-A"])], ws)
    run(["git", *GIT_ID, "commit", "-q", "--no-gpg-sign", "-m", message], ws)


def _metrics(ws: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((ws / "metrics").glob("*.json"))}


def _ran(stdout: str) -> list[str]:
    return sorted(re.findall(r"Running stage '(\w+)'", stdout))


def _make_audit(ws: Path) -> int:
    """``make audit``'s exit code, checked against the Quickstart: 0 on PASS, 2 otherwise naming the verdict's code."""
    proc = run(MAKE_AUDIT, ws, check=False)
    out = proc.stdout + proc.stderr
    verdict = run(VERDICT, ws, check=False)  # the verdict's own code, as scripts read it
    assert verdict.returncode in (0, 1), verdict.stdout + verdict.stderr
    if verdict.returncode == 0:
        assert proc.returncode == 0, out
    else:
        assert proc.returncode == 2, out
        last = proc.stdout.strip().splitlines()[-1]  # make's own "*** … Error 1" goes to stderr
        assert last == "make: privaudit verdict exited 1 (the release gate failed); make itself exits 2", last
    assert ("PASS" if verdict.returncode == 0 else "FAIL") in proc.stdout, out  # the verdict is printed
    return proc.returncode


def _own_csv(path: Path, label: str) -> None:
    X, y = load_breast_cancer(return_X_y=True)
    frame = pd.DataFrame(X / X.max(axis=0), columns=[f"f{i}" for i in range(X.shape[1])])
    frame[label] = y
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def _sh(line: str, ws: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """One shell line exactly as the README or the guide writes it (the venv's bin first on PATH, as after
    ``source .venv/bin/activate``)."""
    return run(["bash", "-c", line], ws, check=check)


def _block(ws: Path, doc: str, first_line: str, lang: str) -> str:
    """The fenced ``lang`` block of ``doc`` (in the clone) whose first line is ``first_line``."""
    text = (ws / doc).read_text(encoding="utf-8")
    for body in re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M):
        if body.splitlines()[0].strip() == first_line:
            return body
    raise AssertionError(f"{doc} has no {lang} block starting {first_line!r}")


def _line(ws: Path, doc: str, start: str) -> str:
    """The one command line of ``doc``'s fenced blocks that starts with ``start`` (its trailing comment dropped)."""
    text = (ws / doc).read_text(encoding="utf-8")
    hits = [ln.split("  #")[0].strip() for ln in re.findall(r"^```(?:bash|sh)\n(.*?)^```", text, flags=re.S | re.M)
            for ln in ln.splitlines() if ln.startswith(start)]
    assert len(hits) == 1, (doc, start, hits)
    return hits[0]


def _exp_refs(ws: Path) -> set[str]:
    return {line.split()[1] for line in run(["git", "show-ref"], ws, check=False).stdout.splitlines()
            if "refs/exps/" in line}


def _exp_files(ws: Path, name: str) -> list[str]:
    ref = next(line.split()[1] for line in run(["git", "show-ref"], ws).stdout.splitlines()
               if line.startswith(tuple("0123456789abcdef")) and line.endswith(f"/{name}") and "refs/exps/" in line)
    return run(["git", "ls-tree", "-r", "--name-only", ref], ws).stdout.split()


def test_the_newcomers_readme_walk(repo_root: Path, tmp_path: Path) -> None:
    source = _source_repo(repo_root, tmp_path / "source")
    run(["git", "clone", "-q", str(source), str(tmp_path / "privaudit")], tmp_path)  # Quickstart
    ws = tmp_path / "privaudit"
    (ws / ".venv").symlink_to(Path(sys.prefix))  # `make` finds its venv (setup marked up to date, see MAKE_AUDIT)
    run(DVC + ["config", "--local", "core.analytics", "false"], ws)

    # 1. make audit: the whole pipeline, a printed verdict, make's exit code saying which; make verdict again
    rc0 = _make_audit(ws)
    assert (ws / "reports" / "audit.html").is_file() and (ws / "metrics" / "gate.json").is_file()
    again = run(MAKE_AUDIT, ws, check=False)  # "a second dvc repro reruns only the user_code stage" (+ environment, + history)
    assert again.returncode == rc0 and _ran(again.stdout) == ["environment", "history", "user_code"], again.stdout
    assert run(["make", "-o", ".venv/.privaudit-installed", "verdict"], ws, check=False).returncode == rc0
    assert _sh(".venv/bin/privaudit verdict", ws, check=False).returncode == (0 if rc0 == 0 else 1)

    # 2. my own data: the README's `dataset:` block as written (a CSV under data/external/), committed as my audit
    readme_dataset = yaml.safe_load(_block(ws, README, "dataset:", "yaml"))["dataset"]
    _own_csv(ws / readme_dataset["path"], readme_dataset["label_column"])
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["dataset"] = {**params["dataset"], **readme_dataset, "max_samples": 300}  # 300 of 569 rows: a tiny audit
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _make_audit(ws)
    summary = yaml.safe_load((ws / "metrics" / "summary.json").read_text())
    assert sorted(summary["defenders"]) == ["logreg", "mlp"]
    _commit(ws, "my data", "params.yaml", "dvc.lock", "metrics")
    committed = _metrics(ws)
    committed_verdict = run(VERDICT, ws, check=False).returncode

    # 3. the numbers my DP-SGD declaration needs, before any training of my trainer ("Which n"): the Defender-set
    #    size from the split, then q = B / n, T = E × round(n / B) and σ from opacus, as the guide writes them
    _sh(_line(ws, GUIDE, "dvc repro split"), ws)
    count = _sh(_line(ws, GUIDE, "python -c \"import pandas"), ws)
    n = int(count.stdout.strip().splitlines()[-1])
    assert n == 150, count.stdout  # split.defender_fraction 0.5 of the 300 rows
    batch, epochs = 64, 20
    q, steps = batch / n, epochs * round(n / batch)
    sigma_cmd = _line(ws, GUIDE, "python -c \"from opacus")
    assert "sample_rate=64/898, steps=280" in sigma_cmd, sigma_cmd
    sigma = float(_sh(sigma_cmd.replace("sample_rate=64/898, steps=280", f"sample_rate={batch}/{n}, steps={steps}"),
                      ws).stdout.strip().splitlines()[-1])

    # 4. my trainer: the opacus loop in my own file, only staged, declared with the guide's entry and my numbers
    (ws / "trainers").mkdir()
    shutil.copy(ws / "examples" / "opacus_user_trainer.py", ws / TRAINER)
    run(["git", "add", TRAINER], ws)
    guide_entry = yaml.safe_load(_block(ws, GUIDE, "# params.yaml: your opacus loop with its declared mechanism "
                                                   "(n = 898, B = 64, E = 20)", "yaml"))["defenders"][0]
    assert guide_entry["options"] == {"sample_rate": 64 / 898, "steps": 280}  # the numbers the guide derives
    assert guide_entry["mechanism"]["noise_multiplier"] == 4.6484375
    entry = yaml.safe_load(yaml.safe_dump(guide_entry).replace("examples/opacus_user_trainer.py", TRAINER))
    entry["options"] = {"sample_rate": q, "steps": steps}
    entry["mechanism"] = {**entry["mechanism"], "noise_multiplier": sigma, "sample_rate": q, "steps": steps}
    params["defenders"].append(entry)
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _make_audit(ws)
    summary = yaml.safe_load((ws / "metrics" / "summary.json").read_text())
    assert sorted(summary["defenders"]) == ["logreg", "mine", "mlp"]  # summary.json's keys are sorted
    assert summary["defenders"]["mine"]["claimed_epsilon"] == 1.0
    info = yaml.safe_load((ws / "data" / "defenders" / "mine" / "info.json").read_text())
    assert info["n_defender"] == n  # the size the declaration was derived for is the one the stage trained on
    audit = yaml.safe_load((ws / "metrics" / "audit.json").read_text())
    assert str(audit).count(repr(sigma)) >= 1 and "subsampled_gaussian" in str(audit), audit  # the declared curve

    # 5. an experiment with a changed param (README: `dvc exp run -S ltu.rounds=…`), in the activated venv
    exp1 = _sh("dvc exp run -n more-rounds -S ltu.rounds=150", ws, check=False)
    assert exp1.returncode == 0, exp1.stdout + exp1.stderr
    ran = set(_ran(exp1.stdout))  # README: changing ltu.rounds reruns ltu, bounds and report (+ what merges them)
    assert "ltu" in ran and not ran & {"defenders", "canaries", "featurize"}, exp1.stdout
    assert TRAINER in _exp_files(ws, "more-rounds")  # the staged trainer is part of the experiment
    exp1_metrics, exp1_verdict = _metrics(ws), run(VERDICT, ws, check=False).returncode
    assert exp1_verdict in (0, 1)
    _sh("dvc exp show", ws)  # README: the experiments' table (its width follows the terminal)

    # 6. make audit after the experiment: the trainer is still accepted (dvc exp run unstaged it) and
    #    nothing but the two always-changed stages reruns
    after = run(MAKE_AUDIT, ws, check=False)
    assert after.returncode == (0 if exp1_verdict == 0 else 2), after.stdout + after.stderr
    assert "not tracked by git" not in after.stderr, after.stderr
    assert _ran(after.stdout) == ["environment", "history", "user_code"], after.stdout
    assert _metrics(ws) == exp1_metrics

    # 7. the README's defender-key experiment, as written: the second entry's epochs; it retrains that
    #    defender, never re-featurizes, and the trainer is in it too
    before = _exp_refs(ws)
    line = _line(ws, README, "dvc exp run -S 'defenders.")
    assert line == "dvc exp run -S 'defenders.1.epochs=5'", line
    exp2 = _sh(line, ws, check=False)
    assert exp2.returncode == 0, exp2.stdout + exp2.stderr
    ran = set(_ran(exp2.stdout))
    assert "defenders" in ran and "featurize" not in ran, exp2.stdout
    assert yaml.safe_load((ws / "params.yaml").read_text())["defenders"][1]["epochs"] == 5
    (new_ref,) = _exp_refs(ws) - before
    assert TRAINER in run(["git", "ls-tree", "-r", "--name-only", new_ref], ws).stdout.split()
    assert _metrics(ws) != exp1_metrics
    diff = _sh("dvc metrics diff --precision 3", ws)  # README: compare with the committed audit
    assert "summary.json" in diff.stdout, diff.stdout

    # 8. `dvc exp apply <name>` makes an experiment the workspace: its outputs, its verdict
    _sh("dvc exp apply more-rounds", ws)
    assert _metrics(ws) == exp1_metrics
    assert run(VERDICT, ws, check=False).returncode == exp1_verdict

    # 9. going back, as the README writes it: drop the experiment, back to the committed audit
    _sh("git checkout HEAD -- params.yaml dvc.lock metrics", ws)
    back = _sh("dvc checkout --allow-missing && dvc repro", ws)
    assert _ran(back.stdout) == ["environment", "history", "user_code"], back.stdout  # this clone's cache held the rest
    verdict = _sh("privaudit verdict", ws, check=False)
    assert verdict.returncode == committed_verdict, verdict.stdout + verdict.stderr
    assert _metrics(ws) == committed
    assert not [c for c in run(["git", "status", "--porcelain"], ws).stdout.splitlines()
                if c[3:].startswith(("metrics/", "dvc.lock", "params.yaml"))]
