"""Java ``.properties`` text, read the way ``java.util.Properties.load`` reads it.

Comments start with ``#`` or ``!`` (first non-blank character of a natural line); the key ends at the first
unescaped ``=``, ``:`` or whitespace (whitespace around the separator is skipped); a line ending in an odd number
of backslashes continues on the next, whose leading whitespace is dropped; escapes ``\\t \\n \\r \\f \\uXXXX`` and
``\\x`` → ``x`` apply in keys and values. A key given twice keeps the last value, as Java does.
"""

from __future__ import annotations

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANK = " \t\f"


class PropertiesError(ValueError):
    """Text that Java would refuse (a malformed ``\\uXXXX``), with its line number."""


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) with continuations joined and comments and blank lines dropped."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip(_BLANK)
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        body = line[:-1] if continued else line
        pending = body if pending is None else pending + body
        if not continued:
            out.append((start, pending))
            pending = None
    if pending is not None:  # a continuation at the end of the file: Java keeps what it has
        out.append((start, pending))
    return out


def _unescape(text: str, number: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(f"line {number}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key and raw value of one logical line."""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _BLANK:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _BLANK:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _BLANK:
            j += 1
    return key, line[j:]


def parse_properties(text: str) -> dict[str, str]:
    """Keys and values in file order (a repeated key keeps its first place and its last value)."""
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        props[_unescape(key, number)] = _unescape(value, number)
    return props
