"""Tests of streams/progress/."""
