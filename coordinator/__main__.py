"""`python -m coordinator` runs the `txcoord` command line."""

from coordinator.cli import run

if __name__ == "__main__":
    run()
