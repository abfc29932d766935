"""Subcommands of the `txcoord` command line (coordinator/cli.py), one module each; options.py
holds the options several of them share (the configuration file, overrides of its keys),
terminal_text.py the escaping of client-supplied names they print."""

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
