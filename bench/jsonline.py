"""One JSON line per benchmark run, so runs can be compared across commits (shape and examples: bench/README.md).

    with BenchRun("mm2", vars(args)) as run:
        run.figures["latency"] = {...}
    # on leaving: prints {"bench": "mm2", "schema": 1, "status": "ok", "commit": ..., "figures": {...}} on one line

Every script under bench/ prints exactly one such line per run, starting with ``{"bench":`` (so
``grep '^{"bench"'`` picks it out of the human output). A run that fails part-way still prints its line, with
``"status": "failed"``, the error, and the figures it had measured by then. Units are in the figure names
(``records_per_s``, ``p99_ms``, ``cpu_s_per_million``); non-finite numbers (NaN, inf) are written as null.

Compare two saved runs:  .venv/bin/python -m bench.jsonline OLD.jsonl NEW.jsonl
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

SCHEMA = 1  # bump when a key changes meaning, so old lines are not compared with new ones by mistake
ROOT = Path(__file__).resolve().parents[1]


def git_commit() -> tuple[str | None, bool | None]:
    """(short commit, whether tracked files differ from it); (None, None) outside a git checkout."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "diff", "--quiet", "HEAD", "--"], cwd=ROOT, capture_output=True, timeout=10
            ).returncode
            != 0
        )
        return commit, dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


def clean(value):
    """JSON-safe: NaN/inf → null, floats to 6 significant digits (the figures are not more exact than that)."""
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return clean(value.item())
    return value


class BenchRun:
    """Collects one run's parameters and figures; prints the JSON line when the ``with`` block ends."""

    def __init__(self, bench: str, params: dict):
        self.bench, self.params = bench, dict(params)
        self.figures: dict = {}
        self.started = time.time()
        self.load_start = os.getloadavg()[0]
        self.commit, self.dirty = git_commit()  # the code that runs is the code at the start

    def __enter__(self) -> BenchRun:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        status = "ok" if exc is None else "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        print(self.line(status, None if exc is None else f"{exc_type.__name__}: {exc}"), flush=True)

    def line(self, status: str = "ok", error: str | None = None) -> str:
        record = {
            "bench": self.bench,
            "schema": SCHEMA,
            "status": status,
            "commit": self.commit,
            "dirty": self.dirty,
            "timestamp": datetime.datetime.fromtimestamp(self.started, datetime.UTC).isoformat(timespec="seconds"),
            "elapsed_s": time.time() - self.started,
            "machine": {
                "host": platform.node(),
                "arch": platform.machine(),
                "cores": os.cpu_count(),
                "python": platform.python_version(),
                "load_1m_start": self.load_start,
                "load_1m_end": os.getloadavg()[0],
            },
            "params": self.params,
            "figures": self.figures,
        }
        if error:
            record["error"] = error
        return json.dumps(clean(record), separators=(",", ":"))


def flatten(value, prefix: str = "") -> dict[str, object]:
    """{"a": {"b": [1, 2]}} → {"a.b.0": 1, "a.b.1": 2}: one dotted path per figure, for comparing runs."""
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}{i}."))
        return out
    return {prefix.rstrip("."): value}


def read_lines(path: str) -> list[dict]:
    """The JSON lines of a file (other text, e.g. a whole run's saved output, is skipped)."""
    lines = Path(path).read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith('{"bench"')]


def compare(old: dict, new: dict) -> list[str]:
    """Every numeric figure of two runs of the same bench, side by side with new / old."""
    a, b = flatten(old["figures"]), flatten(new["figures"])
    rows = [f"{old['bench']}: {old['commit']} ({old['timestamp']}) → {new['commit']} ({new['timestamp']})"]
    params_a, params_b = flatten(old.get("params", {})), flatten(new.get("params", {}))
    for key in sorted(k for k in set(params_a) | set(params_b) if params_a.get(k) != params_b.get(k)):
        rows.append(f"  parameter {key}: {params_a.get(key)} → {params_b.get(key)} (figures may not be comparable)")
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
        ratio = f"{y / x:8.3f}" if number(x) and number(y) and x else "       -"
        rows.append(f"  {key:<60} {x!s:>14} {y!s:>14} {ratio}")
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python -m bench.jsonline OLD NEW  (files holding bench JSON lines; the last line of each bench "
            "in OLD is compared with the last of the same bench in NEW)",
            file=sys.stderr,
        )
        return 2
    try:
        old, new = ({r["bench"]: r for r in read_lines(p)} for p in argv)
    except (OSError, ValueError) as exc:
        print(f"bench.jsonline: cannot read the runs ({exc}); give two files of bench JSON lines", file=sys.stderr)
        return 2
    common = [b for b in new if b in old]
    if not common:
        print("bench.jsonline: no bench appears in both files; nothing to compare", file=sys.stderr)
        return 1
    for bench in common:
        if old[bench].get("schema") != new[bench].get("schema"):
            print(
                f"{bench}: schema {old[bench].get('schema')} vs {new[bench].get('schema')}; figures may differ in meaning"
            )
        print("\n".join(compare(old[bench], new[bench])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
