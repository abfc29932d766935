"""The query: every ingress record in, every decision out.

query.py       the one streaming query: reads the ingress topics, runs the stage, writes
processor.py   the stateful stage: PySpark's handle on its JVM processor (streams/jvm/)
lifecycle.py   what the stage is given (Rules) and the rows it emits (Kind)
"""

__all__ = ["query"]
