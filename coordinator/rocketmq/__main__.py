"""`python -m coordinator.rocketmq --config FILE --set key=value`: the RocketMQ 5 gRPC endpoint
on its own (a cluster runs it beside the REST ingress, as many as it needs)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from coordinator.core.config import load_config, parse_overrides
from coordinator.core.errors import TxcoordError
from coordinator.core.library_logs import demote_transient_library_errors


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Return the command line's arguments."""
    parser = argparse.ArgumentParser(
        prog="python -m coordinator.rocketmq",
        description="Run the RocketMQ 5 gRPC endpoint (docs/rocketmq.md) until SIGINT or SIGTERM.",
    )
    parser.add_argument("--config", type=Path, help="TOML configuration file (contract 4)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one configuration key, e.g. --set grpc.port=8082",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the endpoint; return the process exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("kafka").setLevel(logging.DEBUG if args.verbose > 1 else logging.WARNING)
    demote_transient_library_errors()
    try:
        # The entry point is the only place that reads the environment (TXCOORD_*).
        config = load_config(args.config, environ=os.environ, overrides=parse_overrides(args.set))
        # Imported here: gRPC and Kafka's admin API load only once the configuration is known.
        from coordinator.rocketmq.server import Endpoint  # noqa: PLC0415
        from streams.kafka_io.ingress_topics import ensure_ingress_topics  # noqa: PLC0415

        endpoint = Endpoint(config)  # first: a bad auth file is refused before any network call
        try:
            # The ingest needs them with LogAppendTime: never let a send create them.
            ensure_ingress_topics(config)
        except TxcoordError:
            raise
        except Exception as exc:
            raise TxcoordError(
                f"cannot prepare the ingress topics on {config.kafka.bootstrap_servers}: {exc}"
            ) from exc
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
