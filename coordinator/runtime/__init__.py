"""The runtime: the engine's driver, its Spark session and the local stack.

    engine.py          the ticker and the decision query, started and stopped in order
    spark_session.py   the one SparkSession factory (Delta, RocksDB state, the install's jars,
                       spark-log4j2.properties)
    artifacts.py       the install step's jar cache, and where the project lives
    class_archives.py  the JVMs' class archives: where they are, the options that use them
    driver_metrics.py  the driver's Prometheus endpoint (RocketMQ's metric names)
    table_counts.py    what the warehouse's tables hold, counted once at start
    service_entry.py   the command line of a service run on its own (REST, gRPC endpoint)
    local_stack/       the KRaft broker (open, or secured by an auth file), health probes and
                       the stack of `txcoord up`

Importing this package imports none of them (nor pyspark).
"""

__all__ = [
    "artifacts",
    "class_archives",
    "driver_metrics",
    "engine",
    "local_stack",
    "service_entry",
    "spark_session",
    "table_counts",
]
