"""Helpers the test modules share: Kafka topic helpers (helpers), the mirror engine as a subprocess
(mirror_harness), a real Prometheus for rule and query tests (prometheus_server), subprocesses that die with
the test session (services). Not tests themselves: pytest collects nothing here."""
