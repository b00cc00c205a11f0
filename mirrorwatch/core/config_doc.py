"""Renders docs/config.md from the config models, so the reference cannot drift from the code.

Run: python -m mirrorwatch.core.config_doc > docs/config.md (a test checks the file is current).
"""

from __future__ import annotations

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from . import config as c

SECTIONS = [
    ("flows.<name>", c.FlowConfig),
    ("flows.<name>.mirror (MirrorMaker 2, docs/mirrormaker2.md)", c.MirrorMaker2Settings),
    ("mirror", c.MirrorSettings),
    ("canary", c.CanarySettings),
    ("monitor", c.MonitorSettings),
    ("monitor.analytics", c.AnalyticsSchedule),
    ("leader (docs/ha.md)", c.LeaderSettings),
]


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    return f"`{value!r}`" if not isinstance(value, BaseModel) else "see below"


def render() -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated from `mirrorwatch/core/config.py` by `python -m mirrorwatch.core.config_doc`. One YAML file;",
        "environment overrides `MIRRORWATCH__<SECTION>__<KEY>=value` and `${VAR}` values are described in the",
        "module's docstring and the README. Unknown keys are errors.",
        "",
        "Watching MirrorMaker 2? `mirrorwatch config from-strimzi FILE` and `mirrorwatch config from-mm2 FILE` write",
        'this file from a Strimzi KafkaMirrorMaker2 resource or an mm2.properties (docs/mirrormaker2.md, "Writing the',
        'config from what you have").',
        "",
        "## clusters.<alias>",
        "",
        "Any librdkafka client property (`bootstrap.servers` required; SASL/SSL properties pass through).",
        "Keys matching password/secret/token/credential are masked in every repr, log line and error.",
        "",
    ]
    extra = getattr(c, "DashboardSettings", None)
    sections = SECTIONS + ([("dashboard", extra)] if extra is not None else [])
    for name, model in sections:
        out += [f"## {name}", "", "| key | default | meaning |", "|---|---|---|"]
        for key, field in model.model_fields.items():
            meaning = (field.description or "").replace("|", "\\|")
            out.append(f"| `{key}` | {_default(field)} | {meaning} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render())
