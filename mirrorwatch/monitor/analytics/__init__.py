"""Historical lag analytics: a PySpark job over the monitor's lag history, and a synthetic history generator.

Module map (read in this order):
- ``definitions``: SLO defaults, key columns, and the meaning of breach / compliance / gap (shared by all).
- ``cli``: the ``monitor analyze`` and ``monitor generate-history`` commands (thin; parse, then delegate).
- ``job``: the analysis driver (also the ``spark-submit`` entry point), stage by stage.
- ``session``: SparkSession construction tuned for a small machine.
- ``hadoopfs`` / ``inputs``: listing and checking history files through Hadoop's FileSystem (any URI).
- ``prepare``: per-sample enrichment (spacing, weights, breach flags) — pure DataFrame functions.
- ``tables`` / ``incidents``: the output tables — pure DataFrame functions.
- ``synthetic`` / ``truth`` / ``history_writer``: the generator, its numpy ground truth, and its writer.

Nothing here imports Spark at module import time except the modules that need it, so the CLI stays fast.
"""
