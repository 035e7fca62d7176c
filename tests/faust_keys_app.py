"""A plain Faust app (no streamapp code) for the doctor's tests: it writes users through a Faust Table.

Run as ``faust -A faust_keys_app worker``; the environment says where and how.
On start it sends FAUST_KEYS_COUNT users (u0, u1, ...) to its source topic with
Faust's own producer, its agent puts each into a Table, and Faust writes the
table's changelog (``<app id>-users-changelog``).  FAUST_KEYS_SERIALIZER picks
the keys of the topic and the table: ``json``, a Table's default (str keys), or
``raw``, the doctor's fix (bytes keys: a Table's only way to raw keys).
"""
from __future__ import annotations

import os

import faust

SERIALIZER = os.environ["FAUST_KEYS_SERIALIZER"]
COUNT = int(os.environ["FAUST_KEYS_COUNT"])

app = faust.App(
    os.environ["FAUST_KEYS_APP_ID"],
    broker=f"kafka://{os.environ['FAUST_KEYS_BOOTSTRAP']}",
    store="memory://",
    topic_partitions=int(os.environ["FAUST_KEYS_PARTITIONS"]),
    web_enabled=False,
    datadir=os.environ["FAUST_KEYS_DATADIR"],
)
KEY_TYPE = str if SERIALIZER == "json" else bytes
source = app.topic(os.environ["FAUST_KEYS_SOURCE"], key_type=KEY_TYPE, value_type=bytes,
                   key_serializer=SERIALIZER, value_serializer="raw")
# A Table takes no key_serializer (faust-streaming 0.15: TypeError) and ignores a Schema's: its keys are JSON
# unless its key type is bytes.  So str keys are Faust's default, the case under test; bytes keys the fix.
users = app.Table("users", key_type=KEY_TYPE, value_type=bytes)


@app.agent(source)
async def load(stream: faust.StreamT) -> None:
    async for event in stream.events():
        users[event.key] = event.value


@app.task
async def send_users() -> None:
    for i in range(COUNT):
        key = f"u{i}"
        await source.send(key=key if KEY_TYPE is str else key.encode(), value=b"{}")
