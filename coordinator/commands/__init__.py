"""Subcommands of the `txcoord` command line (coordinator/cli.py)."""

__all__ = ["bench", "broker", "demo", "maintain", "provision", "transactions", "up"]
