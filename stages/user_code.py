"""Stage user_code: content hashes of the ``kind: python`` defenders' trainer/loader files → ``data/user_code.json``.

``always_changed`` in dvc.yaml: runs on every ``dvc repro``, rewrites nothing when no user file
changed (the JSON is canonical), so DVC reruns the stages depending on it only after a trainer
edit. Reads ``params.yaml`` as plain YAML (no torch, no import of the user's module); see
:mod:`privaudit.user_code`. Refuses (exit 1) when a hashed file is not tracked by git: ``dvc exp
run`` would leave it out of the experiment without a word.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from privaudit.artifacts import write_json
from privaudit.user_code import UserCodeError, code_files, untracked_files, user_code_manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.user_code", description=__doc__.split("\n")[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    parser.add_argument("--out", type=Path, default=Path("data/user_code.json"))
    parser.add_argument("--repo", type=Path, default=Path("."), help="repository root (default: .)")
    args = parser.parse_args(argv)
    try:
        raw = yaml.safe_load(args.params.read_text(encoding="utf-8")) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{args.params} must hold a mapping")
        root = Path(os.path.abspath(args.repo))
        manifest = user_code_manifest(raw, root)
        if untracked := untracked_files(manifest, root):
            users = sorted(n for n, entry in manifest.items() if set(code_files(entry)) & set(untracked))
            raise ValueError(f"{', '.join(untracked)} (code of defender(s) {', '.join(users)}) not tracked by git, "
                             f"so `dvc exp run` would leave it out of the experiment; run "
                             f"`git add {' '.join(untracked)}`")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, manifest)  # canonical JSON: same bytes while no user file changed
    except (UserCodeError, ValueError, OSError, yaml.YAMLError) as err:
        print(f"stage user_code failed: {err}", file=sys.stderr)
        return 1
    print(f"user_code: {len(manifest)} python defender(s) → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
