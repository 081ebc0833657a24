"""The history file, ``history.jsonl``, on the git ref :data:`REF` (``refs/privaudit/history``).

Why a ref and not a file in the work tree or a branch: ``git checkout`` of any commit (or ``dvc
checkout``, ``git stash``, ``git clean``) never touches a ref outside ``refs/heads``, so going back to an
older audit keeps the history of every later one; every append is a commit on the ref, so the history is
versioned (``git log refs/privaudit/history``) and shared like any ref (``git push origin
refs/privaudit/history``, ``git fetch origin refs/privaudit/history:refs/privaudit/history``). It is
shared by every worktree of the repository.

An append is written with git plumbing only (no index, no work tree, no checkout): ``hash-object``
for the new file, ``mktree``, ``commit-tree`` with the previous tip as parent, then ``update-ref <ref>
<new> <old>``, which moves the ref only if it still points at ``<old>``: two runs appending at the same
time never lose a record; the loser reads the new tip and tries again after a random pause (:data:`RETRIES`). Where git has
no user name or e-mail configured, the commits are made as ``privaudit <privaudit@localhost>``.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from privaudit.history.records import AuditRecord

__all__ = ["FILE", "REF", "RETRIES", "HistoryError", "HistoryStore", "git"]

REF = "refs/privaudit/history"
FILE = "history.jsonl"
#: appends tried before giving up on a busy ref (each retry reads the new tip, after a random pause that grows)
RETRIES = 30
_DEFAULT_IDENTITY = {"user.name": "privaudit", "user.email": "privaudit@localhost"}


class HistoryError(ValueError):
    """The history cannot be read or written (no git repository, git missing, a lost race every time)."""


def git(repo: Path, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``git -C repo <args>``; :class:`HistoryError` when git is missing or (``check``) exits non-zero."""
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        raise HistoryError(f"cannot run git ({err}); the audit history is kept in git: install git") from None
    if check and proc.returncode != 0:
        raise HistoryError(f"`git {' '.join(args)}` in {repo} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


class HistoryStore:
    """The history of the git repository holding ``repo``.

    Raises:
        HistoryError: ``repo`` is not inside a git repository (the message names the fix).
    """

    def __init__(self, repo: str | Path, ref: str = REF) -> None:
        self.repo = Path(repo)
        self.ref = ref
        if git(self.repo, "rev-parse", "--git-dir", check=False).returncode != 0:
            raise HistoryError(
                f"{self.repo.resolve()} is not inside a git repository, and the audit history is kept on the git ref "
                f"{ref}: run the pipeline in a git repository (`git init`), as DVC expects")

    # ------------------------------------------------------------------ reading

    def tip(self) -> str | None:
        """The commit the ref points at (``None``: no history yet)."""
        proc = git(self.repo, "rev-parse", "-q", "--verify", f"{self.ref}^{{commit}}", check=False)
        if proc.returncode != 0:
            return None
        return proc.stdout.strip() or None

    def _text(self, commit: str | None) -> str:
        if commit is None:
            return ""
        proc = git(self.repo, "cat-file", "blob", f"{commit}:{FILE}", check=False)
        if proc.returncode != 0:
            raise HistoryError(f"{self.ref} ({commit[:12]}) holds no {FILE}: it is not a privaudit history; "
                               f"move it away (`git update-ref -d {self.ref}`) to start a new one")
        return proc.stdout

    def read(self) -> list[AuditRecord]:
        """Every record, oldest first.

        Raises:
            ValueError: a line is not a record (named ``<ref>:history.jsonl:<line>``).
        """
        lines = self._text(self.tip()).splitlines()
        return [AuditRecord.from_line(line, f"{self.ref}:{FILE}:{i}") for i, line in enumerate(lines, 1) if line.strip()]

    # ------------------------------------------------------------------ writing

    def _identity(self) -> list[str]:
        """``-c user.name=… -c user.email=…`` for what git has not configured (nor the environment set)."""
        args: list[str] = []
        for key, env in (("user.name", "GIT_COMMITTER_NAME"), ("user.email", "GIT_COMMITTER_EMAIL")):
            if not os.environ.get(env) and not git(self.repo, "config", key, check=False).stdout.strip():
                args += ["-c", f"{key}={_DEFAULT_IDENTITY[key]}"]
        return args

    def _commit(self, parent: str | None, text: str, message: str) -> str:
        blob = git(self.repo, "hash-object", "-w", "--stdin", input=text).stdout.strip()
        tree = git(self.repo, "mktree", input=f"100644 blob {blob}\t{FILE}\n").stdout.strip()
        parents: Sequence[str] = ("-p", parent) if parent else ()
        return git(self.repo, *self._identity(), "commit-tree", "--no-gpg-sign", tree, *parents,
                   "-m", message).stdout.strip()

    def append(self, record: AuditRecord) -> str:
        """Append ``record`` atomically; returns the new tip commit.

        Raises:
            HistoryError: git failed, or the ref moved under us :data:`RETRIES` times in a row.
        """
        line = record.to_line()
        message = f"privaudit history: {record.when.isoformat()} {record.trigger}"
        jitter = random.SystemRandom()  # retry timing only: no number of any record depends on it
        for attempt in range(RETRIES):
            if attempt:
                time.sleep(jitter.uniform(0.0, 0.05 * min(attempt, 10)))
            old = self.tip()
            text = self._text(old)
            if text and not text.endswith("\n"):
                text += "\n"
            new = self._commit(old, text + line, message)
            # moves the ref only while it still points at `old` ("" = must not exist yet): a concurrent append wins
            # the race and this one retries on top of it
            if git(self.repo, "update-ref", "-m", message, self.ref, new, old or "", check=False).returncode == 0:
                return new
        raise HistoryError(f"{self.ref} kept moving while this run appended its record ({RETRIES} tries); "
                           "run `dvc repro -s history` again")
