"""mirrorwatch: observability for Kafka cross-cluster mirroring.

Packages (one per design card): ``core`` (config, Kafka clients, shared record types),
``mirror``, ``canary``, ``monitor`` (each depends on ``core`` only), ``dashboards``,
and ``localkafka`` (real local Kafka clusters for the demo and the tests).
"""

__version__ = "0.1.0"
