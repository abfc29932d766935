"""Tests of streams/fence/."""
