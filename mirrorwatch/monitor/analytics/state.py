"""What an incremental run keeps between runs (``--state``): the summarised past, so a run reads only new history.

Layout under the state URI::

    state.json                     the committed state (written last: a run that dies before it left nothing)
    run-<as_of_ms>/hours/          final hour partials of the hours that run closed, without sketches (``partials``)
    run-<as_of_ms>/days/           per series, the merged KLL sketches of each UTC day that run closed
    run-<as_of_ms>/hour_sketches/  per series, the sketches of the hours it closed in the day still open at its
                                   boundary (``Part.open_day_ms``); deleted by the run that closes that day
    run-<as_of_ms>/gaps/           final sampling gaps of those hours
    run-<as_of_ms>/incidents/      incidents that ended (with the sample after them) before that run's boundary
    run-<as_of_ms>/carry/          per series, its last sample before the boundary, with its incident's partial

A run at ``as_of`` (T) closes the hours that end at least ``late_s`` before T: its *boundary* B =
floor_hour(T − late_s). The next run reads only samples with B ≤ ts < T' (plus the carried samples), so a
sample may be written at most ``late_s`` after its own time; one written later than that is not counted.

The sketches (percentiles coarser than an hour) are needed per day at the finest, so a day whose 24 hours are all
closed is merged once, by the run whose boundary first reaches its end, into one ``days`` row per series; until
then its closed hours keep their own sketch rows. A run's sketch merge therefore reads at most one row per series
for each closed day of the look-back and the open day's closed hours, never 168 hour rows. The look-back of an
incremental run is whole UTC days (``--from`` rounded down to midnight), so a day row is never split.
Runs append one folder each; folders whose hours all left the look-back are deleted (``expired``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Protocol

from .definitions import DAY_MS, HOUR_MS, SKETCH_K

FORMAT = 2  # bump when a partial's columns or meaning change: an older state is then rebuilt from scratch


class TextFS(Protocol):
    def read_text(self, uri: str) -> str | None: ...
    def write_text(self, uri: str, text: str) -> None: ...
    def delete(self, uri: str) -> None: ...


@dataclass(frozen=True)
class Part:
    name: str
    boundary_ms: int  # every hour in it ends at or before this
    # the UTC day (still open at this part's boundary) whose closed hours' sketches are in its ``hour_sketches``;
    # None once that day is closed and its sketches merged into a later part's ``days``
    open_day_ms: int | None = None


@dataclass(frozen=True)
class State:
    boundary_ms: int
    as_of_ms: int
    settings: dict[str, float | int]
    parts: list[Part] = field(default_factory=list)
    carry: str | None = None


def settings_key(slo_lag: int, slo_time_s: float, gap_factor: float, late_s: float) -> dict[str, float | int]:
    """What the partials depend on: a state built with other values is not reused."""
    return {
        "format": FORMAT,
        "slo_lag": slo_lag,
        "slo_time_s": slo_time_s,
        "gap_factor": gap_factor,
        "late_s": late_s,
        "sketch_k": SKETCH_K,
    }


def day_open(day_ms: int, boundary_ms: int) -> bool:
    """Whether the UTC day starting at ``day_ms`` has an hour that a state at ``boundary_ms`` has not closed."""
    return day_ms + DAY_MS > boundary_ms


def _opt_int(value: object) -> int | None:
    return None if value is None else int(str(value))


def boundary_of(as_of_ms: int, late_s: float) -> int:
    return (as_of_ms - int(late_s * 1000)) // HOUR_MS * HOUR_MS


def load(fs: TextFS, uri: str, wanted: dict[str, float | int]) -> tuple[State | None, str | None]:
    """(state, None), or (None, why it is not used) — None, None when there is none yet."""
    text = fs.read_text(f"{uri}/state.json")
    if text is None:
        return None, None
    try:
        raw = json.loads(text)
        state = State(
            boundary_ms=int(raw["boundary_ms"]),
            as_of_ms=int(raw["as_of_ms"]),
            settings=dict(raw["settings"]),
            parts=[Part(str(p["name"]), int(p["boundary_ms"]), _opt_int(p.get("open_day_ms"))) for p in raw["parts"]],
            carry=raw.get("carry"),
        )
    except (ValueError, KeyError, TypeError) as exc:
        return None, f"unreadable {uri}/state.json ({exc}): summarising the history from scratch"
    if state.settings != wanted:
        return None, f"the state in {uri} was built with other settings ({state.settings}): summarising from scratch"
    return state, None


def folders(fs: TextFS, uri: str) -> set[str]:
    """The run folders a ``state.json`` names, whatever its format or settings: a state that is not reused is
    replaced, and its folders deleted once the new one is committed. Empty when it names none or is unreadable."""
    text = fs.read_text(f"{uri}/state.json")
    try:
        raw = json.loads(text) if text is not None else {}
        names = {str(p["name"]) for p in raw.get("parts", [])} | ({str(raw["carry"])} if raw.get("carry") else set())
    except (ValueError, KeyError, TypeError, AttributeError):
        return set()
    return {n for n in names if n.startswith("run-") and "/" not in n}


def save(fs: TextFS, uri: str, state: State) -> None:
    fs.write_text(f"{uri}/state.json", json.dumps(asdict(state), indent=1))


def expired(state: State, lookback_start_ms: int | None) -> list[Part]:
    """Parts whose hours (and days) all lie before the look-back's first day."""
    if lookback_start_ms is None:
        return []
    first_day = lookback_start_ms // DAY_MS * DAY_MS
    return [p for p in state.parts if p.boundary_ms <= first_day]
