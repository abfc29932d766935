"""The state derived from the warehouse, when the checkpoint is lost or moved.

rebuild.py           a new generation with the state moved (rescale, rebuild, upgrade)
warehouse_state.py   the state derived from the warehouse alone
landing_repair.py    a rebuild lands what a crash left unlanded; Kafka is read on after it
decision_repair.py   a rebuild writes the final states and verdicts a crash left unwritten
derivation.py        one transaction's state from its rows of the tables (pure)
"""

__all__ = ["decision_repair", "landing_repair", "rebuild"]
