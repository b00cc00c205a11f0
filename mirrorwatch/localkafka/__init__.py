"""Real local Apache Kafka clusters (KRaft: single node, or several nodes with ``multinode.MultiNodeCluster``) for the demo, the tests and the benchmarks.

The jars come from Maven Central through the project's own ``maven/*/pom.xml`` and are cached under the
project's ignored ``.cache/`` folder (``MIRRORWATCH_CACHE`` moves it).
"""

from .jars import KAFKA_VERSION, LauncherError, cache_dir, ensure_jars
from .launcher import LocalCluster, LocalClusters
from .multinode import MultiNodeCluster, MultiNodeClusters

__all__ = [
    "KAFKA_VERSION",
    "LauncherError",
    "LocalCluster",
    "LocalClusters",
    "MultiNodeCluster",
    "MultiNodeClusters",
    "cache_dir",
    "ensure_jars",
]
