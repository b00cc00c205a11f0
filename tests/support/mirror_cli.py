"""The `mirror` command as a subprocess of the test (the session's virtualenv), and `mirror failover check --json`
read through it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from harness.mirror_harness import BIN


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "mirror"), *args], capture_output=True, text=True, timeout=timeout)


def check(path: Path | str, *groups: str) -> tuple[int, Any]:
    """`mirror failover check --json` for the config at ``path`` and these groups: its exit code and its answer."""
    args = ["failover", "check", "--config", str(path), "--json", "--timeout", "60"]
    for g in groups:
        args += ["--group", g]
    result = run_cli(*args, timeout=90)
    assert result.returncode in (0, 1, 2) and result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)
