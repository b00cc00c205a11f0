"""Apache Kafka's own command-line tools (what ``bin/kafka-transactions.sh`` and its siblings run), resolved from
Maven Central into the cache (``jars.ensure_jars("tools")``), so that tests run the very commands the docs and the
engine's log lines give on-call, against the local clusters."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from .jars import ensure_jars, require_tool
from .process import LOG4J2, extra_jvm_options

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"  # bin/kafka-transactions.sh


def run_tool(main_class: str, args: list[str], timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools with these arguments; its output is returned, whatever its exit code."""
    java = require_tool("java", "install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)")
    classpath = f"{ensure_jars('tools')}/*"
    logs = Path(tempfile.gettempdir()) / "mirrorwatch-kafka-tools"  # the log config writes under kafka.logs.dir
    cmd = [
        java,
        *extra_jvm_options(),
        f"-Dlog4j2.configurationFile={LOG4J2}",
        f"-Dkafka.logs.dir={logs}",
        "-cp",
        classpath,
        main_class,
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)


def kafka_transactions(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kafka-transactions.sh --bootstrap-server <bootstrap> <args>`` (e.g. ``find-hanging --broker-id 1``,
    ``abort --topic T --partition P --start-offset N``)."""
    return run_tool(TRANSACTIONS, ["--bootstrap-server", bootstrap, *args])
