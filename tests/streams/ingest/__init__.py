"""Tests of streams/ingest/."""
