"""The local stack of `txcoord up`: the KRaft broker (open, or secured by an auth file),
health probes, the stack itself."""

__all__ = ["broker_auth", "kafka_broker", "stack"]
