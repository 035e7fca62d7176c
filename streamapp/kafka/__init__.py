"""Kafka itself: topic administration, the one topic reader, record limits, and the JVMs streamapp starts (the
broker, and ksqlDB's joins on Kafka Streams).

Everything here talks to a cluster or starts a process; what it knows about records
and keys comes from :mod:`streamapp.model` and :mod:`streamapp.partitioners`.
"""
from __future__ import annotations

import logging

#: librdkafka's connection retries go here instead of flooding stderr; errors reach users as exceptions.
CLIENT_LOGGER = logging.getLogger("streamapp.librdkafka")
