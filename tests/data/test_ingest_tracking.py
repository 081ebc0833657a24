"""The ingest stage warns when dataset.path lies outside the folder DVC tracks for it."""

from __future__ import annotations

from pathlib import Path

import yaml

from stages.ingest import TRACKED_DATA, untracked_path_warning


def test_paths_under_the_tracked_folder_are_quiet(tmp_path: Path) -> None:
    root = tmp_path / "data/external"
    assert untracked_path_warning(None, root) is None
    assert untracked_path_warning(str(root / "table.csv"), root) is None
    assert untracked_path_warning(str(root / "images" / "cat" / "1.png"), root) is None
    assert untracked_path_warning(str(root), root) is None


def test_paths_elsewhere_get_a_warning_naming_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "data/external"
    msg = untracked_path_warning(str(tmp_path / "elsewhere.csv"), root)
    assert msg is not None and "dataset.path=" in msg and "elsewhere.csv" in msg
    assert "dvc repro -f -s ingest" in msg
    # a sibling whose name starts like the tracked folder is still outside it
    assert untracked_path_warning(str(tmp_path / "data/external2/x.csv"), root) is not None


def test_dvc_yaml_tracks_that_folder(repo_root: Path) -> None:
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    assert str(TRACKED_DATA) in stages["ingest"]["deps"]
    assert (repo_root / TRACKED_DATA / ".gitkeep").is_file()
