"""The stateful stage: one transaction's halves and ops in, its decisions out.

processor.py   the stage: PySpark's handle on its JVM processor (streams/jvm/)
lifecycle.py   what the stage is given (Rules) and the rows it emits (Kind)
"""

__all__ = ["lifecycle", "processor"]
