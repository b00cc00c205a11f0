"""The optional extras by role (pyproject.toml), and the one line a command gives when its extra is missing.

The base install runs the mirror, the canary, the monitor and the one-shot commands. The status page
(``page``), the Spark job (``analytics``), the Grafana builder (``grafana``) and a local cluster's SASL_SSL listener
(``sasl-ssl``) each need an extra; a command that
needs one checks for it before anything imports it, so a missing extra is one line and exit 2, never an
ImportError's traceback. The check only looks the modules up (``find_spec``): it imports none of them.
"""

from __future__ import annotations

from importlib.util import find_spec

# extra -> the top-level modules it brings that the code imports (pyproject.toml's [project.optional-dependencies])
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "page": ("streamlit", "altair", "pandas"),
    "analytics": ("pyspark",),
    "grafana": ("grafana_foundation_sdk",),
    "sasl-ssl": ("cryptography",),
}
ROLE_IMAGES = ("page", "analytics")  # the extras that have an image of their own (Containerfile)
MISSING_EXTRA_EXIT = 2  # docs/errors.md


class MissingExtra(Exception):
    """A command needs an extra that is not installed; ``str()`` is the line to show."""

    exit_code = MISSING_EXTRA_EXIT


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be found in this environment (empty: it is installed)."""
    return [name for name in EXTRA_MODULES[extra] if find_spec(name) is None]


def missing_extra_line(extra: str, what: str) -> str | None:
    """The line that says what to install, or None when ``extra`` is installed."""
    missing = missing_modules(extra)
    if not missing:
        return None
    if extra == "grafana":  # a development tool: it rewrites files of a source checkout
        how = f"pip install -e '.[{extra}]' in the source checkout"
    elif extra in ROLE_IMAGES:
        how = f"pip install 'mirrorwatch[{extra}]' (or run it in the mirrorwatch-{extra} image)"
    else:
        how = f"pip install 'mirrorwatch[{extra}]'"
    return f"{what} needs the '{extra}' extra ({', '.join(missing)} not installed): {how}"


def require_extra(extra: str, what: str) -> None:
    """Raise MissingExtra (one line, exit 2) unless ``extra`` is installed."""
    line = missing_extra_line(extra, what)
    if line is not None:
        raise MissingExtra(line)
