"""What the query did.

batch_log.py    one JSON log line per micro-batch, and late-row totals
listener.py     a listener receiving each batch's progress as one document
step_timer.py   where a foreachBatch call spends its time
tally.py        running counts for the status line and the metrics
"""

__all__ = ["batch_log", "listener", "step_timer", "tally"]
