"""Where the doctor learns which topics are joined: a ``--pairs`` file, streamapp's own worker, ksqlDB.

ksqlDB is asked through its REST API with one ``/ksql`` request (``SHOW QUERIES
EXTENDED; SHOW STREAMS; SHOW TABLES;``): each persistent query names its sources
(ksqlDB objects), the listings map each object to its topic, and a query with two
or more sources joins them.  Only this one small call is made here, with httpx,
so that the co-partitioning layer does not depend on the demo's client
(:mod:`streamapp.demo.ksqldb`).  ksqlDB cannot run on this machine: the call is
tested on recorded responses (tests/recorded/ksqldb/show_queries_extended.json)
replayed by a local server, and the parsing is pure.
"""
from __future__ import annotations

import json
from dataclasses import replace
from itertools import combinations
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

import httpx

from ..kafka.admin import describe
from ..kafka.security import ksqldb_http_options
from ..settings import Settings
from ..partitioners import get_partitioner
from ..sql.topology import topology
from .doctor import (DEFAULT_SAMPLE, DoctorError, DoctorReport, JoinedPair, PairDiagnosis, diagnose_reports,
                     examine_topics)
from .drift import LivePlacement, live_message
from .guard import Check, two_sided

#: ksqlDB's REST media type (``/ksql``).
KSQL_MEDIA_TYPE = "application/vnd.ksql.v1+json"
#: The one request that lists ksqlDB's objects with their topics and its queries with their sources.
LISTING = "SHOW QUERIES EXTENDED; SHOW STREAMS; SHOW TABLES;"


def pairs_from_file(path: str) -> list[JoinedPair]:
    """One pair a line, ``left right`` or ``left,right``; ``#`` starts a comment.  An error names the file and line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DoctorError(f"pairs={path}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].replace(",", " ").split()
        if not words:
            continue
        if len(words) != 2:
            raise DoctorError(f"pairs={path}, line {number}: expected two topics ('left right'), got {line.strip()!r}")
        pairs.append(JoinedPair(words[0], words[1], f"file:{number}"))
    return pairs


def pairs_from_worker(settings: Settings) -> list[JoinedPair]:
    """streamapp's own joins (``statements``, else the seed's): each stream-table join's stream and table topics,
    then each table-table and stream-stream join's two topics (the pairs the guard checks, :func:`.guard.joined_pairs`)."""
    joins = topology(settings)
    return ([JoinedPair(join.stream, join.table_topic, f"worker:{join.pair}") for join in joins.joins]
            + [JoinedPair(left, right, f"worker:{join.query.name.lower()}") for _, join, (left, right) in two_sided(joins)])


def pairs_from_listing(entities: Sequence[dict[str, Any]]) -> tuple[list[JoinedPair], int]:
    """The joined pairs in ksqlDB's answer to :data:`LISTING`, and how many persistent queries it lists; pure.

    A query's sources are ksqlDB objects; each is mapped to its topic through the
    streams and tables listings.  Every two sources of one query are a pair, in the
    order ksqlDB lists them.
    """
    topics: dict[str, str] = {}
    queries: list[dict[str, Any]] = []
    for entity in entities:
        for source in [*entity.get("streams", []), *entity.get("tables", [])]:
            topics[str(source["name"]).upper()] = source["topic"]
        queries += entity.get("queryDescriptions", [])
    persistent = [q for q in queries if q.get("queryType", "PERSISTENT") == "PERSISTENT"]
    pairs = []
    for query in persistent:
        names = [str(n).upper() for n in query.get("sources", [])]
        unknown = [n for n in names if n not in topics]
        if unknown:
            raise DoctorError(f"ksqlDB query {query.get('id')}: source {unknown[0]} is in no stream or table listed")
        for left, right in combinations(names, 2):
            pairs.append(JoinedPair(topics[left], topics[right], f"ksqldb:{query.get('id')}"))
    return pairs, len(persistent)


def pairs_from_ksqldb(settings: Settings, timeout: float = 10.0) -> tuple[list[JoinedPair], int]:
    """Ask the ksqlDB server at ``settings.ksqldb_endpoint`` for its persistent queries' joined topics."""
    endpoint = settings.ksqldb_endpoint
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DoctorError(f"ksqldb_endpoint={endpoint!r}: expected http://host:port")
    body = json.dumps({"ksql": LISTING, "streamsProperties": {}})
    headers = {"Accept": KSQL_MEDIA_TYPE, "Content-Type": KSQL_MEDIA_TYPE}
    try:
        with httpx.Client(base_url=endpoint.rstrip("/"), timeout=timeout, **ksqldb_http_options(settings)) as http:
            response = http.post("/ksql", content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise DoctorError(f"ksqlDB at {endpoint} is unreachable: {exc or type(exc).__name__}") from None
    try:
        data = json.loads(response.content or b"null")
    except ValueError:
        data = None
    if response.status_code >= 400 or not isinstance(data, list):
        message = data.get("message") if isinstance(data, dict) else response.text[:200]
        raise DoctorError(f"ksqlDB at {endpoint} refused {LISTING!r} (HTTP {response.status_code}): "
                          f"{str(message).strip()}")
    return pairs_from_listing(data)


def diagnose_worker(settings: Settings, sample: int = DEFAULT_SAMPLE,
                    live: Mapping[str, LivePlacement] | None = None) -> DoctorReport:
    """The doctor's findings for streamapp's own joins alone (what the worker's page shows beside the guard).

    ``live``: what the running worker read (:mod:`.drift`); a joined pair with a topic whose keys it found
    misplaced is broken whatever the samples say, as the guard's partitioner check then is.
    """
    pairs = pairs_from_worker(settings)
    existing = set(describe(settings.kafka, {t for p in pairs for t in (p.left, p.right)}))
    topics = sorted(existing)
    report = diagnose_reports(examine_topics(settings.kafka, topics, sample), pairs, {"worker": f"{len(pairs)} joins"})
    return with_live(report, live or {}, get_partitioner(settings.partitioner).name)


def with_live(report: DoctorReport, live: Mapping[str, LivePlacement], partitioner: str) -> DoctorReport:
    """``report`` with a failed "placement seen by the worker" check on each joined pair of a misplaced topic; pure."""
    def judged(pair: PairDiagnosis) -> PairDiagnosis:
        seen = [live[t] for t in (pair.left, pair.right) if t in live and live[t].misplaced]
        if not pair.joined or not seen:
            return pair
        checks = [Check("placement seen by the worker", False, live_message(fact, partitioner)) for fact in seen]
        return replace(pair, checks=(*pair.checks, *checks))

    return replace(report, pairs=tuple(judged(pair) for pair in report.pairs))
