"""The suite's own xdist scheduling (tests/conftest.py): a module, or a group of modules sharing a costly session
fixture, runs whole on one worker. pytest 9.2 silently broke xdist's `xdist_group` grouping
(pytest-dev/pytest-xdist#1386), which cost minutes of CI time before anyone noticed: this keeps it noticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import group_of

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "nodeid, group",
    [
        ("tests/test_mm2.py::test_sigkill_mm2_then_restart", "test_mm2"),
        ("tests/test_analytics_job.py::test_slo_compliance_equals_the_known_value", "spark"),
        ("tests/test_analytics_cluster.py::test_spark_submit_on_the_standalone_cluster_equals_local", "spark"),
        ("tests/test_security.py::test_x[a::b]", "sasl"),
        ("tests/test_doctor.py::test_y", "sasl"),
        ("tests/test_config.py::test_bad_file_gives_one_exact_line_and_exit_2[bad0]", "test_config"),
    ],
)
def test_group_of(nodeid, group):
    assert group_of(nodeid) == group


def test_each_group_runs_on_one_worker(tmp_path):
    # a plugin that records which worker ran which test, on three pure modules (two of them one group)
    (tmp_path / "record_worker.py").write_text(
        "import os\n"
        "def pytest_runtest_setup(item):\n"
        f"    with open({str(tmp_path / 'ran.txt')!r}, 'a') as f:\n"
        "        f.write(os.environ['PYTEST_XDIST_WORKER'] + ' ' + item.nodeid.split('::')[0] + '\\n')\n"
    )
    modules = ["tests/test_config.py", "tests/test_mm2_units.py", "tests/test_analytics_generator.py"]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "record_worker",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-q",
            *modules,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    workers_of: dict[str, set[str]] = {}
    for line in (tmp_path / "ran.txt").read_text().splitlines():
        worker, module = line.split()
        workers_of.setdefault(module, set()).add(worker)
    assert set(workers_of) == set(modules)
    assert all(len(workers) == 1 for workers in workers_of.values()), workers_of
