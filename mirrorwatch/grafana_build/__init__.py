"""Generates the repository's grafana/ files (the dashboard JSON and the Grafana-managed alert rules).

A development tool under the ``mirrorwatch`` namespace, so it installs no top-level ``grafana`` package (a name
other distributions use) and can take the status codes from ``mirrorwatch.core.status``. It reads and writes
the checkout's ``grafana/`` folder: ``scripts/build-grafana [--check]`` or ``python -m mirrorwatch.grafana_build``.
"""
