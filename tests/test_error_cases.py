"""Every case of tests/error_cases.py against the real command-line tools, and docs/errors.md against the table."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import shlex
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.mirror_harness import BIN

from .error_cases import BASE, CASES, render

ROOT = Path(__file__).resolve().parents[1]
PORT_SETTINGS = {
    "mirror": "mirror: {metrics_port: %d}\n",
    "monitor": "monitor: {metrics_port: %d, http_port: null}\n",
    "canary": "canary: {metrics_port: %d}\n",
}


def pattern(message: str) -> re.Pattern:
    return re.compile(".*?".join(re.escape(part) for part in message.split("…")), re.S)


def run_case(case: dict, folder: Path) -> tuple[subprocess.CompletedProcess, str]:
    """Run one case in its own folder; returns the finished process and the expected message."""
    folder.mkdir(parents=True, exist_ok=True)
    config, expected = case.get("config", BASE), case["message"]
    holder = None
    if case.get("busy_port"):
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        config += PORT_SETTINGS[case["busy_port"]] % port
        expected = expected.replace("{port}", str(port))
    (folder / "m.yaml").write_text(config)
    for name, content in case.get("files", {}).items():
        path = folder / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    argv = shlex.split(case["command"])
    if not needs_process(case):
        return run_in_process(argv, folder), expected
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRRORWATCH__")}
    try:
        return subprocess.run(
            [str(BIN / argv[0]), *argv[1:]], cwd=folder, capture_output=True, text=True, timeout=90, env=env
        ), expected
    finally:
        if holder is not None:
            holder.close()


ENTRY_POINTS = {
    "mirror": "mirrorwatch.mirror.cli:main",
    "canary": "mirrorwatch.canary.cli:main",
    "monitor": "mirrorwatch.entrypoints:monitor_main",
    "mirrorwatch": "mirrorwatch.doctor.cli:main",
}


def needs_process(case: dict) -> bool:
    """Services, busy ports and clusters that are away run as real processes; bad input is refused before any
    client exists, so the same entry point (`pyproject.toml`'s scripts) runs in this process, much faster."""
    return bool(case.get("service") or case.get("busy_port") or "127.0.0.1:" in case["message"])


def run_in_process(argv: list[str], folder: Path) -> subprocess.CompletedProcess:
    module, name = ENTRY_POINTS[argv[0]].split(":")
    main = getattr(importlib.import_module(module), name)
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv[1:])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(cwd)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every case at once (most of the time is interpreter start-up and waiting for clusters that are away)."""
    base = tmp_path_factory.mktemp("errors")
    results: list = [None] * len(CASES)
    for i, case in enumerate(CASES):  # in-process ones one by one (they change the working folder)
        if not needs_process(case):
            results[i] = run_case(case, base / str(i))
    with ThreadPoolExecutor(max_workers=4) as pool:
        waiting = {i: pool.submit(run_case, case, base / str(i)) for i, case in enumerate(CASES) if needs_process(case)}
        for i, future in waiting.items():
            results[i] = future.result()
    return results


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{i + 1}-{c['input'][:40]}" for i, c in enumerate(CASES)])
def test_error_case(index, outcomes):
    case = CASES[index]
    proc, expected = outcomes[index]
    argv = shlex.split(case["command"])
    stream = proc.stdout if case.get("stream") == "stdout" else proc.stderr
    lines = [line for line in stream.splitlines() if line.strip()]
    assert proc.returncode == case["exit"], (proc.returncode, proc.stdout, proc.stderr)
    assert lines and pattern(expected).fullmatch(lines[-1]), (expected, stream)
    if not case.get("service"):  # a service may log before it fails; a one-shot says one line
        assert len(lines) == 1, f"one line, not {len(lines)}:\n{stream}"
    assert "Traceback" not in proc.stderr and "%3|" not in proc.stderr and "%4|" not in proc.stderr
    if case.get("json"):
        body = json.loads(proc.stdout)  # exactly one JSON object: json.loads refuses anything after it
        assert isinstance(body, dict) and body["exit_code"] == case["exit"]
        prog = argv[0] + ": "
        assert pattern(expected.removeprefix(prog)).fullmatch(body["error"]), body


def test_at_least_30_cases():
    assert len(CASES) >= 30
    assert all({"input", "message", "exit"} <= set(case) for case in CASES)


def test_errors_page_is_current():
    assert (ROOT / "docs" / "errors.md").read_text() == render(), (
        "regenerate: .venv/bin/python -m tests.error_cases > docs/errors.md"
    )
