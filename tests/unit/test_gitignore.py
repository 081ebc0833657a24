"""Folders the README's commands create are git-ignored (issue 28: `dvc plots diff -o dvc_plots_diff`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
@pytest.mark.parametrize("path", ["dvc_plots/index.html", "dvc_plots_diff/index.html"])
def test_dvc_plots_output_folders_are_ignored(path: str) -> None:
    proc = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
    assert proc.returncode == 0, f"{path} is not git-ignored"
