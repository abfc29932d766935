"""The engine's Kafka topics and producers.

kafka_fence.py       check records and notices sent in Kafka transactions a newer
                     coordinator fences (transactional ids shared per warehouse)
check_publisher.py   check requests published on the check topics (at least once)
check_topic.py       the check topic's records, sized to fit every accepted half
delivery_notices.py  each delivering batch's queue ends, for consumers (best effort)
ingress_topics.py    the ingress and check topics, created with the settings needed
outage.py            an engine stopped longer than the ingress topics keep records
ticker.py            heartbeats into the ingress topics: event time moves when quiet
tick_pace.py         how often: every tick while a timer may be near, rarely if not
"""

__all__ = ["delivery_notices", "ingress_topics", "kafka_fence", "outage", "ticker"]
