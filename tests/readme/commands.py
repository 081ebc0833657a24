"""The commands and code blocks of README.md and of the user guide (docs/**/*.md), extracted so that each can be
mapped to the test that runs it (:func:`doc_snippets`; :func:`readme_snippets` reads one file).

A *command* is a logical line of a fenced ``bash``/``sh``/``console`` block (only the ``$ `` lines
when the block shows output too; comments and ``\\`` continuations folded) or an inline code span
that starts like a command (``python …``, ``dvc …``, ``make …``, ``cp …``, ``mkdocs …``, ``.venv/bin/…``). Any
other fenced block (``python``, ``yaml``, plain output) is a *code block*, keyed by its language and
first line. Whitespace is collapsed, so the keys are stable under re-wrapping of the README.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def doc_files() -> list[Path]:
    """README.md and every Markdown page of the user guide, in a stable order."""
    return [README, *sorted(DOCS.rglob("*.md"))]

SHELL_LANGS = {"bash", "sh", "shell", "console"}
#: how an inline code span that is a command starts
COMMAND_START = re.compile(
    r"^(?:[A-Z_]+=\S+\s+)*(?:python3?|\.venv/bin/\S+|dvc|make|cp|bash|git|rm|source|privaudit|prefect|mkdocs|pip)\s+\S"
)
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Snippet:
    """One command or code block of the README: ``kind`` is ``command`` or ``block:<lang>``."""

    kind: str
    text: str
    line: int
    path: Path = README

    @property
    def where(self) -> str:
        return str(self.path.relative_to(ROOT)) if self.path.is_relative_to(ROOT) else str(self.path)

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.text}"


def _normal(text: str) -> str:
    return " ".join(text.split())


def _strip_comment(line: str) -> str:
    """``line`` without a trailing `` # comment`` outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _shell_commands(body: list[tuple[int, str]], path: Path) -> list[Snippet]:
    prompts = any(text.lstrip().startswith("$ ") for _, text in body)
    out: list[Snippet] = []
    pending, start = "", 0
    for number, raw in body:
        text = raw.strip()
        if not pending:
            if prompts and not text.startswith("$ "):
                continue  # a line of output
            text = text.removeprefix("$ ")
            start = number
        text = _strip_comment(text).rstrip()
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        command = _normal(pending + text)
        pending = ""
        if command:
            out.append(Snippet("command", command, start, path))
    return out


def readme_snippets(path: Path = README) -> list[Snippet]:
    """Every command and code block of ``path``, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    snippets: list[Snippet] = []
    fence: tuple[int, str] | None = None
    body: list[tuple[int, str]] = []
    prose: list[str] = []  # the text outside fences, blank where a fence was (line numbers kept)
    for number, line in enumerate(lines, start=1):
        match = FENCE.match(line.strip())
        if fence is None and match:
            fence, body = (number, match.group(1).lower()), []
            prose.append("")
            continue
        prose.append("" if fence is not None else line)
        if fence is not None:
            if line.strip() == "```":
                start, lang = fence
                if lang in SHELL_LANGS:
                    snippets += _shell_commands(body, path)
                else:
                    first = next((text.strip() for _, text in body if text.strip()), "")
                    snippets.append(Snippet(f"block:{lang or 'text'}", _normal(first), start, path))
                fence = None
            else:
                body.append((number, line))
            continue
    if fence is not None:
        raise ValueError(f"{path}:{fence[0]}: unclosed code fence")
    text = "\n".join(prose)
    for match in re.finditer(r"`([^`]+)`", text):  # a span may wrap onto the next line
        span = _normal(match.group(1))
        if COMMAND_START.match(span):
            snippets.append(Snippet("command", span, text.count("\n", 0, match.start()) + 1, path))
    return sorted(snippets, key=lambda s: s.line)


def doc_snippets() -> list[Snippet]:
    """Every command and code block of the README and of every page of the guide."""
    return [s for path in doc_files() for s in readme_snippets(path)]


def doc_text() -> str:
    """The README and the guide's pages, concatenated (for checks of quoted numbers and flags)."""
    return "\n".join(path.read_text(encoding="utf-8") for path in doc_files())


def block_text(start_line: int, path: Path = README) -> str:
    """The body of the fenced block whose opening fence is on ``start_line``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    body = []
    for line in lines[start_line:]:
        if line.strip() == "```":
            return "\n".join(body) + "\n"
        body.append(line)
    raise ValueError(f"{path}:{start_line}: unclosed code fence")
