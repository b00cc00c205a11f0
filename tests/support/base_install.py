"""A clean virtualenv with the base install only (`pip install mirrorwatch`, no extras), from a wheel of this tree.

Two layers, each built once and reused. The base dependencies (pyproject's ``dependencies``, at the versions this
interpreter has: its ``pip freeze`` is the constraints file, so pip takes them mostly from its cache) go into a
virtualenv under ``.cache/venvs/``, keyed by them and shared by checkouts, never changed once complete. The
wheel goes into a virtualenv of this checkout (``test-artifacts/base-install``) that sees the first one's packages
through a ``.pth`` file, keyed by a hash of the files the wheel is built from. A re-run with nothing changed costs
a hash; a change of code, a wheel build (~10 s); a fresh clone, the downloads (a few tens of seconds).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENVS = Path(os.environ.get("MIRRORWATCH_CACHE", ROOT / ".cache")) / "venvs"
INSTALL = ROOT / "test-artifacts" / "base-install"
WHEEL_INPUTS = ("pyproject.toml", "README.md", "LICENSE")
PIP_TIMEOUT_S = 900


def _digest(chunks: list[bytes]) -> str:
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(hashlib.sha256(chunk).digest())
    return h.hexdigest()[:16]


def _wheel_sources() -> list[Path]:
    package = [p for p in (ROOT / "mirrorwatch").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return sorted([ROOT / name for name in WHEEL_INPUTS] + package)


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_S,
    )
    if proc.returncode != 0:
        raise AssertionError(f"pip {' '.join(args[:3])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def _base_venv() -> Path:
    """The virtualenv with the base dependencies (not the project): made once per set of dependencies."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    freeze = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True, check=True
    ).stdout
    pins = "\n".join(line for line in freeze.splitlines() if "==" in line)
    key = _digest([sys.version.encode(), "\n".join(dependencies).encode(), pins.encode()])
    venv = VENVS / f"base-deps-{key}"
    if (venv / ".complete").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)  # a build that was interrupted
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    (venv / "constraints.txt").write_text(pins + "\n")
    (venv / "requirements.txt").write_text("\n".join(dependencies) + "\n")
    _pip(venv / "bin" / "python", "install", "--no-compile", "-r", str(venv / "requirements.txt"),
         "-c", str(venv / "constraints.txt"))  # fmt: skip
    (venv / ".complete").write_text(key)
    return venv


def _site_packages(venv: Path) -> Path:
    (path,) = (venv / "lib").glob("python3.*/site-packages")
    return path


def _install_wheel(deps: Path) -> Path:
    """This checkout's virtualenv with this tree's wheel (built from a copy: a build writes build/ and *.egg-info
    beside its sources), on top of ``deps``; remade when the wheel's files or the dependencies changed."""
    sources = _wheel_sources()
    key = _digest([deps.name.encode()] + [str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() for p in sources])
    stamp = INSTALL / ".wheel"
    if stamp.exists() and stamp.read_text() == key:
        return INSTALL
    shutil.rmtree(INSTALL, ignore_errors=True)
    INSTALL.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(INSTALL)], check=True, timeout=120)
    (_site_packages(INSTALL) / "_mirrorwatch_base_deps.pth").write_text(f"{_site_packages(deps)}\n")
    with tempfile.TemporaryDirectory(prefix="mirrorwatch-wheel-") as scratch:
        tree, out = Path(scratch) / "src", Path(scratch) / "dist"
        for path in sources:
            copy = tree / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
        _pip(Path(sys.executable), "wheel", "--no-deps", "-w", str(out), str(tree))
        (wheel,) = out.glob("mirrorwatch-*.whl")
        _pip(INSTALL / "bin" / "python", "install", "--no-deps", "--no-compile", str(wheel))
    stamp.write_text(key)
    return INSTALL


def base_install() -> Path:
    """The bin/ folder of a virtualenv that has mirrorwatch's wheel and its base dependencies, nothing else."""
    VENVS.mkdir(parents=True, exist_ok=True)
    with open(VENVS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two workers or two checkouts sharing .cache make the layer once
        deps = _base_venv()
    return _install_wheel(deps) / "bin"


def clean_env() -> dict[str, str]:
    """The environment for the base install's commands: without PYTHONPATH, which would put the source tree (and
    the shared virtualenv's code) before the installed wheel."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
