"""Tests of streams/kafka_io/."""
