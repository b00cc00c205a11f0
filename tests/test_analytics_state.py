"""The incremental state's bookkeeping (``analytics/state.py``) with plain values: no Spark."""

from __future__ import annotations

import json

import pytest

from mirrorwatch.monitor.analytics import state as st

DAY = 86_400_000
HOUR = 3_600_000
KEY = st.settings_key(10_000, 60.0, 3.0, 3900.0)


class DictFS:
    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def read_text(self, uri: str) -> str | None:
        return self.files.get(uri)

    def write_text(self, uri: str, text: str) -> None:
        self.files[uri] = text

    def delete(self, uri: str) -> None:
        self.files.pop(uri, None)


def test_a_part_keeps_its_open_day_through_state_json() -> None:
    fs = DictFS()
    parts = [st.Part("run-1-1", 10 * DAY, None), st.Part("run-2-2", 10 * DAY + 5 * HOUR, 10 * DAY)]
    st.save(fs, "s", st.State(10 * DAY + 5 * HOUR, 10 * DAY + 6 * HOUR, KEY, parts, "run-2-2"))
    state, why = st.load(fs, "s", KEY)
    assert why is None and state is not None and state.parts == parts


def test_a_state_of_the_hour_sketch_format_is_rebuilt_and_its_folders_named_for_deletion() -> None:
    fs = DictFS()
    old = {"boundary_ms": DAY, "as_of_ms": DAY, "settings": {**KEY, "format": 1}, "carry": "run-9-9"}
    fs.write_text("s/state.json", json.dumps({**old, "parts": [{"name": "run-8-8", "boundary_ms": DAY}]}))
    state, why = st.load(fs, "s", KEY)
    assert state is None and why is not None and "other settings" in why
    assert st.folders(fs, "s") == {"run-8-8", "run-9-9"}


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (None, set()),
        ("not json", set()),
        ('{"parts": [{"name": "../etc"}, {"name": "run-1-1"}], "carry": null}', {"run-1-1"}),
        ('{"parts": "oops"}', set()),
    ],
)
def test_only_run_folders_a_state_names_are_ever_deleted(text: str | None, names: set[str]) -> None:
    fs = DictFS()
    if text is not None:
        fs.write_text("s/state.json", text)
    assert st.folders(fs, "s") == names


@pytest.mark.parametrize(
    ("day", "boundary", "open_"),
    [(DAY, DAY, True), (DAY, DAY + HOUR, True), (DAY, 2 * DAY - HOUR, True), (DAY, 2 * DAY, False)],
)
def test_a_day_is_open_until_the_boundary_reaches_its_end(day: int, boundary: int, open_: bool) -> None:
    assert st.day_open(day, boundary) is open_


def test_parts_expire_by_whole_days() -> None:
    parts = [st.Part("run-a", 3 * DAY), st.Part("run-b", 3 * DAY + HOUR), st.Part("run-c", 4 * DAY)]
    state = st.State(4 * DAY, 4 * DAY, KEY, parts)
    # a look-back from 03:30 on day 3 starts at day 3's midnight: only the part ending by then goes
    assert [p.name for p in st.expired(state, 3 * DAY + 3 * HOUR + 1_800_000)] == ["run-a"]
    assert st.expired(state, None) == []
