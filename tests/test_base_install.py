"""The base install (`pip install mirrorwatch`, no extras) runs every base command, against the real clusters.

A clean virtualenv with the wheel of this tree and its base dependencies only (tests/support/base_install.py: built
once, reused while nothing changes). In it: every command's --help; `mirror run` mirrors, `canary check` answers OK
and `monitor lag` reads the flow, on the local clusters; the services import no module of the extras (which are
not even installed there); `monitor dashboard` and `monitor analyze` name the extra to install, exit 2.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.helpers import create_topic, produce_numbered

from .conftest import TestCluster
from .support.base_install import base_install, clean_env
from .support.canary_checks import canary_config

pytestmark = pytest.mark.timeout(900)  # a fresh clone downloads the base dependencies first

EXTRA_LIBRARIES = ("pyspark", "streamlit", "altair", "pandas", "grafana_foundation_sdk")
SERVICES = ("mirrorwatch.mirror.engine", "mirrorwatch.canary.service", "mirrorwatch.monitor.service")
# Inside the base install: every command of the tree (the lazy subcommands included) asked for its --help through its
# program's own entry point, in one interpreter (a process per command cost ~50 s on a loaded 2-core machine; each
# program's console script runs once on its own, below). Prints the failures as JSON.
EVERY_HELP = """
import contextlib, faulthandler, io, json, click
faulthandler.enable()  # as each entry point does, once, while stderr is still a file
from mirrorwatch.canary.cli import cli as canary, main as canary_main
from mirrorwatch.doctor.cli import cli as mirrorwatch, main as mirrorwatch_main
from mirrorwatch.entrypoints import monitor_cli as monitor, monitor_main
from mirrorwatch.localkafka.cli import cli as kafka, main as kafka_main
from mirrorwatch.mirror.cli import cli as mirror, main as mirror_main

def walk(command, path):
    yield path
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            yield from walk(command.get_command(ctx, name), [*path, name])

roots = {"canary": (canary, canary_main), "mirrorwatch": (mirrorwatch, mirrorwatch_main), "monitor": (monitor, monitor_main),
         "mirrorwatch-kafka": (kafka, kafka_main), "mirror": (mirror, mirror_main)}
answered, failed = [], []
for prog, (cli, main) in roots.items():
    for path in walk(cli, []):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([*path, "--help"])
                code = None
            except SystemExit as exc:
                code = exc.code
        (answered if code in (0, None) and out.getvalue().startswith("Usage: ") and not err.getvalue() else failed).append(
            [prog, *path, code, err.getvalue()[-300:]])
print(json.dumps({"answered": [a[:-2] for a in answered], "failed": failed}))
"""
PROGRAMS = ("mirror", "canary", "monitor", "mirrorwatch", "mirrorwatch-kafka")


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return base_install()


def run(bin_dir: Path, *argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=clean_env()
    )


def test_the_base_install_is_the_wheel_without_the_extras(bin_dir: Path, tmp_path: Path) -> None:
    code = (
        "import importlib.util, json, sys, mirrorwatch\n"
        f"import {', '.join(SERVICES)}\n"
        "print(json.dumps({'file': mirrorwatch.__file__,"
        f" 'installed': [m for m in {EXTRA_LIBRARIES!r} if importlib.util.find_spec(m)],"
        " 'loaded': sorted({m.split('.')[0] for m in sys.modules})}))"
    )
    out = run(bin_dir, "python", "-c", code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert "/site-packages/mirrorwatch/" in found["file"], found["file"]  # the wheel, not the source tree
    assert found["installed"] == []
    assert set(found["loaded"]).isdisjoint(EXTRA_LIBRARIES)


def test_every_base_command_answers_its_help(bin_dir: Path, tmp_path: Path) -> None:
    for program in PROGRAMS:  # the console scripts themselves
        out = run(bin_dir, program, "--help", cwd=tmp_path)
        assert out.returncode == 0 and out.stdout.startswith("Usage: ") and out.stderr == "", (program, out.stderr)
    every = run(bin_dir, "python", "-c", EVERY_HELP, cwd=tmp_path)
    assert every.returncode == 0, every.stderr
    found = json.loads(every.stdout.splitlines()[-1])
    assert found["failed"] == []
    answered = found["answered"]
    assert ["mirror", "failover", "reset-to-time"] in answered and ["monitor", "dashboard"] in answered, answered
    print(f"{len(answered)} commands answered --help")


@pytest.mark.parametrize(
    "argv, extra",
    [
        (["monitor", "dashboard", "--config", "mirrorwatch.yaml"], "page"),
        (["monitor", "analyze", "--history", "history", "--out", "analytics"], "analytics"),
    ],
)
def test_a_command_of_an_extra_names_it(bin_dir: Path, tmp_path: Path, argv: list[str], extra: str) -> None:
    out = run(bin_dir, *argv, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout)
    assert out.stderr == (
        f"monitor: monitor {argv[1]} needs the '{extra}' extra ({', '.join(_modules(extra))} not installed): "
        f"pip install 'mirrorwatch[{extra}]' (or run it in the mirrorwatch-{extra} image)\n"
    )


def _modules(extra: str) -> tuple[str, ...]:
    from mirrorwatch.core.extras import EXTRA_MODULES

    return EXTRA_MODULES[extra]


def test_mirror_canary_check_and_monitor_lag_run_on_the_local_clusters(
    bin_dir: Path, source: TestCluster, target: TestCluster, tmp_path: Path
) -> None:
    topic = f"t-base-{int(time.time() * 1000)}"
    cfg: dict[str, Any] = {
        "clusters": {"east": {"bootstrap.servers": source.bootstrap}, "west": {"bootstrap.servers": target.bootstrap}},
        "flows": {"east-west": {"source": "east", "target": "west"}},
    }
    cfg = canary_config(cfg, topic)
    cfg["flows"]["east-west"]["topics"] = [topic]
    create_topic(source.bootstrap, topic, partitions=2)
    produce_numbered(source.bootstrap, topic, 20, 2)
    config = tmp_path / "mirrorwatch.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    log = tmp_path / "mirror.log"
    with open(log, "wb") as out:
        mirror = subprocess.Popen(
            [str(bin_dir / "mirror"), "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env=clean_env(),
        )
    try:
        deadline = time.monotonic() + 120  # the mirror needs a moment to find the new canary topic
        while True:
            check = run(bin_dir, "canary", "check", "--config", str(config), "--json", cwd=tmp_path)
            if check.returncode == 0:
                break
            assert mirror.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"no OK within 120 s: {check.returncode} {check.stdout} {check.stderr}"
            time.sleep(1)
        assert json.loads(check.stdout)["status"] == "OK"
        lag = run(bin_dir, "monitor", "lag", "--config", str(config), "--json", "--samples", "2", cwd=tmp_path)
        assert lag.returncode == 0, lag.stdout[-2000:] + lag.stderr[-2000:]
        (flow,) = json.loads(lag.stdout)["flows"]
        assert flow["flow"] == "east-west", flow
        mirror.terminate()
        assert mirror.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if mirror.poll() is None:
            mirror.kill()
            mirror.wait(30)
    assert "Traceback" not in log.read_text()
