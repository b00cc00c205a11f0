"""Shared definitions of the analytics: defaults, key columns and the meaning of each derived flag.

Both the Spark job and the generator's numpy ground truth follow these, so keep them in one place.

- A *sample* is one row of the history: one partition at one time.
- A partition's *series* is identified by ``PARTITION_KEYS`` and ordered by ``ts``.
- ``spacing_ms`` = time to the next sample of the same series (null for the last one).
- ``median_spacing_ms`` = exact median of the series' spacings that begin and end in the sample's UTC hour (the
  hour's sampling interval). Local to the hour so that a closed hour never changes (incremental runs, ``state``);
  an hour with no such spacing (one sample) has no median.
- A *sampling gap* is a spacing > ``gap_factor`` × median spacing.
- A sample's *weight* (the time it stands for) = min(spacing, floor(gap_factor × median)) ms; the last sample of a
  series stands for floor(median) ms. So a gap contributes at most the cap; the rest is *unobserved* time,
  counted neither as compliant nor as breached. A sample of an hour without a median stands for no time: its
  spacing is unobserved.
- *breach*: a known ``true_lag`` > SLO lag, or a known ``time_lag_s`` > SLO time.
- *compliant*: both known and within the SLO. Neither → *unknown* (weight goes to ``unknown_ms``).
- *compliance* = compliant_ms / (compliant_ms + breach_ms).
- An *incident* (per partition) is a maximal run of consecutive breach samples of one series with no sampling
  gap inside. See ``incidents`` for its fields.
"""

from __future__ import annotations

DEFAULT_SLO_LAG = 10_000  # messages
DEFAULT_SLO_TIME_S = 60.0  # seconds
DEFAULT_GAP_FACTOR = 3.0

# ``mirror`` (what mirrors the flow: mirrorwatch, mm2; "" for a plain group) is one value per flow once
# ``prepare.read_samples`` has settled it, so it marks the flow in every table without splitting a series.
# A series (one partition of one flow) as the partial aggregates key it: without ``mirror``, which is settled per
# flow when the tables are written, so a flow whose mirror changed stays one series.
SERIES_KEYS = ["flow", "source", "target", "group", "topic", "partition"]
PARTITION_KEYS = ["flow", "source", "target", "mirror", "group", "topic", "partition"]
TOPIC_KEYS = ["flow", "source", "target", "mirror", "group", "topic"]
FLOW_KEYS = ["flow", "source", "target", "mirror", "group"]

# Percentiles reported for every lag kind. Per partition and hour they are exact (Spark's ``percentile``, linear
# interpolation between the two nearest ranks — numpy's default method). Over a day, a topic-day or a topic's
# period they come from the hours' KLL sketches merged (``SKETCH_K``): the value returned is one of the values
# seen, whose rank is within the sketch's rank error of the one asked for (see docs/analytics.md).
PERCENTILES = (0.5, 0.95, 0.99)
SKETCH_K = 200  # DataSketches KLL: normalized rank error ≈ 1.65 % (99 % confidence); Spark's default
SKETCH_RANK_ERROR = 0.0165
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
LAG_KINDS = ("true_lag", "committed_lag", "time_lag_s")
