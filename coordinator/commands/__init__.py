"""Subcommands of the `txcoord` command line (coordinator/cli.py), one module each; options.py
holds the options several of them share (the configuration file, overrides of its keys)."""

__all__ = [
    "bench",
    "broker",
    "consumers",
    "demo",
    "maintain",
    "provision",
    "state",
    "transactions",
    "up",
]
