"""Roles kept apart, and commands that start at once (issue 36), checked on what is loaded, never on time.

The services import none of the `page` or `analytics` extras' libraries; a --help loads neither the config model
nor the client library; the lazily registered subcommands (core.cli.LazyGroup) list their own help; a command
whose extra is missing names it. bench/startup.py measures the times; tests/test_base_install.py runs the
commands in an environment without the extras.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from mirrorwatch.core import extras
from mirrorwatch.core.cli import LazyGroup

EXTRA_LIBRARIES = ("pyspark", "streamlit", "altair", "pandas")
SERVICES = (
    "mirrorwatch.mirror.cli",
    "mirrorwatch.mirror.engine",
    "mirrorwatch.canary.cli",
    "mirrorwatch.canary.service",
    "mirrorwatch.canary.check",
    "mirrorwatch.entrypoints",
    "mirrorwatch.monitor.commands",
    "mirrorwatch.monitor.service",
    "mirrorwatch.doctor.cli",
)


def loaded_after(code: str) -> set[str]:
    """The top-level packages in sys.modules after ``code`` runs in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_the_services_load_nothing_of_the_page_or_analytics_extras() -> None:
    loaded = loaded_after("\n".join(f"import {m}" for m in SERVICES))
    assert loaded.isdisjoint(EXTRA_LIBRARIES), loaded & set(EXTRA_LIBRARIES)


@pytest.mark.parametrize(
    "entry, argv",
    [
        ("mirrorwatch.canary.cli:main", ["check", "--help"]),
        ("mirrorwatch.entrypoints:monitor_main", ["lag", "--help"]),
        ("mirrorwatch.mirror.cli:main", ["--help"]),
        ("mirrorwatch.entrypoints:monitor_main", ["--help"]),
    ],
)
def test_help_loads_neither_the_config_model_nor_the_client_library_nor_numpy(entry: str, argv: list[str]) -> None:
    module, function = entry.split(":")
    code = (
        f"import sys\nfrom {module} import {function}\nsys.argv = ['x', *{argv!r}]\n"
        f"try:\n    {function}(sys.argv[1:])\nexcept SystemExit:\n    pass"
    )
    loaded = loaded_after(code)
    assert loaded.isdisjoint({"pydantic", "confluent_kafka", "numpy", "pyarrow", "rich", "yaml"}), loaded


def _lazy_groups() -> list[tuple[str, LazyGroup]]:
    import mirrorwatch.entrypoints  # noqa: F401  (registers `monitor dashboard`)
    from mirrorwatch.mirror.cli import cli as mirror
    from mirrorwatch.monitor.cli import cli as monitor

    assert isinstance(mirror, LazyGroup) and isinstance(monitor, LazyGroup)
    return [("mirror", mirror), ("monitor", monitor)]


@pytest.mark.parametrize("prog, group", _lazy_groups())
def test_each_lazy_subcommand_lists_the_help_of_the_command_it_loads(prog: str, group: LazyGroup) -> None:
    for name, (_path, summary) in group.lazy.items():
        command = group.load(name)
        assert command.name == name, (prog, name, command.name)
        own = command.short_help or command.help or ""
        assert own.startswith(summary), f"{prog} {name}: the listing says {summary!r}, the command {own!r}"


def test_a_missing_extra_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRA_MODULES, "page", ("streamlit", "no_such_module_mirrorwatch"))
    assert extras.missing_modules("page") == ["no_such_module_mirrorwatch"]
    line = extras.missing_extra_line("page", "monitor dashboard")
    assert line == (
        "monitor dashboard needs the 'page' extra (no_such_module_mirrorwatch not installed): "
        "pip install 'mirrorwatch[page]' (or run it in the mirrorwatch-page image)"
    )
    with pytest.raises(extras.MissingExtra) as caught:
        extras.require_extra("page", "monitor dashboard")
    assert str(caught.value) == line and caught.value.exit_code == 2


def test_an_extra_without_an_image_of_its_own_names_the_install_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRA_MODULES, "sasl-ssl", ("no_such_module_mirrorwatch",))
    assert extras.missing_extra_line("sasl-ssl", "a local cluster with a SASL_SSL listener") == (
        "a local cluster with a SASL_SSL listener needs the 'sasl-ssl' extra (no_such_module_mirrorwatch not "
        "installed): pip install 'mirrorwatch[sasl-ssl]'"
    )


def test_every_extra_is_installed_here_so_nothing_is_reported() -> None:
    assert [e for e in extras.EXTRA_MODULES if extras.missing_extra_line(e, "x") is not None] == []


def test_a_command_of_a_lazy_group_that_does_not_exist_is_a_usage_error() -> None:
    group = LazyGroup(name="g", lazy={"a": ("mirrorwatch.mirror.topology:topology", "x")})
    with pytest.raises(click.UsageError):
        group.main(["nope"], standalone_mode=False)


def test_the_base_install_depends_on_none_of_the_extras_libraries_and_each_extra_is_declared() -> None:
    import re
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    base = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert base.isdisjoint({"pyspark", "streamlit", "altair", "pandas", "grafana-foundation-sdk", "cryptography"}), base
    optional = project["optional-dependencies"]
    declared = {
        e: {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in optional[e]} for e in extras.EXTRA_MODULES
    }
    assert declared == {
        "page": {"streamlit", "altair", "pandas"},
        "analytics": {"pyspark"},
        "grafana": {"grafana-foundation-sdk"},
        "sasl-ssl": {"cryptography"},
    }
    assert optional["all"] == [f"mirrorwatch[{','.join(extras.EXTRA_MODULES)}]"]
