"""Tests of streams/stage/."""
