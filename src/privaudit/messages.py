"""The length cap of user-facing messages: one helper, used wherever a message can grow with its input.

An error message names the key or file, the bad value and what to do, in one line (see
docs/architecture.md, "Validation before work"). Values quoted into a message (a params entry,
a CSV header, a list of drifted files) can be arbitrarily long; :func:`cap` cuts them so that
the fix, which callers put after the capped part, is always read.
"""

from __future__ import annotations

#: the longest message a stage, ``privaudit verdict`` or a flow prints, before its fix hint
MAX_MESSAGE_CHARS = 1000

#: the longest quoted value (``got …``) inside a message
MAX_VALUE_CHARS = 80


def cap(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` unchanged when it has at most ``limit`` characters, else its first ``limit`` + "… (N more characters)".

    >>> cap("abcdef", 4)
    'abcd… (2 more characters)'
    >>> cap("abc", 4)
    'abc'
    """
    if limit < 1:
        raise ValueError(f"limit={limit}: a message cap must be at least 1 character")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


__all__ = ["MAX_MESSAGE_CHARS", "MAX_VALUE_CHARS", "cap"]
