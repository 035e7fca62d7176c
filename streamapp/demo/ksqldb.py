"""ksqlDB REST client (httpx): the declared statements (the seed's by default), the stream's records, push queries.

``/info``, ``/ksql`` (DDL) and ``/query`` (chunked push queries) are HTTP/1.1;
the orders go in one ``/inserts-stream`` request, which ksqlDB serves over HTTP/2
only.  Statement building and response parsing are pure and tested on their own;
the client is tested against recorded ksqlDB responses replayed by a local server.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

import httpx

from ..errors import StreamappError
from ..settings import Settings
from ..sql.syntax import parse
from ..sql.topology import seed_text, topology

CONTENT_TYPE = "application/vnd.ksql.v1+json"
#: The streaming endpoints' format: one JSON document a line.
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
#: Reads must start at the beginning of the demo's topics and see every update at once.
STREAMS_PROPERTIES = {
    "ksql.streams.auto.offset.reset": "earliest",
    "ksql.streams.cache.max.bytes.buffering": "0",
}


class KsqlDBError(StreamappError):
    """ksqlDB refused a request or could not be reached; carries its error code and message."""

    def __init__(self, message: str, status: int | None = None, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


@dataclass(frozen=True)
class CommandResult:
    statement: str
    status: str
    message: str
    command_sequence_number: int | None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class QueryResult:
    query_id: str
    columns: list[str]
    rows: list[list[Any]]
    final_message: str | None


def object_name(topic: str) -> str:
    """A ksqlDB identifier for a topic: upper case, anything but letters, digits and _ replaced."""
    return re.sub(r"[^A-Z0-9_]", "_", topic.upper())


#: A single-quoted SQL string (``''`` is a quote inside it): the statements' text is rewritten outside these only.
_QUOTED = re.compile(r"('(?:[^']|'')*')")
_TOPIC_PROPERTY = re.compile(r"(?i)\bkafka_topic\s*=\s*$")


def ksqldb_names(settings: Settings) -> dict[str, str]:
    """Each declared source's name on ksqlDB: the seed's are named after their topics (so a renamed topic is a new
    object, never one an earlier run created over another topic); a statements file's as declared."""
    topics = topology(settings).ksqldb_topics
    return {name: name if settings.statements else object_name(topic) for name, topic in topics.items()}


def _rewrite(text: str, names: dict[str, str], topics: dict[str, str]) -> str:
    """``text`` with each source renamed (outside quotes) and each ``KAFKA_TOPIC='...'`` pointed at its topic,
    on one line."""
    renamed = {old.upper(): new for old, new in names.items() if old != new}
    pattern = re.compile(r"(?i)\b(" + "|".join(map(re.escape, sorted(renamed, key=len, reverse=True))) + r")\b"
                         ) if renamed else None
    parts = _QUOTED.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = " ".join(parts[i].split())
        if pattern is not None:
            parts[i] = pattern.sub(lambda m: renamed[m.group(1).upper()], parts[i])
    for i in range(1, len(parts), 2):
        literal = parts[i][1:-1].replace("''", "'")
        if _TOPIC_PROPERTY.search(parts[i - 1]) and literal in topics:
            parts[i] = "'" + topics[literal].replace("'", "''") + "'"
    return "".join(parts)


def ksqldb_statements(settings: Settings) -> list[str]:
    """The declared statements (``settings.statements``, else the seed's, as shipped) as ksqlDB gets them, in
    order: each on one line, its sources named by :func:`ksqldb_names`, its topics the settings' (the seed topic
    settings rename the seed's)."""
    joins = topology(settings)
    names = ksqldb_names(settings)
    topics = {joins.declared.source(name).topic: topic for name, topic in joins.ksqldb_topics.items()}
    text = Path(settings.statements).read_text(encoding="utf-8") if settings.statements else seed_text()
    return [_rewrite(statement.text, names, topics) + ";" for statement in parse(text)]


def schema_columns(schema: str) -> list[str]:
    """Column names from a ``/query`` header schema such as ```USER_ID` STRING KEY, `NAME` STRING``."""
    names, depth, part = [], 0, ""
    for char in schema + ",":
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            found = re.match(r"\s*`((?:[^`]|``)+)`", part)
            if found:
                names.append(found.group(1))
            part = ""
        else:
            part += char
    return names


def parse_query_lines(lines: Sequence[str]) -> QueryResult:
    """A ``/query`` body, one JSON element per line of the streamed array (a cut-off tail is fine)."""
    query_id, columns, rows, final = "", [], [], None
    for raw in lines:
        text = raw.strip().lstrip("[").rstrip("]").rstrip(",").strip()
        if not text:
            continue
        try:
            item = json.loads(text)
        except ValueError:
            continue
        if "header" in item:
            query_id = item["header"].get("queryId", "")
            columns = schema_columns(item["header"].get("schema", ""))
        elif item.get("row"):
            rows.append(item["row"]["columns"])
        elif item.get("errorMessage"):
            error = item["errorMessage"]
            message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
            raise KsqlDBError(f"ksqlDB push query failed: {message}", error_code=_code(error))
        elif item.get("finalMessage"):
            final = item["finalMessage"]
    return QueryResult(query_id, columns, rows, final)


def _code(error: object) -> int | None:
    return error.get("error_code") if isinstance(error, dict) else None


def error_from_response(status: int, body: bytes, what: str) -> KsqlDBError:
    """ksqlDB's error shape ``{"@type", "error_code", "message"}`` as one line for people."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        data = {"message": body.decode("utf-8", "replace")[:200]}
    if isinstance(data, list) and data:
        data = data[0]
    message = data.get("message") or f"HTTP {status}"
    code = data.get("error_code")
    statement = data.get("statementText")
    text = f"ksqlDB rejected {what} (HTTP {status}, error {code}): {message.strip()}"
    if statement:
        text += f" [statement: {statement.strip()}]"
    text += "; check ksqldb_username and ksqldb_password" if status == 401 else ""
    return KsqlDBError(text, status=status, error_code=code)


class KsqlDBClient:
    """One ksqlDB server's REST API over httpx: ``/info``, ``/ksql`` and ``/query`` on HTTP/1.1, ``/inserts-stream`` on HTTP/2.

    Connections are kept and reused; close the client, or use it as a context manager.
    """

    def __init__(self, endpoint: str, timeout: float = 10.0, **http: Any) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise KsqlDBError(f"ksqldb_endpoint={endpoint!r}: expected http://host:port")
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self._http = httpx.Client(base_url=self.endpoint, timeout=timeout, **http,  # auth, verify: ksqldb_http_options
                                  headers={"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE})
        # The streaming endpoints are HTTP/2 only; on http:// that is HTTP/2 with prior knowledge (h2c).
        self._http2 = httpx.Client(base_url=self.endpoint, timeout=timeout, http1=False, http2=True, **http,
                                   headers={"Accept": DELIMITED, "Content-Type": DELIMITED})

    def close(self) -> None:
        self._http.close()
        self._http2.close()

    def __enter__(self) -> "KsqlDBClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unreachable(self, what: str, exc: Exception) -> KsqlDBError:
        hint = "; check ksqldb_cafile" if "CERTIFICATE_VERIFY_FAILED" in str(exc) else ""
        return KsqlDBError(f"ksqlDB at {self.endpoint} is unreachable ({what}): {exc or type(exc).__name__}{hint}")

    def _request(self, method: str, path: str, body: dict[str, Any] | None, what: str) -> Any:
        try:
            response = self._http.request(method, path, content=None if body is None else json.dumps(body))
        except httpx.HTTPError as exc:
            raise self._unreachable(what, exc) from None
        if response.status_code >= 400:
            raise error_from_response(response.status_code, response.content, what)
        return json.loads(response.content or b"null")

    def info(self) -> dict[str, Any]:
        """``GET /info``: the server's version, Kafka cluster id and status."""
        return self._request("GET", "/info", None, "GET /info")["KsqlServerInfo"]

    def execute(self, statement: str, after: int | None = None) -> list[CommandResult]:
        """Run statements on ``/ksql``; ``after`` waits for that command sequence number first."""
        body: dict[str, Any] = {"ksql": statement, "streamsProperties": STREAMS_PROPERTIES}
        if after is not None:
            body["commandSequenceNumber"] = after
        results = []
        for entity in self._request("POST", "/ksql", body, statement.split("(")[0].strip()) or []:
            status = entity.get("commandStatus") or {}
            if status.get("status") == "ERROR":
                raise KsqlDBError(f"ksqlDB failed {entity.get('statementText', statement)}: {status.get('message')}")
            results.append(CommandResult(
                statement=entity.get("statementText", statement),
                status=status.get("status", entity.get("@type", "")),
                message=status.get("message", ""),
                command_sequence_number=entity.get("commandSequenceNumber"),
                warnings=[w.get("message", str(w)) for w in entity.get("warnings", [])],
            ))
        return results

    def execute_all(self, statements: Sequence[str]) -> list[CommandResult]:
        """Run statements one by one, each after the previous one's command has been applied."""
        results: list[CommandResult] = []
        after = None
        for statement in statements:
            done = self.execute(statement, after)
            results.extend(done)
            numbers = [r.command_sequence_number for r in done if r.command_sequence_number is not None]
            after = max(numbers) if numbers else after
        return results

    def insert_rows(self, stream: str, rows: Sequence[Mapping[str, object]]) -> int:
        """Every row into ``stream`` in one ``/inserts-stream`` request; returns how many ksqlDB acked.

        The body is the target, then one JSON row a line (column names upper case);
        ksqlDB acks each row once it is written, in any order, or answers an error
        naming the row by its sequence number.  Anything short of an ack for every
        row is an error naming what was acked.
        """
        what = f"inserts into {stream}"
        lines = [json.dumps({"target": stream}), *(json.dumps({k.upper(): v for k, v in row.items()}) for row in rows)]
        acked: set[int] = set()
        try:
            with self._http2.stream("POST", "/inserts-stream", content="".join(f"{line}\n" for line in lines)) as response:
                if response.status_code >= 400:
                    raise error_from_response(response.status_code, response.read(), what)
                for line in response.iter_lines():
                    if line.strip():
                        acked.add(_ack(json.loads(line), stream))
        except httpx.HTTPError as exc:
            raise self._unreachable(what, exc) from None
        if len(acked) != len(rows):
            raise KsqlDBError(f"ksqlDB acked {len(acked)} of the {len(rows)} rows inserted into {stream}")
        return len(acked)

    def query(self, sql: str, timeout: float = 10.0) -> QueryResult:
        """A push query on ``/query``, read until ksqlDB ends it (``LIMIT``) or ``timeout`` passes."""
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        body = json.dumps({"ksql": sql, "streamsProperties": STREAMS_PROPERTIES})
        try:
            with self._http.stream("POST", "/query", content=body, timeout=timeout) as response:
                if response.status_code >= 400:
                    raise error_from_response(response.status_code, response.read(), sql)
                for line in response.iter_lines():
                    lines.append(line)
                    if time.monotonic() >= deadline:
                        break
        except httpx.TimeoutException:
            pass  # an open push query: what arrived within the timeout is the answer
        except httpx.HTTPError as exc:
            raise self._unreachable("push query", exc) from None
        return parse_query_lines(lines)


def _ack(ack: dict[str, Any], stream: str) -> int:
    """The sequence number of an ``/inserts-stream`` ack; an error ack is a :class:`KsqlDBError`."""
    if ack.get("status") != "ok":
        code = ack.get("error_code", ack.get("errorCode"))
        raise KsqlDBError(f"ksqlDB refused row {ack.get('seq')} of the inserts into {stream} (error {code}): "
                          f"{str(ack.get('message', ack)).strip()}", error_code=code)
    return int(ack["seq"])
