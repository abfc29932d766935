"""Tests of coordinator/kafka_clients/."""
