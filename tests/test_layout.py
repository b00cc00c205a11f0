"""mirror, canary and monitor depend on mirrorwatch.core only, never on each other."""

import ast
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
