"""Tests of streams/checkpoint/."""
