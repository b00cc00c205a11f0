"""mirrorwatch's Grafana and Prometheus files (not part of the installed package; see grafana/README.md)."""
