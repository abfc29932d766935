"""The fault tests accept an application's own exit only for the causes they name exactly.

Before, `kafka` or `s3a` anywhere in the exit's text was enough, and the query's plan that
Spark appends to every error names both (`KafkaV2[Subscribe[...]]`, `s3a://...`): any
error at all was accepted after a broker kill or on S3.
"""

from __future__ import annotations

import re

from tests.guarantees.app_runs import BROKER_LOSS, SPARK_WORKER_TIMEOUT, cause_in
from tests.guarantees.test_cluster_faults import STORE_UNREACHABLE

PLAN = """=== Streaming Query ===
Identifier: txcoord-coordinator [id = 7329beb3]
Current Committed Offsets: {KafkaV2[Subscribe[half-c3e616b9, op-c3e616b9]]: {}}
checkpointLocation=s3a://bucket/checkpoints/coordinator], Append
java.net.SocketTimeoutException in a log line of the plan's source,
org.apache.kafka.common.errors.TimeoutException
"""


def output(error: str) -> str:
    """Return an application's output that ends with `error` and the query's plan."""
    stopped = f"error: query txcoord-coordinator stopped: {error}"
    return f"INFO  starting\ntxcoord coordinator running\n{stopped}\n{PLAN}"


def test_a_lost_broker_is_named_by_its_exception() -> None:
    for error in (
        "org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired",
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent"
        ' call last):\n  File "x.py", line 1\nkafka.errors.KafkaTimeoutError: '
        "KafkaTimeoutError: Failed to update metadata after 60.0 secs.",
    ):
        assert BROKER_LOSS.search(cause_in(output(error))), error


def test_any_other_error_is_not_accepted_although_its_plan_names_kafka_and_s3a() -> None:
    cause = cause_in(output('java.lang.NullPointerException: Cannot invoke "String.length()"'))
    assert "KafkaV2" not in cause and "s3a://" not in cause
    for accepted in (BROKER_LOSS, re.compile(STORE_UNREACHABLE), SPARK_WORKER_TIMEOUT):
        assert not accepted.search(cause), accepted.pattern
    # The old rules took it.
    assert re.search("kafka", output("NullPointerException"), re.IGNORECASE)


def test_an_unreachable_store_is_named_by_its_exception() -> None:
    for error in (
        "org.apache.hadoop.fs.s3a.AWSClientIOException: getFileStatus on s3a://b/x: "
        "software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request",
        "OSError: Generic S3 error: Error after 10 retries in 10.2s, max_retries:10, "
        "retry_timeout:180s, source:error sending request for url (http://127.0.0.1:1/b)",
    ):
        assert re.search(STORE_UNREACHABLE, cause_in(output(error))), error
    assert not re.search(STORE_UNREACHABLE, cause_in(output("s3a committer: Schema mismatch")))


def test_without_an_error_line_the_last_exception_is_the_cause() -> None:
    text = "INFO a\nWARN org.apache.spark.SparkException: Python worker failed to connect back\n"
    assert SPARK_WORKER_TIMEOUT.search(cause_in(text))
