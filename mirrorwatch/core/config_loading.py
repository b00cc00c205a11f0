"""Loading the config: the YAML file (a key given twice is an error), ``${VAR}`` interpolation, the
``MIRRORWATCH__...`` environment overrides, then validation into :class:`~.config.Config` with every problem
as one :class:`~.config.ConfigError` line (see config.py for the rules)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .access import register_cluster
from .config import Config, ConfigError, _KeyedError
from .redact import MASK, is_secret_key, register_secret

ENV_PREFIX = "MIRRORWATCH__"


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(key, seen[key], line)
                seen[key] = line
            except TypeError:  # an unhashable key: let PyYAML report it
                continue
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key: object, first: int, second: int) -> None:
        super().__init__(f"key '{key}' appears twice (lines {first} and {second}); merge the two or remove one")
        self.line = second


def load_config(path: str | os.PathLike[str], environ: dict[str, str] | None = None) -> Config:
    environ = dict(os.environ if environ is None else environ)
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a binary file given by mistake: one line, not "internal error"
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.start}): give the mirrorwatch YAML config"
        ) from None
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except _DuplicateKey as exc:
        raise ConfigError(f"{path} line {exc.line}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"{path}{where}: invalid YAML: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping with 'clusters:' (and 'flows:', ...)")
    apply_env_overrides(raw, environ)
    raw = _interpolate(raw, environ, "")
    return config_from_dict(raw, origin=str(path))


def config_from_dict(raw: dict[str, Any], origin: str = "config") -> Config:
    try:
        config = Config.model_validate(raw)
    except _KeyedError as exc:  # raised from the model validator (pydantic re-raises non-ValueError only)
        raise ConfigError(f"config error in {origin}: {exc.key}: {exc.problem}") from None
    except ValidationError as exc:
        raise ConfigError(f"config error in {origin}: {_describe(exc)}") from None
    for alias, cluster in config.clusters.items():
        register_cluster(alias, cluster.properties)  # so an authentication failure can name the cluster
        for key, value in cluster.properties.items():
            if is_secret_key(key):
                register_secret(value)
    for flow in config.flows.values():
        if flow.mirror is not None and flow.mirror.connect is not None and flow.mirror.connect.password:
            register_secret(flow.mirror.connect.password)  # masked in every log line, like a SASL password
    return config


def _describe(exc: ValidationError) -> str:
    err = exc.errors()[0]
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, _KeyedError):
        return f"{ctx_error.key}: {ctx_error.problem}"
    loc = [str(p) for p in err["loc"] if p != "properties"]
    key = ".".join(loc) or "(top level)"
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{key}: unknown key"
    if kind == "missing":
        return f"{key}: required key is missing"
    message = err["msg"].removeprefix("Value error, ")
    if kind not in ("value_error", "assertion_error") and "input" in err:
        shown = MASK if is_secret_key(key) else repr(err["input"])
        if len(shown) > 60:
            shown = shown[:57] + "..."
        message = f"{message} (got {shown})"
    return f"{key}: {message}"


def _norm(segment: str) -> str:
    return re.sub(r"[._-]", "_", segment).lower()


def apply_env_overrides(raw: dict[str, Any], environ: dict[str, str]) -> None:
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        segments = [s for s in name[len(ENV_PREFIX) :].split("__") if s]
        if not segments:
            continue
        node: dict[str, Any] = raw
        for depth, segment in enumerate(segments):
            match = next((k for k in node if _norm(str(k)) == _norm(segment)), None)
            if match is None:
                is_client_property = depth >= 2 and _norm(segments[0]) == "clusters"
                match = segment.lower().replace("_", ".") if is_client_property else segment.lower()
            if depth == len(segments) - 1:
                value = yaml.safe_load(environ[name]) if environ[name] != "" else ""
                node[match] = value
            else:
                child = node.get(match)
                if not isinstance(child, dict):
                    child = node[match] = {}
                node = child


_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _interpolate(node: Any, environ: dict[str, str], key: str) -> Any:
    if isinstance(node, dict):
        return {k: _interpolate(v, environ, f"{key}.{k}" if key else str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolate(v, environ, f"{key}.{i}") for i, v in enumerate(node)]
    if isinstance(node, str) and "${" in node:

        def substitute(m: re.Match[str]) -> str:
            var, default = m.group(1), m.group(2)
            if var in environ:
                return environ[var]
            if default is not None:
                return default
            raise ConfigError(f"config error: {key}: environment variable {var} is not set")

        return _VAR_RE.sub(substitute, node)
    return node
