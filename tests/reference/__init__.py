"""The readable reference models of the rules the JVM stage runs, kept with their twin tests.

lifecycle.py      one transaction's rules (on_input / on_timer): the model of Lifecycle.java
ingest_rules.py   the ingest's rules as Spark SQL expressions: the model of Ingress.java

The product runs the JVM twins (streams/jvm/); these are what a reader reads to learn the
rules, and what tests/streams/stage/test_lifecycle_twin.py and test_ingest_twin.py compare the
twins with, on random input.
"""
