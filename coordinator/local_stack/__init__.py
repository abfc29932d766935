"""The local stack of `txcoord up`: the KRaft broker, health probes, the stack itself."""
