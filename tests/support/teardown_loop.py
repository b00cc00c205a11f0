"""Run a command many times as real processes and count how each ended: exit codes, deaths by a signal, and
whether the interpreter's teardown ran (an atexit hook, installed by a sitecustomize on PYTHONPATH, leaves a
marker file per process). tests/test_teardown.py runs it at a small count; the full run (issue 37: 100 each):

    python -m tests.support.teardown_loop --source HOST:PORT --target HOST:PORT --count 100
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SITECUSTOMIZE = """\
import atexit, os
_markers = os.environ.get("MIRRORWATCH_TEST_ATEXIT_DIR")
if _markers:
    atexit.register(lambda: open(os.path.join(_markers, str(os.getpid())), "w").close())
"""

# the one-shot commands of issue 37 item 5, and what each may exit with (docs/errors.md, README)
ONE_SHOTS: dict[str, tuple[list[str], set[int]]] = {
    "canary check": (["canary", "check", "--timeout", "3"], {0, 1, 2, 3}),
    "monitor lag": (["monitor", "lag", "--samples", "1"], {0, 1, 2, 3}),
    "mirror failover check": (["mirror", "failover", "check"], {0, 1, 2, 3}),
    "doctor": (["mirrorwatch", "doctor"], {0, 1}),
}
# the long-lived services, stopped by SIGTERM (exit 0) soon after the log line that says they are at work
SERVICES: dict[str, tuple[list[str], str]] = {
    "mirror run": (["mirror", "run"], "assigned "),  # its group gave it partitions
    "canary run": (["canary", "run"], "canary running:"),  # its first probe is under way
    "monitor run": (["monitor", "run"], "monitor: sampling every"),  # its first cycle is under way
}


@dataclass
class Outcome:
    """How ``count`` runs of one command ended."""

    codes: collections.Counter[int | str] = field(default_factory=collections.Counter)
    torn_down: int = 0  # processes whose atexit hooks ran
    seconds: float = 0.0
    first_bad: str = ""  # the output of the first run that ended badly

    @property
    def signalled(self) -> int:
        return sum(n for code, n in self.codes.items() if isinstance(code, int) and code < 0)


def write_config(directory: Path, source: str, target: str) -> Path:
    body = {
        "clusters": {"east": {"bootstrap.servers": source}, "west": {"bootstrap.servers": target}},
        "flows": {"east-west": {"source": "east", "target": "west"}},
        "mirror": {"metrics_port": 0},
        "canary": {"metrics_port": 0, "warn_latency_s": 2, "crit_latency_s": 3},
        "monitor": {"metrics_port": 0, "http_port": 0, "history_dir": str(directory / "history")},
    }
    path = directory / "teardown.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def environment(directory: Path) -> tuple[dict[str, str], Path]:
    """The children's environment (the atexit hook on PYTHONPATH first) and the folder of their markers."""
    site, markers = directory / "site", Path(tempfile.mkdtemp(prefix="atexit-", dir=directory))
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "MIRRORWATCH_TEST_ATEXIT_DIR": str(markers)}, markers


Ended = tuple[int, int | str, str]  # the process id, its exit code (or "hung"), the end of its output


def _one_shot(argv: list[str], env: dict[str, str]) -> Ended:
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
    )
    try:
        output, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        return proc.pid, "hung", output[-3000:]
    return proc.pid, proc.returncode, output[-3000:]


def _short_service_run(argv: list[str], ready: str, env: dict[str, str], log: Path, up_s: float) -> Ended:
    """Start the service, wait for its ``ready`` log line (at most 30 s), let it run ``up_s``, then SIGTERM it."""
    with open(log, "w+b") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            out.seek(0)
            if ready.encode() in out.read():
                break
            time.sleep(0.1)
        time.sleep(up_s)
        proc.send_signal(signal.SIGTERM)
        try:
            code: int | str = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = "hung"
        out.seek(0)
        return proc.pid, code, out.read().decode(errors="replace")[-3000:]


def run_many(
    name: str, config: Path, directory: Path, count: int, parallel: int = 2, up_s: float = 0.5
) -> tuple[Outcome, set[int | str]]:
    """Run the named command (of ONE_SHOTS or SERVICES) ``count`` times, ``parallel`` at once."""
    env, markers = environment(directory)
    if name in SERVICES:
        words, ready = SERVICES[name]
        argv, allowed = [str(BIN / words[0]), *words[1:], "--config", str(config)], {0}

        def one(i: int) -> Ended:
            return _short_service_run(argv, ready, env, directory / f"{words[0]}-{i}.log", up_s)
    else:
        words, codes = ONE_SHOTS[name]
        argv, allowed = [str(BIN / words[0]), *words[1:], "--config", str(config)], set(codes)

        def one(i: int) -> Ended:
            return _one_shot(argv, env)

    outcome, started, pids = Outcome(), time.monotonic(), set()
    with ThreadPoolExecutor(parallel) as pool:
        for pid, code, output in pool.map(one, range(count)):
            pids.add(str(pid))
            outcome.codes[code] += 1
            if code not in allowed and not outcome.first_bad:
                outcome.first_bad = f"exit {code}:\n{output}"
    outcome.seconds = time.monotonic() - started
    # the commands' own processes only: a helper process they start (core.coordinator_calls) leaves a marker too
    outcome.torn_down = len(pids & {marker.name for marker in markers.iterdir()})
    return outcome, set(allowed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, help="bootstrap of the source cluster")
    parser.add_argument("--target", required=True, help="bootstrap of the target cluster")
    parser.add_argument("--count", type=int, default=100, help="runs per command")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--only", action="append", help="a command name (default: every one)")
    args = parser.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory(prefix="teardown-") as tmp:
        directory = Path(tmp)
        config = write_config(directory, args.source, args.target)
        for name in args.only or [*ONE_SHOTS, *SERVICES]:
            outcome, allowed = run_many(name, config, directory, args.count, args.parallel)
            ok = set(outcome.codes) <= allowed and outcome.torn_down == args.count
            bad += not ok
            print(
                f"{name}: {args.count} runs in {outcome.seconds:.1f} s, exit codes {dict(outcome.codes)}, "
                f"signal deaths {outcome.signalled}, atexit ran in {outcome.torn_down}" + ("" if ok else "  BAD"),
                flush=True,
            )
            if outcome.first_bad:
                print(outcome.first_bad, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
