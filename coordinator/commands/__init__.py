"""Subcommands of the `txcoord` command line."""
