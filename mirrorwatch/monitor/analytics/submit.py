"""``spark-submit`` entry point (a plain script with absolute imports), e.g.

    spark-submit --master spark://host:7077 --driver-memory 2g \\
        "$(python -c 'import mirrorwatch.monitor.analytics.submit as m; print(m.__file__)')" \\
        --history hdfs:///mirrorwatch/history --out hdfs:///mirrorwatch/analytics

Takes the same options as ``monitor analyze``; spark-submit's ``--master`` and ``--conf`` apply.
"""

from mirrorwatch.monitor.analytics.job import main

if __name__ == "__main__":
    main()
