"""Tests of coordinator/runtime/."""
