"""Tests of streams/state/."""
