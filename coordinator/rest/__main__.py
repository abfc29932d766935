"""`python -m coordinator.rest --config FILE --set key=value`: the REST ingress on its own."""

from __future__ import annotations

import sys

from coordinator.core.errors import TxcoordError
from coordinator.runtime.service_entry import service_config


def main(argv: list[str] | None = None) -> int:
    """Run the REST ingress; return the process exit code."""
    try:
        config = service_config(
            "python -m coordinator.rest",
            "Run the REST ingress (contract 5.1) until SIGINT or SIGTERM.",
            "rest.port=8081",
            sys.argv[1:] if argv is None else argv,
        )
        from coordinator.rest.app import serve  # noqa: PLC0415 - after the configuration is known

        serve(config)
    except TxcoordError as exc:
        print(f"txcoord rest: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
