"""The imported config as YAML a person reads: a head saying where it came from, which environment variables hold
the secrets and what was not carried over, then ``clusters:`` and ``flows:`` in the input's order."""

from __future__ import annotations

from typing import Any

import yaml

from .common import Imported

_WIDTH = 1 << 30


def _scalar(value: Any) -> str:
    """One value in YAML's flow style, quoted only where YAML needs it."""
    text: str = yaml.safe_dump(value, default_flow_style=True, width=_WIDTH, allow_unicode=True)
    if text.endswith("\n...\n"):
        text = text[: -len("\n...\n")]
    return text.strip()


def _mapping(node: dict[str, Any], path: tuple[str, ...], depth: int, imported: Imported, lines: list[str]) -> None:
    pad = "  " * depth
    for key, value in node.items():
        here = (*path, key)
        comment = imported.comments.get(here)
        tail = f"  # {comment}" if comment else ""
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{_scalar(key)}:{tail}")
            _mapping(value, here, depth + 1, imported, lines)
        else:
            lines.append(f"{pad}{_scalar(key)}: {_scalar(value)}{tail}")
    lines.extend(f"{pad}# {line}" for line in imported.trailers.get(path, []))


def head_lines(imported: Imported, command: str) -> list[str]:
    lines = [
        f"# mirrorwatch config written by `{command}`",
        f"# from {imported.origin}.",
        "# Check it"
        + (", set the environment variables below" if imported.env else "")
        + ", then run `mirrorwatch doctor --config <this file>`.",
    ]
    if imported.env:
        lines += ["#", "# Environment variables it reads (secrets are never copied into this file):"]
        width = max(len(ref.var) for ref in imported.env)
        lines += [f"#   {ref.var.ljust(width)}  {ref.where}" for ref in imported.env]
    if imported.notes:
        lines += ["#", "# Not carried over:"]
        lines += [f"#   - {note}" for note in imported.notes]
    return lines


def render_yaml(imported: Imported, command: str) -> str:
    lines = head_lines(imported, command)
    _mapping(imported.config_dict(), (), 0, imported, lines)
    return "\n".join(lines) + "\n"
