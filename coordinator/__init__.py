"""txcoord, layer by layer (docs/design.md, "Layout"; tests/test_layers.py keeps the order).

core/         configuration, errors, the state machine, failpoints, the topic layout, Kafka
              client settings (the standard library only)
protocol/     the wire: records, names, the check record's codec (the standard library only)
kafka_clients/        every Kafka client, built from the one `[kafka]` setting
runtime/      the engine's driver, its Spark session, the local stack
applications  sdk/ (producers: core/, protocol/ and kafka_clients/ only, no Spark), rest/ (the REST
              ingress), rocketmq/ (the RocketMQ 5 gRPC endpoint, beside
              rest/), admin/ (operator tools), commands/ and cli.py (`txcoord`), bench/,
              app.py (the coordinator under spark-submit), record_classes.py (the install
              step's recording of the class archives), stop_signals.py and program_exit.py
              (how the programs stop and end)

The engine's streams and tables are the top-level streams/ and delta_tables/ (runtime).
Importing this package imports none of them.
"""

__all__ = [
    "admin",
    "app",
    "bench",
    "cli",
    "commands",
    "core",
    "kafka_clients",
    "protocol",
    "record_classes",
    "rest",
    "rocketmq",
    "runtime",
    "sdk",
    "stop_signals",
]
