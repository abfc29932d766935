"""Idempotent Delta writes from foreachBatch: the exactly-once half of every stream.

Spark replays a micro-batch whose commit it did not record (a crash, a kill -9). Every
write of a batch therefore carries Delta's `txnAppId` (one per query and checkpoint) and
`txnVersion` (the batch id): Delta records the pair in the table's log with the data, and
skips a write whose version it has already recorded for that app id. Together with batch
contents that are a pure function of the batch, a replay writes nothing twice.

The app id is generated once per checkpoint and stored inside it. Reusing an app id with a
fresh checkpoint would restart batch ids at 0 and make Delta skip every new write as
"already done"; a new checkpoint therefore always gets a new app id.
"""

from __future__ import annotations

import uuid

from pyspark.sql import DataFrame, SparkSession

APP_ID_FILE = "_txcoord_app_id"


def checkpoint_app_id(spark: SparkSession, checkpoint: str, name: str) -> str:
    """Return the app id stored in `checkpoint`, creating it (a new uuid) the first time."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/{APP_ID_FILE}")
    fs = path.getFileSystem(hadoop_conf)
    if fs.exists(path):
        stream = fs.open(path)
        try:
            reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
            return str(reader.readLine()).strip()
        finally:
            stream.close()
    app_id = f"txcoord-{name}-{uuid.uuid4()}"
    fs.mkdirs(path.getParent())
    out = fs.create(path, False)
    try:
        out.write(app_id.encode())
    finally:
        out.close()
    return app_id


def append_once(frame: DataFrame, location: str, app_id: str, batch_id: int) -> None:
    """Append `frame` to the Delta table at `location` unless this batch already did."""
    (
        frame.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .save(location)
    )


def overwrite_once(frame: DataFrame, location: str, app_id: str, batch_id: int) -> None:
    """Replace the Delta table at `location` with `frame` unless this batch already did."""
    (
        frame.write.format("delta")
        .mode("overwrite")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .save(location)
    )
