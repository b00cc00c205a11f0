"""The layout rules: mirror, canary and monitor depend on mirrorwatch.core only, never on each other; no module
imports another that imports it back; every module imports on its own. Beside the package: bench/ never imports
the suite, no test module imports another, and the harness both use is neither imported by mirrorwatch nor
shipped in its wheel."""

import ast
import json
import os
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "mirrorwatch"
INDEPENDENT = ["mirror", "canary", "monitor", "dashboards", "doctor"]


def imported_packages(path: Path) -> set[str]:
    out = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level >= 2 and node.module:  # from ..X import
                out.add(node.module.split(".")[0])
            elif node.level == 0 and node.module and node.module.startswith("mirrorwatch."):
                out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("mirrorwatch."):
                    out.add(alias.name.split(".")[1])
    return out


@pytest.mark.parametrize("package", INDEPENDENT)
def test_depends_on_core_only(package):
    for path in (ROOT / package).rglob("*.py"):
        others = imported_packages(path) & (set(INDEPENDENT) - {package})
        assert not others, f"{path.relative_to(ROOT)} imports {sorted(others)}"


# --- import cycles ------------------------------------------------------------------------------------------------
# The module-level import graph of every mirrorwatch module. Only imports that run when the module is imported
# count: an import inside a function (the accepted way to defer one) or under ``if TYPE_CHECKING:`` does not.
# ``from X import a, b`` is an edge to X's submodules a and b when they are modules, and to X itself when it also
# takes names from it (a package's __init__ that imports a submodule which takes a name back from the package is
# a real cycle; one taking only sibling modules is not).


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_time_imports(node: ast.AST):
    """The import statements that run when the module runs: not in function bodies, not under TYPE_CHECKING."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.orelse:
                yield from import_time_imports(ast.Module(body=[stmt], type_ignores=[]))
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        else:
            yield from import_time_imports(child)


def imported_modules(name: str, path: Path) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in import_time_imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names if alias.name in MODULES}
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if source not in MODULES:
            continue
        submodules = {f"{source}.{alias.name}" for alias in node.names} & MODULES.keys()
        out |= submodules
        if len(submodules) < len(node.names):
            out.add(source)
    return out - {name}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a → b → a) per back edge of a depth-first walk; no cycles, an empty list."""
    cycles, done, stack = [], set(), []

    def visit(node: str) -> None:
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt in stack:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in done:
                visit(nxt)
        stack.pop()
        done.add(node)

    for node in sorted(graph):
        if node not in done:
            visit(node)
    return cycles


def test_import_cycles_are_found():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert import_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_what_runs_at_import():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nimport x\nif TYPE_CHECKING:\n    import y\nelse:\n    import z\n"
        "try:\n    import w\nexcept ImportError:\n    pass\ndef f():\n    import v\nclass C:\n    import u\n"
    )
    names = [alias.name for node in import_time_imports(tree) for alias in node.names]
    assert names == ["TYPE_CHECKING", "x", "z", "w", "u"]


def test_no_import_cycles():
    graph = {name: imported_modules(name, path) for name, path in MODULES.items()}
    assert graph["mirrorwatch.grafana_build.build"] >= {"mirrorwatch.grafana_build.dashboard"}  # the graph is real
    cycles = [" → ".join(cycle) for cycle in import_cycles(graph)]
    assert not cycles, "import cycles (move what both sides need into a third module):\n" + "\n".join(cycles)


# --- every module imports on its own ------------------------------------------------------------------------------
# One child process per module, forked from a parent interpreter that has imported the third-party libraries
# mirrorwatch uses but nothing of mirrorwatch: each child starts with no mirrorwatch module loaded, as
# ``python -c "import mirrorwatch.x"`` would, without paying pydantic's, Streamlit's and pandas' import time
# 130 times (a fresh interpreter per module took 150 s on the 2-core machine).
NOT_IMPORTED = {
    # ``python -m`` entry points: importing one runs the program (here: rewrites grafana/).
    name: "runs the program"
    for name in MODULES
    if name.endswith(".__main__")
}

FORKING_PARENT = r"""
import importlib, json, os, sys

preload, modules = json.loads(sys.stdin.read())
for lib in preload:
    try:
        importlib.import_module(lib)
    except Exception:
        pass  # the module that needs it says so below
assert not [m for m in sys.modules if m.split(".")[0] == "mirrorwatch"]
failures = {}
running = {}


def reap():
    pid, status = os.wait()
    name, fd = running.pop(pid)
    with os.fdopen(fd) as errors:
        text = errors.read()
    if status:
        failures[name] = text or f"exit status {status}"


for name in modules:
    if len(running) >= 2:
        reap()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            importlib.import_module(name)
            code = 0
        except BaseException as exc:
            os.write(write_fd, f"{type(exc).__name__}: {exc}"[:2000].encode())
            code = 1
        os._exit(code)
    os.close(write_fd)
    running[pid] = (name, read_fd)
while running:
    reap()
print(json.dumps(failures))
"""


def third_party_imports() -> list[str]:
    names = set()
    for path in MODULES.values():
        for node in import_time_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif node.level == 0 and node.module:
                names.add(node.module)
    return sorted(name for name in names if name.split(".")[0] != "mirrorwatch")


def test_every_module_imports_on_its_own():
    modules = sorted(set(MODULES) - set(NOT_IMPORTED))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRRORWATCH")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT.parent), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", FORKING_PARENT],
        input=json.dumps([third_party_imports(), modules]),
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT.parent,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failures, "modules that fail to import on their own:\n" + "\n".join(
        f"{name}: {error}" for name, error in sorted(failures.items())
    )


def test_no_command_skips_the_interpreter_teardown():
    """No os._exit: every command ends by a normal teardown (atexit handlers run), with its clients closed in a
    defined order first (core/client_set.py; docs/design.md, "Teardown"). Found by reading the code, so a call
    hidden behind an alias (``from os import _exit``) is found too."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            named = (isinstance(node, ast.Attribute) and node.attr == "_exit") or (
                isinstance(node, ast.alias) and node.name == "_exit"
            )
            if named:
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not found, f"os._exit in {found}"


# --- the suite, the benches and the harness they share ---------------------------------------------------------
# Every import counts here, the ones inside functions too: a bench that imports the suite only when it runs is
# still broken by a change to a test module.
REPO = ROOT.parent


def absolute_imports(path: Path, root: Path = REPO) -> set[str]:
    """The dotted names a file imports, relative imports resolved against its package (its folder under root)."""
    package = path.relative_to(root).parent.parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            out |= {source} | {f"{source}.{alias.name}" for alias in node.names}
    return out


def imports_of(paths, wanted) -> list[str]:
    return [
        f"{path.relative_to(REPO)} imports {name}"
        for path in sorted(paths)
        for name in sorted(absolute_imports(path))
        if wanted(name)
    ]


def is_test_module(name: str) -> bool:
    """A module pytest collects tests from (conftest.py is the suite's set-up, which its own tests read)."""
    return name.startswith("tests.test_")


def test_imports_are_resolved_against_the_files_package(tmp_path):
    folder = tmp_path / "tests" / "support"
    folder.mkdir(parents=True)
    (folder / "x.py").write_text("from ..test_a import f\nfrom .y import g\ndef h():\n    import harness.webhooks\n")
    names = absolute_imports(folder / "x.py", tmp_path)
    assert names == {"tests.test_a", "tests.test_a.f", "tests.support.y", "tests.support.y.g", "harness.webhooks"}
    assert is_test_module("tests.test_a") and not is_test_module("tests.support.y")
    assert not is_test_module("tests.conftest")


def test_bench_never_imports_the_suite():
    found = imports_of((REPO / "bench").rglob("*.py"), lambda name: name.split(".")[0] == "tests")
    assert not found, "bench/ imports the test suite (move what both need into harness/):\n" + "\n".join(found)


def test_no_test_module_imports_another():
    found = imports_of((REPO / "tests").rglob("*.py"), is_test_module)
    assert not found, "test modules import other test modules (move the helper to tests/support/):\n" + "\n".join(found)


def test_the_package_never_imports_the_harness_the_suite_or_the_benches():
    found = imports_of(ROOT.rglob("*.py"), lambda name: name.split(".")[0] in ("harness", "tests", "bench"))
    assert not found, "\n".join(found)


def test_the_wheel_holds_the_package_only():
    """The wheel's packages are the ones pyproject's find patterns match: mirrorwatch, never harness, tests, bench."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert any(fnmatch("mirrorwatch.core", pattern) for pattern in patterns)
    shipped = [name for name in ("harness", "tests", "bench") for pattern in patterns if fnmatch(name, pattern)]
    assert not shipped, f"the wheel would ship {shipped}"
