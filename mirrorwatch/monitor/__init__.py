"""monitor/: lag (committed, read, true, time), the Burrow-style evaluator, exporter, status API, history,
and Spark analytics over that history. Depends on mirrorwatch.core only."""
