"""The page file ``streamlit run`` executes:

    streamlit run mirrorwatch/dashboards/app.py -- --config mirrorwatch.yaml

(or ``MIRRORWATCH_CONFIG=mirrorwatch.yaml streamlit run …``; ``monitor dashboard --config FILE`` does this for you).
Absolute imports: Streamlit runs this file as a script, not as part of the package.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from mirrorwatch.core.config import ConfigError
from mirrorwatch.core.redact import redact_text
from mirrorwatch.dashboards.live import poll
from mirrorwatch.dashboards.settings import CONFIG_ENV, PageSettings, settings_from_path
from mirrorwatch.dashboards.views_history import history
from mirrorwatch.dashboards.views_live import flow_detail, legend, overview

log = logging.getLogger("mirrorwatch.dashboards")
VIEWS = ("Overview", "Flow detail", "History")
REFRESH_CHOICES = (0, 2, 5, 10, 30, 60)  # seconds; 0 = off


def config_path() -> str | None:
    args = sys.argv[1:]
    if "--config" in args and args.index("--config") + 1 < len(args):
        return args[args.index("--config") + 1]
    return os.environ.get(CONFIG_ENV)


def load_settings() -> PageSettings:
    path = config_path()
    if not path:
        st.error(
            "No config given: start the page with `monitor dashboard --config FILE` or "
            "`streamlit run mirrorwatch/dashboards/app.py -- --config FILE`."
        )
        st.stop()
    try:
        return settings_from_path(path)
    except ConfigError as exc:  # one line naming the key, never a traceback
        st.error(f"Config problem: {exc}")
        st.stop()


def sidebar(settings: PageSettings) -> tuple[str, int, str | None]:
    with st.sidebar:
        view = st.radio("View", VIEWS, key="view")
        choices = sorted(set(REFRESH_CHOICES) | {int(settings.refresh_s)})
        refresh = st.selectbox(
            "Auto-refresh",
            choices,
            index=choices.index(int(settings.refresh_s)),
            key="refresh",
            format_func=lambda s: "off" if s == 0 else f"every {s} s",
        )
        names = [f.name for f in settings.flows]
        flow = st.selectbox("Flow", names, key="flow") if names else None
        st.caption(
            f"Monitor API: `{settings.monitor_url}`  \nCanary metrics: `{settings.canary_url or 'none'}`  \n"
            f"Analytics: `{settings.analytics_dir}`"
        )
        st.caption(legend())
    return view, refresh, flow


def main() -> None:
    st.set_page_config(page_title="mirrorwatch status", layout="wide")
    settings = load_settings()
    view, refresh, flow = sidebar(settings)
    st.title("mirrorwatch — mirror status")

    def live() -> None:
        with guarded("the live view"):
            result = poll(settings, only_flow=None if view == "Overview" else flow)
            if view == "Overview":
                overview(settings, result)
            else:
                flow_detail(settings, result, flow)
            st.caption(
                f"Polled {result.polled_at:%Y-%m-%d %H:%M:%S} UTC"
                + (f" · refreshing every {refresh} s" if refresh else " · auto-refresh off")
            )

    if view == "History":
        with guarded("the history view"):
            history(settings)
    else:
        # a fragment re-runs alone on its timer: the sidebar and the rest of the page stay put
        st.fragment(live, run_every=refresh or None)()


@contextmanager
def guarded(what: str) -> Iterator[None]:
    """A bug or an answer this page did not expect: one line on the page, the traceback in the server log only.
    (Streamlit's stop/rerun signals are BaseExceptions and pass through.)"""
    try:
        yield
    except Exception as exc:
        log.exception("dashboard: %s failed", what)
        st.error(
            f"Could not draw {what}: {type(exc).__name__}: {redact_text(str(exc))[:200]} "
            "(details in the dashboard's log; the page retries on the next refresh)."
        )


# Streamlit runs this file as the module ``__main__`` (``streamlit run`` and AppTest alike); importing it, as a
# tool or the layout test does, defines the page without drawing it.
if __name__ == "__main__":
    main()
