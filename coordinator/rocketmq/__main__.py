"""`python -m coordinator.rocketmq --config FILE --set key=value`: the RocketMQ 5 gRPC endpoint
on its own (a cluster runs it beside the REST ingress, as many as it needs)."""

from __future__ import annotations

import signal
import sys
from types import FrameType

from coordinator.core.errors import TxcoordError
from coordinator.runtime.service_entry import service_config


def main(argv: list[str] | None = None) -> int:
    """Run the endpoint; return the process exit code."""
    try:
        config = service_config(
            "python -m coordinator.rocketmq",
            "Run the RocketMQ 5 gRPC endpoint (docs/rocketmq.md) until SIGINT or SIGTERM.",
            "grpc.port=8082",
            sys.argv[1:] if argv is None else argv,
        )
        # Imported here: gRPC and Kafka's admin API load only once the configuration is known.
        from coordinator.rocketmq.server import Endpoint  # noqa: PLC0415
        from streams.kafka_io.ingress_topics import prepare_ingress_topics  # noqa: PLC0415

        endpoint = Endpoint(config)  # first: a bad auth file is refused before any network call
        prepare_ingress_topics(config)
        endpoint.start()
    except TxcoordError as exc:
        print(f"txcoord rocketmq: {exc}", file=sys.stderr)
        return 2

    def stop(signum: int, frame: FrameType | None) -> None:
        endpoint.stop()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print(f"RocketMQ gRPC endpoint on {endpoint.address}", flush=True)
    endpoint.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
