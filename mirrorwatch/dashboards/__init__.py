"""The Streamlit status page: read-only views over the monitor's HTTP API, the canary's metrics and the Spark
analytics output. It never talks to Kafka and imports only ``mirrorwatch.core`` from the project.

- ``settings``: where to read from (the ``dashboard:`` config section, defaults derived from the monitor/canary);
- ``sources``: the readers (HTTP status API, canary Prometheus text, analytics Parquet/JSON), errors as values;
- ``health``: the overview's traffic light and the words saying why it is not green;
- ``frames``: API answers → the frames the page draws (recent figures, topics and partitions worst first);
- ``charts``: the Altair charts;
- ``views_live`` / ``views_history``: the page sections; ``app``: the page file ``streamlit run`` executes;
- ``cli``: ``monitor dashboard --config FILE [--port P]``.
"""
