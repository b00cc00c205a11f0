"""SparkSession construction, tuned for a small machine (2 cores, tens of GiB) and quiet logs."""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark is imported when a session starts, not when the CLI loads
    from pyspark.sql import SparkSession

# Spark's and Hadoop's INFO/WARN chatter would drown the stage progress. Start-up runs at WARN (Hadoop and
# Parquet at ERROR), then setLogLevel("ERROR") quiets everything. Root and org.apache.spark stay at WARN during
# start-up on purpose: Spark prints "Setting default log level to ..." whenever they differ.
_LOG4J2 = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.sparkutils.name = org.apache.spark.util.Utils
logger.sparkutils.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.sparkproject.name = org.sparkproject
logger.sparkproject.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",  # in local mode the driver is also the only executor
    "spark.sql.shuffle.partitions": "4",  # a few partitions per core; AQE coalesces further
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.session.timeZone": "UTC",  # hour/day buckets are UTC, like the history's date= folders
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
}


def _log4j_config_path() -> str:
    digest = hashlib.sha256(_LOG4J2.encode()).hexdigest()[:12]  # a changed config gets a new file
    path = os.path.join(tempfile.gettempdir(), f"mirrorwatch-spark-log4j2-{digest}.properties")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(_LOG4J2)
    return path


def launched_by_spark_submit() -> bool:
    # spark-submit's PythonRunner starts the JVM first and hands this process its gateway through these.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(
    master: str | None = None, app_name: str = "mirrorwatch-analytics", conf: dict[str, str] | None = None
) -> tuple[SparkSession, bool]:
    """Return ``(spark, created)``; ``created`` is False when a session was already running (tests, notebooks)
    — then its settings (master, driver memory …) stand, and the caller must not stop it.

    ``master`` None means ``local[*]``, except under ``spark-submit``, whose ``--master`` and ``--conf`` then
    stand: only the UTC session time zone (which the hour/day buckets rely on) and millisecond Parquet timestamps
    (the output format) are imposed there.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName(app_name)
    if launched_by_spark_submit():
        # the output's format is part of the contract whoever launches the job: UTC buckets, and timestamps written
        # as Parquet TIMESTAMP_MILLIS (UTC-adjusted) rather than Spark's default INT96, which readers such as
        # pyarrow and the status page take as naive times (tests/test_analytics_cluster.py found the difference)
        settings = {
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
            **(conf or {}),
        }
    else:
        java_opts = f"-Dlog4j2.configurationFile=file:{_log4j_config_path()}"
        settings = {**DEFAULT_CONF, "spark.driver.extraJavaOptions": java_opts, **(conf or {})}
        master = master or "local[*]"
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # pyspark warns about the installed pandas version while converting conf values; this job uses no pandas.
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True
