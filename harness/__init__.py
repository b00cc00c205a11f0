"""The real services that the test suite and the benchmarks both start, and the helpers both drive them with:
Kafka topic helpers (helpers), the mirror engine as a subprocess (mirror_harness), a real Prometheus
(prometheus_server) and Alertmanager (alertmanager), a webhook receiver (webhooks), subprocesses that die with
their parent (services), MirrorMaker 2 in a real Connect worker (connect_mm2), the lag-accuracy ground truth
(lag_accuracy) and a transactional stand-in mirror (transactional_mirror), the status page's stub API
(dashboard_stub), headless Chromium (chromium) and a Spark standalone cluster (spark_cluster).

Neither ``tests`` (bench/ must not import the suite) nor ``mirrorwatch`` (never shipped: the wheel holds
``mirrorwatch*`` only, and nothing in mirrorwatch/ imports this package; tests/test_layout.py checks both)."""
