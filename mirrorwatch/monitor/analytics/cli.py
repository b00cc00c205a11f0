"""``monitor analyze`` and ``monitor generate-history``.

Kept thin on purpose: options are parsed here, the work happens in ``job`` (Spark) and ``history_writer``
(numpy/pyarrow). Heavy imports (pyspark, numpy) are deferred into the command bodies so that
``monitor --help`` and every other ``monitor`` subcommand start quickly.
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from ...core.cli import UserError
from ...core.extras import require_extra
from .definitions import DEFAULT_GAP_FACTOR, DEFAULT_SLO_LAG, DEFAULT_SLO_TIME_S

DEFAULT_TOPICS = "orders,payments,clicks"


def _required(value: datetime | None) -> datetime:
    assert value is not None  # parse_time of a non-None text
    return value


def parse_time(text: str | None, option: str) -> datetime | None:
    """An ISO-8601 date or date-time; naive values are taken as UTC."""
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"{option}: not an ISO-8601 date or time: {text!r} (e.g. 2026-01-05 or 2026-01-05T13:00Z)", 2
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@click.command(
    "analyze", help="Run the Spark analytics job over a lag history and write Parquet tables + summary.json."
)
@click.option("--history", "history_uri", required=True, help="History root URI (holds lag/date=YYYY-MM-DD/*.parquet).")
@click.option("--out", "out_uri", required=True, help="Output URI for the tables and summary.json.")
@click.option("--from", "from_text", default=None, help="Start of the period (inclusive), ISO-8601, UTC if naive.")
@click.option("--to", "to_text", default=None, help="End of the period (exclusive), ISO-8601, UTC if naive.")
@click.option(
    "--slo-lag",
    type=click.IntRange(min=0),
    default=DEFAULT_SLO_LAG,
    show_default=True,
    help="SLO: max true lag (messages).",
)
@click.option(
    "--slo-time",
    type=click.FloatRange(min=0),
    default=DEFAULT_SLO_TIME_S,
    show_default=True,
    help="SLO: max time lag (seconds).",
)
@click.option(
    "--gap-factor",
    type=click.FloatRange(min=1),
    default=DEFAULT_GAP_FACTOR,
    show_default=True,
    help="A sampling gap is a spacing longer than this many times the partition's median spacing.",
)
@click.option(
    "--master",
    default=None,
    help="Spark master [default: local[*]; under spark-submit, its --master]. Ignored if a session already runs.",
)
@click.option(
    "--state",
    "state_uri",
    default=None,
    help="Incremental: keep the summarised hours and days here and read only history not yet summarised "
    "(--to, default now, is the run's time; --from is rounded down to UTC midnight: the look-back is whole days).",
)
@click.option(
    "--late",
    "late_s",
    type=click.FloatRange(min=0),
    default=3900.0,
    show_default=True,
    help="With --state: how late (s) a sample may be written after its own time; later ones are not counted.",
)
@click.option("--quiet", is_flag=True, help="No progress output (warnings still go to stderr).")
def analyze(
    history_uri: str,
    out_uri: str,
    from_text: str | None,
    to_text: str | None,
    slo_lag: int,
    slo_time: float,
    gap_factor: float,
    master: str | None,
    state_uri: str | None,
    late_s: float,
    quiet: bool,
) -> None:
    require_extra("analytics", "monitor analyze")
    from .job import AnalysisSettings, run_job
    from .progress import Progress

    settings = AnalysisSettings(
        history_uri=history_uri,
        out_uri=out_uri,
        start=parse_time(from_text, "--from"),
        end=parse_time(to_text, "--to"),
        slo_lag=slo_lag,
        slo_time_s=slo_time,
        gap_factor=gap_factor,
        state_uri=state_uri,
        late_s=late_s,
    )
    if settings.start and settings.end and settings.start >= settings.end:
        raise UserError("--from must be before --to", 2)
    summary = run_job(settings, master=master, progress=Progress(quiet=quiet))
    if not quiet:
        click.echo(
            f"analytics written to {out_uri} ({summary['rows']} samples, {summary['incidents']['count']} incidents)",
            err=True,
        )


@click.command(
    "generate-history", help="Write a synthetic lag history (same schema as the monitor's) with known incidents."
)
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Local directory to write into."
)
@click.option(
    "--start", "start_text", default="2026-01-05T00:00:00Z", show_default=True, help="First sample time (UTC)."
)
@click.option(
    "--days",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Length of the history in days [default: 7].",
)
@click.option(
    "--samples", type=click.IntRange(min=1), default=None, help="About this many rows in total (instead of --days)."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.001, min_open=False),
    default=10.0,
    show_default=True,
    help="Sampling interval (s).",
)
@click.option("--topics", default=DEFAULT_TOPICS, show_default=True, help="Comma-separated source topics.")
@click.option("--partitions", type=click.IntRange(min=1), default=4, show_default=True, help="Partitions per topic.")
@click.option("--seed", type=int, default=7, show_default=True)
@click.option(
    "--roll",
    "roll_s",
    type=click.IntRange(min=1, max=86400),
    default=None,
    help="One file per this many seconds of history (like monitor.history_roll_s) [default: one per day].",
)
@click.option(
    "--slo-lag",
    type=click.IntRange(min=0),
    default=DEFAULT_SLO_LAG,
    show_default=True,
    help="SLO used for the ground truth.",
)
@click.option(
    "--slo-time",
    type=click.FloatRange(min=0),
    default=DEFAULT_SLO_TIME_S,
    show_default=True,
    help="SLO used for the ground truth.",
)
@click.option("--gap-factor", type=click.FloatRange(min=1), default=DEFAULT_GAP_FACTOR, show_default=True)
@click.option("--quiet", is_flag=True)
def generate_history(
    out_dir: str,
    start_text: str,
    days: float | None,
    samples: int | None,
    interval: float,
    topics: str,
    partitions: int,
    seed: int,
    roll_s: int | None,
    slo_lag: int,
    slo_time: float,
    gap_factor: float,
    quiet: bool,
) -> None:
    from .history_writer import write_history
    from .synthetic import GeneratorSpec

    if days is not None and samples is not None:
        raise UserError("give --days or --samples, not both", 2)
    if roll_s is not None and 86400 % roll_s:
        raise UserError(f"--roll {roll_s}: must divide a day (86400 s), so that no file spans two date= folders", 2)
    topic_list = [t.strip() for t in topics.split(",") if t.strip()]
    if not topic_list:
        raise UserError("--topics: at least one topic", 2)
    n_series = len(topic_list) * partitions
    if samples is not None:
        steps = -(-samples // n_series)
    else:
        steps = int(round((days if days is not None else 7.0) * 86400 / interval))
    spec = GeneratorSpec(
        start_ms=int(_required(parse_time(start_text, "--start")).timestamp() * 1000),
        steps=max(steps, 2),
        interval_s=interval,
        topics=tuple(topic_list),
        partitions=partitions,
        seed=seed,
        slo_lag=slo_lag,
        slo_time_s=slo_time,
        gap_factor=gap_factor,
    )
    result = write_history(spec, out_dir, roll_s)
    if not quiet:
        click.echo(
            f"wrote {result.rows} samples in {result.files} files under {out_dir}/lag; "
            f"{result.incidents} ground-truth incidents in {result.ground_truth_path}",
            err=True,
        )


commands = [analyze, generate_history]
