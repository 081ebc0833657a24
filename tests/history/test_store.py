"""The history store: a JSONL file on refs/privaudit/history, appended atomically with git plumbing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from privaudit.history.store import FILE, REF, HistoryError, HistoryStore
from tests.history.conftest import commit_file, git, record


def test_append_then_read_round_trips_every_field(repo: Path) -> None:
    store = HistoryStore(repo)
    assert store.read() == [] and store.tip() is None
    first, second = record(0), record(1, trigger="prefect deployment privaudit-audit/nightly-audit")
    tip1 = store.append(first)
    tip2 = store.append(second)
    assert store.read() == [first, second]
    # each append is one commit on the ref, the previous tip its parent: the history is versioned
    assert git(repo, "rev-parse", f"{tip2}^") == tip1
    assert git(repo, "show", f"{REF}:{FILE}").count("\n") == 1  # git strips the last newline: 2 lines
    assert len(git(repo, "log", "--format=%H", REF).split()) == 2


def test_the_ref_is_no_branch_and_survives_checkout_of_an_older_commit(repo: Path) -> None:
    old = git(repo, "rev-parse", "HEAD")
    commit_file(repo, "src/lib.py", "x = 2\n")
    store = HistoryStore(repo)
    store.append(record(0))
    store.append(record(1))
    assert git(repo, "branch", "--list") == "* " + git(repo, "rev-parse", "--abbrev-ref", "HEAD")  # no new branch
    git(repo, "checkout", "-q", old)  # going back to an older audit
    (repo / "untracked.txt").write_text("x")
    git(repo, "clean", "-fdxq")
    assert [r.when for r in HistoryStore(repo).read()] == [record(0).when, record(1).when]
    store.append(record(2))  # and appending from the old commit extends the same history
    git(repo, "checkout", "-q", "-")
    assert len(HistoryStore(repo).read()) == 3


def test_a_concurrent_append_is_kept_and_this_one_retries(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run appends between our read of the tip and our update-ref: update-ref <new> <old> refuses, we
    retry on the new tip, and neither record is lost."""
    store, other = HistoryStore(repo), HistoryStore(repo)
    store.append(record(0))
    real = HistoryStore._commit
    raced = []

    def racing_commit(self: HistoryStore, parent: str | None, text: str, message: str) -> str:
        if self is store and not raced:
            raced.append(True)
            other.append(record(1, trigger="the other run"))
        return real(self, parent, text, message)

    monkeypatch.setattr(HistoryStore, "_commit", racing_commit)
    store.append(record(2, trigger="this run"))
    assert [r.trigger for r in store.read()] == ["dvc repro", "the other run", "this run"]


def test_parallel_processes_lose_no_record(repo: Path) -> None:
    code = ("import sys; from privaudit.history.store import HistoryStore; from tests.history.conftest import record\n"
            "s = HistoryStore(sys.argv[1])\n"
            "for i in range(3): s.append(record(i, trigger=f'{sys.argv[2]}-{i}'))\n")
    root = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": f"{root / 'src'}:{root}", "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(repo), f"p{k}"], cwd=root, env=env) for k in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    triggers = [r.trigger for r in HistoryStore(repo).read()]
    assert sorted(triggers) == sorted(f"p{k}-{i}" for k in range(4) for i in range(3))


def test_outside_a_git_repository_the_error_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match=r"not inside a git repository.*refs/privaudit/history.*git init"):
        HistoryStore(tmp_path)


def test_commits_without_a_configured_git_identity(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "none"))
    monkeypatch.setenv("EMAIL", "")
    HistoryStore(repo).append(record(0))
    out = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%an <%ae>", REF], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "privaudit <privaudit@localhost>"


def test_a_corrupt_line_is_named(repo: Path) -> None:
    store = HistoryStore(repo)
    store.append(record(0))
    text = git(repo, "show", f"{REF}:{FILE}") + "\n{\"version\": 1}\n"
    blob = subprocess.run(["git", "-C", str(repo), "hash-object", "-w", "--stdin"], input=text, text=True,
                          capture_output=True, check=True).stdout.strip()
    tree = subprocess.run(["git", "-C", str(repo), "mktree"], input=f"100644 blob {blob}\t{FILE}\n", text=True,
                          capture_output=True, check=True).stdout.strip()
    new = git(repo, "commit-tree", tree, "-m", "corrupt")
    git(repo, "update-ref", REF, new)
    with pytest.raises(ValueError, match=rf"{REF}:{FILE}:2: "):
        store.read()


def test_the_history_is_shared_by_push_and_fetch(repo: Path, tmp_path: Path) -> None:
    """The guide's commands: `git push origin refs/privaudit/history`, then in another clone
    `git fetch origin refs/privaudit/history:refs/privaudit/history`."""
    remote, clone = tmp_path / "remote.git", tmp_path / "clone"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(repo, "remote", "add", "origin", str(remote))
    HistoryStore(repo).append(record(0))
    git(repo, "push", "-q", "origin", REF)
    subprocess.run(["git", "clone", "-q", str(remote), str(clone)], check=True, capture_output=True)
    assert HistoryStore(clone).read() == []  # a clone fetches branches, not this ref
    git(clone, "fetch", "-q", "origin", f"{REF}:{REF}")
    assert HistoryStore(clone).read() == [record(0)]
