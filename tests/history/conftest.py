"""A throw-away git repository and records for the history tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from privaudit.history.records import AuditRecord, DataRecord, DefenderRecord, GatedEpsilon

T0 = datetime(2026, 1, 5, 2, 0, tzinfo=timezone.utc)
PACKAGES = {"numpy": "2.4.6", "opacus": "1.6.0", "torch": "2.13.0+cpu"}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def commit_file(repo: Path, name: str, text: str) -> str:
    """Write ``name``, commit it; returns the new HEAD."""
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "--no-gpg-sign", "-m", f"edit {name}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture()
def repo(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    commit_file(root, "src/lib.py", "x = 1\n")
    yield root


def record(i: int = 0, *, eps: dict[str, dict[str, float]] | None = None, packages: dict[str, str] | None = None,
           commit: str | None = "a" * 40, user_code: dict[str, str] | None = None, digest: str = "d1",
           params: str = "p1", trigger: str = "dvc repro", utility: float = 0.9,
           identity: str = "digits") -> AuditRecord:
    """A record of run ``i`` (one hour apart); ``eps`` = {defender: {bound kind: ε̂}}."""
    eps = eps if eps is not None else {"dpsgd": {"whitebox": 0.95, "one_run": 0.1}}
    defenders = {name: DefenderRecord(
        verdict="PASS", reasons=0, claimed_epsilon=1.0, claimed_delta=1e-5, utility=utility,
        eps_hat=tuple(GatedEpsilon(kind=k, audit=k, source=f"{k}.eps_lower_bound", epsilon=v, level=0.01, delta=1e-5)
                      for k, v in bounds.items()))
        for name, bounds in eps.items()}
    return AuditRecord(when=T0 + timedelta(hours=i), trigger=trigger, commit=commit, dirty=False,
                       data=DataRecord(identity=identity, digest=digest), python="3.11.7",
                       packages=packages if packages is not None else dict(PACKAGES), params_sha256=params,
                       params_blocks={"defenders": params}, code_sha256="c1", user_code=user_code or {},
                       passed=True, defenders=defenders)
