"""Decode each input record; send the ones the worker cannot use to the dead-letter topic, and count them."""
from __future__ import annotations

import logging
from typing import AsyncIterator, Callable, TypeVar

from faust import StreamT
from faust.types import Message

from streamapp.application import settings
from streamapp.counters import counters
from streamapp.dead_letters import DeadLetter
from streamapp.records import RecordError
from streamapp.tables import send_raw

logger = logging.getLogger(__name__)

T = TypeVar("T")


async def send_dead_letter(msg: Message, error: RecordError) -> None:
    letter = DeadLetter(msg.topic, msg.partition, msg.offset, msg.key, msg.value, error.reason, error.field)
    await send_raw(settings.dead_letter_topic, msg.key, msg.value, headers=letter.headers())
    counters.record_dead_letter(msg.topic, msg.partition)
    logger.warning("Dead letter from %s[%d]@%d: %s", msg.topic, msg.partition, msg.offset, error.reason)


async def decoded(
    stream: StreamT, decode: Callable[[bytes | None, bytes | None], T]
) -> AsyncIterator[tuple[Message, T]]:
    """(message, decoded record) for every record ``decode`` accepts; the others become dead letters."""
    async for event in stream.events():
        msg = event.message
        try:
            record = decode(msg.key, msg.value)
        except RecordError as error:
            await send_dead_letter(msg, error)
            continue
        yield msg, record
