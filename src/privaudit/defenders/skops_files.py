"""Byte-reproducible skops files.

``skops.io.dump`` names the arrays of its zip archive, and fills the schema's ``__id__`` fields,
with CPython object addresses, and stamps each entry with the current time: the same model saved
twice gives two different files. DVC hashes the ``data/defenders`` output, so that would change
``dvc.lock`` on every run and rerun every stage downstream of an unchanged model. :func:`dump_skops`
writes the same archive with the ids renumbered in order of first appearance (identity, and
so skops's shared-reference memo, is preserved: equal ids stay equal) and fixed timestamps.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import skops.io as sio

from privaudit.artifacts import atomic_file

#: the timestamp every archive entry gets (the zip format's earliest)
EPOCH = (1980, 1, 1, 0, 0, 0)


def canonical_skops(data: bytes) -> bytes:
    """The archive ``data`` (from ``skops.io.dumps``) with renumbered ids and fixed timestamps."""
    with zipfile.ZipFile(io.BytesIO(data)) as zin:
        schema = json.loads(zin.read("schema.json"))
        files = {info.filename: (zin.read(info), info.compress_type) for info in zin.infolist()
                 if info.filename != "schema.json"}
    ids: dict[Any, int] = {}
    renamed: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "__id__" in node:
                node["__id__"] = ids.setdefault(node["__id__"], len(ids))
            name = node.get("file")
            if isinstance(name, str) and name in files:
                renamed.setdefault(name, f"{len(renamed)}{Path(name).suffix}")
                node["file"] = renamed[name]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    unreferenced = sorted(set(files) - set(renamed))
    if unreferenced:
        raise ValueError(f"skops archive holds files its schema does not name: {unreferenced}")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zout:
        zout.writestr(zipfile.ZipInfo("schema.json", EPOCH), json.dumps(schema, indent=2),
                      compress_type=zipfile.ZIP_STORED)
        for old, new in sorted(renamed.items(), key=lambda kv: int(Path(kv[1]).stem)):
            payload, compress = files[old]
            zout.writestr(zipfile.ZipInfo(new, EPOCH), payload, compress_type=compress)
    return out.getvalue()


def dump_skops(obj: Any, path: Path) -> None:
    """Save ``obj`` with skops to ``path`` (atomically), byte-identical for equal models."""
    data = canonical_skops(sio.dumps(obj))
    with atomic_file(path, "wb") as fh:
        fh.write(data)
