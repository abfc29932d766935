"""The command line of a service run on its own: the REST ingress, the RocketMQ gRPC endpoint.

    python -m coordinator.rest --config FILE --set key=value [-v]
    python -m coordinator.rocketmq --config FILE --set key=value [-v]

Both read the same options, log the same way and take their configuration from the file,
the environment (TXCOORD_*, read here only: the entry point is the one place that does) and
the overrides, so a cluster configures each as it configures the other.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from coordinator.core.config import Config, load_config, parse_overrides
from coordinator.core.library_logs import demote_transient_library_errors

__all__ = ["service_config"]


def service_config(prog: str, description: str, example: str, argv: list[str]) -> Config:
    """Parse `argv` as service `prog`'s command line, set up logging, and return the
    configuration (ConfigurationError if it is refused); `example` is a `--set` example."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", type=Path, help="TOML configuration file (contract 4)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override one configuration key, e.g. --set {example}",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("kafka").setLevel(logging.DEBUG if args.verbose > 1 else logging.WARNING)
    demote_transient_library_errors()
    return load_config(args.config, environ=os.environ, overrides=parse_overrides(args.set))
