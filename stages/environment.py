"""Stage environment: Python's and the result packages' versions → ``data/environment.json``.

``always_changed`` in dvc.yaml: runs on every ``dvc repro`` and writes canonical JSON, so the same
environment gives the same bytes and nothing downstream reruns; after a package upgrade every stage
that lists the file reruns (:mod:`privaudit.repro.environment`). Imports no torch: versions come from
package metadata.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privaudit.artifacts import write_json
from privaudit.repro.environment import environment_manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.environment", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/environment.json"))
    args = parser.parse_args(argv)
    manifest = environment_manifest()
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, manifest)  # canonical JSON: same bytes while no version changed
    except OSError as err:
        print(f"stage environment failed: cannot write {args.out}: {err}", file=sys.stderr)
        return 1
    print(f"environment: python {manifest['python']}, "
          + ", ".join(f"{k} {v}" for k, v in manifest["packages"].items()) + f" → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
