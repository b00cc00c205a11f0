"""The status page as Streamlit's AppTest runs it: its file, and everything it wrote as text
(tests/test_dashboard_app.py, tests/test_mm2_connect_state.py)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGE = Path(__file__).resolve().parents[2] / "mirrorwatch" / "dashboards" / "app.py"


def texts(at: AppTest) -> str:
    """Everything the page wrote as text (markdown, captions, banners, metrics), one string."""
    parts = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "subheader"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label}={m.value}" for m in at.metric]
    return "\n".join(parts)
