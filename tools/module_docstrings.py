"""mkdocs hook: the docstring of a module that mkdocstrings cannot collect, rendered into a page.

griffe, which mkdocstrings uses, does not find modules of a namespace sub-package (``privaudit.defenders``
has no ``__init__.py``). A page names such a module with the marker
``<!-- module-docstring: privaudit.defenders.user -->``; this hook imports the module and puts its
docstring there, with Sphinx roles (``:func:`x```) turned into code spans.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

MARKER = re.compile(r"<!-- module-docstring: ([\w.]+) -->")


def module_markdown(name: str) -> str:
    """The module docstring of ``name`` as Markdown (roles become code spans; ``::`` blocks stay code)."""
    doc = inspect.getdoc(importlib.import_module(name)) or ""
    doc = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", doc)
    doc = re.sub(r"::\n\n", ":\n\n", doc)
    return f"## `{name}`\n\n{doc}\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill every module-docstring marker of the page."""
    return MARKER.sub(lambda m: module_markdown(m.group(1)), markdown)
