"""`python -m coordinator` runs the `txcoord` command line."""

from coordinator.cli import main

if __name__ == "__main__":
    main()
