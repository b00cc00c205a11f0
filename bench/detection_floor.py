"""The floor of a page's time to detect, from the shipped files (pure: the files' contents in, seconds out).

A fault can page no sooner than: the rule's ``for:`` + one scrape interval (the first sample that shows it) + one
evaluation interval (the first evaluation that sees it) + the monitor's and the canary's intervals (the services
that measure it sample that often) + Alertmanager's ``group_wait`` on the route the alert takes. bench/detection.py
prints each measured time beside this sum. Conditions inside an expression (e.g. heartbeats over 30 s old) are
not in it: they are the rule's design, and the bench's notes name them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.prometheus_server import duration_s

# Alertmanager's defaults for a route that sets nothing (and whose parents set nothing)
AM_DEFAULTS = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}


def _matcher(text: str) -> tuple[str, str, str]:
    m = re.fullmatch(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*', text)
    if not m:
        raise ValueError(f"not a matcher: {text!r}")
    return m[1], m[2], m[3]


def matches(matchers: list[str], labels: dict[str, str]) -> bool:
    """Alertmanager's ``matchers`` (label op value; ``=``, ``!=``, ``=~``, ``!~``, regexes anchored) on labels."""
    for text in matchers:
        name, op, value = _matcher(text)
        have = labels.get(name, "")
        hit = {
            "=": have == value,
            "!=": have != value,
            "=~": re.fullmatch(value, have) is not None,
            "!~": re.fullmatch(value, have) is None,
        }[op]
        if not hit:
            return False
    return True


def _route_matchers(route: dict) -> list[str]:
    found = list(route.get("matchers", []) or [])
    found += [f'{k}="{v}"' for k, v in (route.get("match", {}) or {}).items()]
    found += [f'{k}=~"{v}"' for k, v in (route.get("match_re", {}) or {}).items()]
    return found


def route_for(config: dict, labels: dict[str, str]) -> dict:
    """The settings of the route an alert with ``labels`` takes (the first matching child, depth first, as
    Alertmanager does without ``continue``), its timings and receiver inherited from the parents."""
    top = config.get("route", {})
    settings = {**AM_DEFAULTS, "receiver": top.get("receiver")}
    settings.update({k: top[k] for k in (*AM_DEFAULTS, "group_by") if k in top})
    route = top
    while True:
        child = next((c for c in route.get("routes", []) or [] if matches(_route_matchers(c), labels)), None)
        if child is None:
            return settings
        settings.update({k: child[k] for k in (*AM_DEFAULTS, "receiver", "group_by") if k in child})
        route = child


@dataclass(frozen=True)
class Floor:
    rule_for_s: float
    scrape_s: float
    evaluation_s: float
    monitor_s: float
    canary_s: float
    group_wait_s: float

    @property
    def total_s(self) -> float:
        return self.rule_for_s + self.scrape_s + self.evaluation_s + self.monitor_s + self.canary_s + self.group_wait_s

    def formula(self) -> str:
        return (
            f"for {self.rule_for_s:g} + scrape {self.scrape_s:g} + eval {self.evaluation_s:g} + monitor "
            f"{self.monitor_s:g} + canary {self.canary_s:g} + group_wait {self.group_wait_s:g} = {self.total_s:g} s"
        )


def floor_of(alert: str, rules: dict, prometheus: dict, alertmanager: dict, monitor_s: float, canary_s: float) -> Floor:
    """The floor of ``alert``'s page from the rule file, the Prometheus config (its ``global``), the Alertmanager
    config and the services' intervals."""
    rule = next(
        (r for g in rules.get("groups", []) for r in g.get("rules", []) if r.get("alert") == alert),
        None,
    )
    if rule is None:
        raise ValueError(f"no alert {alert} in the rule file")
    glob = prometheus.get("global", {})
    scrape = duration_s(glob.get("scrape_interval", "1m"))
    evaluation = duration_s(glob.get("evaluation_interval", "1m"))
    route = route_for(alertmanager, {"alertname": alert, **(rule.get("labels") or {})})
    return Floor(
        duration_s(rule.get("for", "0s")), scrape, evaluation, monitor_s, canary_s, duration_s(route["group_wait"])
    )
