"""Tests of streams/query/."""
