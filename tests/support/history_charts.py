"""The History view's charts as the browser drew them (test_dashboard_live.py): geometry and label text read
from the SVG, so the checks hold whatever the machine's load."""

from __future__ import annotations

import re
from datetime import UTC, datetime

FLOW = "east-west"  # the live stack's one flow

# Per rendered Vega chart (SVG: the history charts ask for it): its size, and per axis and legend the text and
# bounding box of each visible label (labelOverlap hides a label with opacity 0) and of the title.
CHART_GEOMETRY = """() => [...document.querySelectorAll('.vega-embed')].map(embed => {
    const svg = embed.querySelector('svg.marks');
    if (!svg) return null;
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const shown = e => Number(getComputedStyle(e).opacity) > 0 && e.getAttribute('opacity') !== '0';
    const part = (g, role) => [...g.querySelectorAll(`.role-${role} text`)].filter(shown)
        .map(t => ({text: t.textContent, box: box(t)}));
    return {
        svg: box(svg),
        axes: [...svg.querySelectorAll('.role-axis')].map(g => ({
            aria: g.getAttribute('aria-label') || '', labels: part(g, 'axis-label'), title: part(g, 'axis-title')})),
        legends: [...svg.querySelectorAll('.role-legend')].map(g => ({labels: part(g, 'legend-label')})),
    };
}).filter(Boolean)"""


def overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def check_history_charts(page, stack, frozen_at: float, body: str) -> None:
    """The History view's charts as drawn: the timeline of the freeze in 24-hour UTC, one row per partition of
    both topics with no labels over each other, a colour scale from 0, the compliance chart tall enough for its
    topics with its title inside the drawing. Geometry, not speed: nothing here depends on the machine's load."""
    charts = page.evaluate(CHART_GEOMETRY)

    def chart_with(title: str) -> dict:
        found = [c for c in charts if any(t["text"] == title for a in c["axes"] for t in a["title"])]
        assert found, f"no chart with an axis titled {title!r}: {charts}"
        return found[0]

    def axis(chart: dict, which: str) -> dict:
        return next(a for a in chart["axes"] if a["aria"].startswith(which) and a["labels"])  # not the grid

    def inside(box, outer) -> bool:
        return box[0] >= outer[0] - 1 and box[1] >= outer[1] - 1 and box[2] <= outer[2] + 1 and box[3] <= outer[3] + 1

    def apart(labels: list[dict]) -> None:
        for i, a in enumerate(labels):
            for b in labels[i + 1 :]:
                assert not overlaps(a["box"], b["box"]), f"labels drawn over each other: {a} and {b}"

    # the story, in words: when it started (24-hour UTC) and both topics among what it hit
    started = re.search(r"Started (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", body)
    assert started, body
    start = datetime.strptime(started.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
    assert abs(start - frozen_at) < 30, (started.group(0), frozen_at)
    assert f"{stack.topic}[" in body and f"{stack.topic2}[" in body
    # which alerts: the evaluator statuses the breach saw, and the monitor's own status changes around it
    assert re.search(r"Evaluator statuses during the breach: (STOP|STALL)", body), body
    changes = body.split("Monitor status changes around it (UTC): ", 1)
    assert len(changes) == 2 and "→ ERR" in changes[1].split("\n", 1)[0], body

    timeline = chart_with("time (UTC)")
    x = axis(timeline, "X-axis")
    times = [t["text"] for t in x["labels"]]
    assert len(times) >= 3 and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in times), times
    for text in times:  # each label a UTC clock time of the freeze's window: a 12-hour or local clock is not
        hh, mm = int(text[:2]), int(text[3:5])
        shown = hh * 3600 + mm * 60 + int(text[6:8] or 0)
        apart_s = abs(shown - frozen_at % 86_400)
        assert min(apart_s, 86_400 - apart_s) < 30 * 60, (text, times, frozen_at)
    rows = axis(timeline, "Y-axis")["labels"]
    names = [t["text"] for t in rows]
    assert any(n.startswith(f"{stack.topic}[") for n in names) and any(n.startswith(f"{stack.topic2}[") for n in names)
    apart(rows)
    apart(x["labels"])
    assert timeline["svg"][3] - timeline["svg"][1] >= 26 * len(names)  # a row's height each, and the axis
    colours = [t["text"] for t in timeline["legends"][0]["labels"]]
    assert colours[0] == "0" and len(set(colours)) == len(colours) >= 2, colours  # from 0, never min == max

    compliance = chart_with("time within SLO (%)")
    topics = [t["text"] for t in axis(compliance, "Y-axis")["labels"]]
    assert f"{FLOW} / {stack.topic}" in topics and f"{FLOW} / {stack.topic2}" in topics, topics
    apart(axis(compliance, "Y-axis")["labels"])
    assert compliance["svg"][3] - compliance["svg"][1] >= 26 * len(topics) + 30  # the bars, and the x axis below
    for title in axis(compliance, "X-axis")["title"]:
        assert inside(title["box"], compliance["svg"]), (title, compliance["svg"])  # not cut off
