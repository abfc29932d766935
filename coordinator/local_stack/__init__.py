"""The local stack of `txcoord up`: the KRaft broker, health probes, the stack itself."""

__all__ = ["kafka_broker", "stack"]
