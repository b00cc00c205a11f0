"""Resolving Kafka's jars from Maven Central into the cache, once."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

KAFKA_VERSION = "4.4.0"
# connect-mirror is published later than the broker; 4.4.0 is not on Maven Central yet (see maven/mm2/pom.xml)
MM2_VERSION = os.environ.get("MIRRORWATCH_MM2_VERSION", "4.3.1")
_MAVEN_DIR = Path(__file__).with_name("maven")
KINDS = ("broker", "mm2", "tools")


class LauncherError(Exception):
    """A local cluster could not be set up or started; the message is one line the user can act on."""


def project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    root = os.environ.get("MIRRORWATCH_CACHE")
    path = Path(root) if root else project_root() / ".cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def require_tool(name: str, hint: str) -> str:
    found = shutil.which(name)
    if not found:
        raise LauncherError(f"'{name}' was not found on PATH: {hint}")
    return found


def ensure_jars(kind: str = "broker", quiet: bool = True) -> Path:
    """The folder holding the jars for ``kind`` ('broker' or 'mm2'), resolving them on first use."""
    if kind not in KINDS:
        raise ValueError(f"unknown jar set {kind!r}")
    version = MM2_VERSION if kind == "mm2" else KAFKA_VERSION
    target = cache_dir() / f"kafka-{version}" / kind
    stamp = target / ".complete"
    if stamp.exists():
        return target
    require_tool("java", "install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)")
    mvn = require_tool("mvn", "install Maven (Debian: apt-get install maven), or run the README's set-up command")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{kind}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # tests, helpers and the demo may resolve at the same time
        if stamp.exists():
            return target
        partial = target.with_name(kind + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            "-q" if quiet else "-ntp",
            "-f",
            str(_MAVEN_DIR / kind / "pom.xml"),
            f"-Dmaven.repo.local={cache_dir() / 'm2'}",
            f"-Dmm2.version={MM2_VERSION}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={partial}",
            "-DincludeScope=runtime",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = [
                l
                for l in (proc.stdout + proc.stderr).splitlines()
                if "[ERROR]" in l and l.replace("[ERROR]", "").strip()
            ]
            tail = (lines[0].split("[ERROR]", 1)[1].strip() if lines else "mvn exited with " + str(proc.returncode))[
                :400
            ]
            raise LauncherError(f"resolving Kafka {version} {kind} jars from Maven Central failed: {tail}")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        stamp.touch()
    return target
