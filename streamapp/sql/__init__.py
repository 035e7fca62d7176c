"""Declared joins: ksqlDB statements in, a typed plan out, and the pure engine that runs a plan.

``syntax`` (the grammar, read by lark) -> ``planner`` (ksqlDB's checks and names) -> ``plan``
(frozen, JSON) -> ``engine`` (one query, one record at a time) and ``runner`` (ksqlDB's test-runner
files).  ``formats`` reads and writes a source's bytes.  Everything here is pure: no Kafka, no Faust.
"""
