"""`python -m coordinator.rest --config FILE --set key=value`: the REST ingress on its own."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from coordinator.core.config import load_config, parse_overrides
from coordinator.core.errors import TxcoordError
from coordinator.core.library_logs import demote_transient_library_errors


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Return the command line's arguments."""
    parser = argparse.ArgumentParser(
        prog="python -m coordinator.rest",
        description="Run the REST ingress (contract 5.1) until SIGINT or SIGTERM.",
    )
    parser.add_argument("--config", type=Path, help="TOML configuration file (contract 4)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one configuration key, e.g. --set rest.port=8081",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the REST ingress; return the process exit code."""
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
        from coordinator.rest.app import serve  # noqa: PLC0415 - after the configuration is known

        serve(config)
    except TxcoordError as exc:
        print(f"txcoord rest: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
