"""Stage user_code: content hashes of the ``kind: python`` defenders' trainer/loader files → ``data/user_code.json``.

``always_changed`` in dvc.yaml: runs on every ``dvc repro``, rewrites nothing when no user file
changed (the JSON is canonical), so DVC reruns the stages depending on it only after a trainer
edit. As the first stage that runs on every ``dvc repro``, it validates the whole params file
first (:func:`privaudit.config.load_params`), so a bad value anywhere — ``defenders[i].claimed_epsilon:
-1`` — stops the pipeline here, before any stage works, even when the only stage that reads the key
would be a later one. Validation imports a ``kind: python`` target's module (as every stage's does);
the hashes themselves come from the plain YAML (see :mod:`privaudit.repro.user_code`).
It also refuses (exit 1) when a hashed file is not tracked by git: ``dvc exp
run`` would leave it out of the experiment without a word. A file that an experiment of the current
commit recorded is first staged again (``dvc exp run`` and ``dvc exp apply`` reset the index to
``HEAD`` when they finish, unstaging a trainer that was only ``git add``-ed; see
:func:`privaudit.repro.user_code.restage_experiment_files`), and the stage says so.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

import yaml

from privaudit.artifacts import write_json
from privaudit.config import load_params
from privaudit.messages import cap
from privaudit.repro.user_code import (UserCodeError, code_files, restage_experiment_files, untracked_files,
                                 user_code_manifest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.user_code", description=__doc__.split("\n")[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    parser.add_argument("--out", type=Path, default=Path("data/user_code.json"))
    parser.add_argument("--repo", type=Path, default=Path("."), help="repository root (default: .)")
    args = parser.parse_args(argv)
    try:
        params_file = args.params.resolve()
        with contextlib.chdir(args.repo):  # targets are repository paths, as in every stage (dvc runs them there)
            load_params(params_file)  # every params error, before any stage runs (ParamsError is a ValueError)
        raw = yaml.safe_load(params_file.read_text(encoding="utf-8")) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{args.params} must hold a mapping")
        root = Path(os.path.abspath(args.repo))
        manifest = user_code_manifest(raw, root)
        untracked = untracked_files(manifest, root)
        if restaged := restage_experiment_files(untracked, root):
            print(f"user_code: staged {', '.join(restaged)} again (`git add`): experiment "
                  f"{', '.join(sorted(set(restaged.values())))} of this commit recorded it, and "
                  f"`dvc exp run`/`dvc exp apply` unstage files HEAD does not have")
            untracked = [f for f in untracked if f not in restaged]
        if untracked:
            users = sorted(n for n, entry in manifest.items() if set(code_files(entry)) & set(untracked))
            raise ValueError(f"{', '.join(untracked)} (code of defender(s) {', '.join(users)}) not tracked by git, "
                             f"so `dvc exp run` would leave it out of the experiment; run "
                             f"`git add {' '.join(untracked)}`")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, manifest)  # canonical JSON: same bytes while no user file changed
    except (UserCodeError, ValueError, OSError, yaml.YAMLError) as err:
        print(f"stage user_code failed: {cap(str(err))}", file=sys.stderr)
        return 1
    print(f"user_code: {len(manifest)} python defender(s) → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
