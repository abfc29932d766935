"""Tests of streams/writes/."""
