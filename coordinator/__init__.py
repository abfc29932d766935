"""txcoord: its core, its engine driver and its applications (docs/design.md, "Layout").

Core (the standard library only): core/ (configuration, errors, the state machine, failpoints, the
topic layout, Kafka client settings) and protocol/ (the wire: records, names, the check record's
codec). Kafka clients: kafka/ (every client built from the one `[kafka]` setting). Runtime:
engine.py (the streams in one Spark session), driver_metrics.py, spark_session.py, artifacts.py (the
install step's jars), class_archives.py (the JVMs' class archives) and local_stack/ (the broker and
`txcoord up`'s stack), table_counts.py (what the warehouse holds, counted once at start).
Applications: sdk/ (producers; imports only core/ and protocol/), rest/ (the REST ingress), admin/
(operator tools), commands/ and cli.py (`txcoord`), bench/, app.py (the coordinator under
spark-submit), and record_classes.py (the install step's recording of the class archives),
stop_signals.py and program_exit.py (how the programs stop and end). Importing this package imports
none of them.
"""

__all__ = [
    "admin",
    "app",
    "artifacts",
    "bench",
    "class_archives",
    "cli",
    "commands",
    "core",
    "driver_metrics",
    "engine",
    "kafka",
    "local_stack",
    "protocol",
    "record_classes",
    "rest",
    "sdk",
    "spark_session",
    "stop_signals",
]
