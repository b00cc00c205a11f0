"""The one parser of the canary's Prometheus series (core.canary_metrics), as the monitor, the status page and
`mirror failover check` read them. Each of the three had its own parser and status table; the failover check's
took the status line's value with int(float(...)), which raised on the NaN the canary publishes before its first
judged probe."""

from __future__ import annotations

import math
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from mirrorwatch.core.canary_metrics import canary_status_name, parse_canary_metrics
from mirrorwatch.mirror.failover.check import canary_status

TEXT = """\
# TYPE mirrorwatch_canary_status gauge
mirrorwatch_canary_status{{flow="ew",source="east",target="west"}} {status}
# TYPE mirrorwatch_canary_heartbeat_age_seconds gauge
mirrorwatch_canary_heartbeat_age_seconds{{flow="ew",source="east",target="west"}} {age}
# TYPE mirrorwatch_canary_probes_total counter
mirrorwatch_canary_probes_total{{flow="ew",source="east",target="west"}} 12.0
# TYPE mirrorwatch_canary_lost_total counter
mirrorwatch_canary_lost_total{{flow="ew",source="east",target="west"}} 1.0
# TYPE mirrorwatch_canary_late_total counter
mirrorwatch_canary_late_total{{flow="ew",source="east",target="west"}} 4.0
# TYPE mirrorwatch_canary_overdue_events gauge
mirrorwatch_canary_overdue_events{{flow="ew",source="east",target="west"}} 6.0
# TYPE mirrorwatch_canary_oldest_overdue_seconds gauge
mirrorwatch_canary_oldest_overdue_seconds{{flow="ew",source="east",target="west"}} 42.5
# TYPE mirrorwatch_canary_round_trip_seconds histogram
mirrorwatch_canary_round_trip_seconds_bucket{{flow="ew",source="east",target="west",le="0.1"}} 3.0
mirrorwatch_canary_round_trip_seconds_bucket{{flow="ew",source="east",target="west",le="+Inf"}} 4.0
mirrorwatch_canary_round_trip_seconds_sum{{flow="ew",source="east",target="west"}} 0.6
mirrorwatch_canary_round_trip_seconds_count{{flow="ew",source="east",target="west"}} 4.0
"""


@pytest.mark.parametrize(
    "code, name", [(0, "OK"), (1, "WARNING"), (2, "CRITICAL"), (3, "UNKNOWN"), (7, "UNKNOWN"), (math.nan, None)]
)
def test_status_names(code, name):
    assert canary_status_name(code) == name


def test_one_reading_per_flow():
    reading = parse_canary_metrics(TEXT.format(status=1, age=0.5))["ew"]
    assert (reading.status, reading.heartbeat_age_s, reading.probes) == ("WARNING", 0.5, 12.0)
    assert (reading.lost, reading.late, reading.overdue, reading.oldest_overdue_s) == (1.0, 4.0, 6.0, 42.5)
    assert reading.buckets == {0.1: 3.0, math.inf: 4.0}
    assert reading.mean_round_trip_s() == pytest.approx(0.15)
    fresh = parse_canary_metrics(TEXT.format(status="NaN", age="NaN"))["ew"]
    assert (fresh.status, fresh.heartbeat_age_s) == (None, None)


def _serve(text: str) -> HTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize(
    "text, flow, expected",
    [
        (TEXT.format(status=2, age=1), "ew", "CRITICAL"),
        (TEXT.format(status="NaN", age="NaN"), "ew", "no data"),  # raised ValueError before
        (TEXT.format(status=0, age=1), "other", "no data"),
        ("this is not { prometheus", "ew", "not Prometheus text"),
    ],
)
def test_failover_check_reads_the_canary_with_the_same_parser(text, flow, expected):
    server = _serve(text)
    try:
        assert canary_status("127.0.0.1", server.server_address[1], flow) == expected
    finally:
        server.shutdown()
