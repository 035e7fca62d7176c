"""``streamapp topics list | describe | create | delete | add-partitions``: the class notebook's admin client."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Iterable, TextIO

from confluent_kafka import KafkaException, TopicCollection

from rich.table import Table

from ..copartition.fingerprint import fingerprint_topic
from ..copartition.impact import PartitionImpact, add_partitions_impact
from ..kafka.admin import (
    ADMIN_TIMEOUT, TopicError, add_partitions, admin_client, check_new_count, create_topic, delete_topic, describe,
    describe_topic, list_topics,
)
from ..settings import Settings, add_arguments
from .produce import people_console


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("topics", help="list, describe, create, delete topics and add partitions (with impact)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="topics and their partition counts")
    listing.add_argument("--all", action="store_true", help="include internal topics (__...)")
    listing.set_defaults(func=run_list)

    described = actions.add_parser(
        "describe", help="partitions, leaders, replicas, ISR, record counts and the configs set on the topic")
    described.add_argument("topic")
    described.set_defaults(func=run_describe)

    create = actions.add_parser(
        "create", help="create a topic with an explicit partition count (name and configs checked first)")
    create.add_argument("topic")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config, repeatable")
    create.set_defaults(func=run_create)

    delete = actions.add_parser(
        "delete", help="delete topics (their data is gone); asks first, and refuses Kafka's internal topics")
    delete.add_argument("topics", nargs="+", metavar="topic")
    delete.add_argument("--yes", "-y", action="store_true",
                        help="do not ask for confirmation (required when standard input is not a terminal)")
    delete.add_argument("--include-internal", action="store_true",
                        help="also delete Kafka's internal topics (__consumer_offsets: every group's offsets)")
    delete.set_defaults(func=run_delete)

    grow = actions.add_parser("add-partitions", help="print which keys would move, then add partitions")
    grow.add_argument("topic")
    grow.add_argument("--count", type=int, required=True, help="the new total partition count")
    grow.add_argument("--partitioner", default=None,
                      help="the topic's partitioner (default: fingerprinted from the topic's records)")
    grow.add_argument("--dry-run", action="store_true", help="print the impact only")
    grow.set_defaults(func=run_add_partitions)

    for action in (listing, described, create, delete, grow):
        action.add_argument("--json", action="store_true", help="print JSON for programs")
        add_arguments(action, only=("bootstrap_servers",))
    add_arguments(create, only=("partitions", "replication_factor"))


def _emit(args: argparse.Namespace, data: object, line: str, table: Table | None = None) -> None:
    if args.json:
        print(json.dumps(data, indent=2))
        return
    console = people_console()
    console.print(line, markup=False)
    if table is not None:
        console.print(table)


def run_list(args: argparse.Namespace, settings: Settings) -> int:
    topics = list_topics(settings.kafka, include_internal=args.all)
    table = Table("topic", "partitions")
    for topic in topics:
        table.add_row(topic.name, str(topic.partitions))
    _emit(args, [{"name": t.name, "partitions": t.partitions} for t in topics],
          f"{len(topics)} topics on {settings.bootstrap_servers}", table)
    return 0


def run_describe(args: argparse.Namespace, settings: Settings) -> int:
    detail = describe_topic(settings.kafka, args.topic)
    total = sum(p.records for p in detail.partitions)
    table = Table("partition", "leader", "replicas", "ISR", "records")
    for p in detail.partitions:
        table.add_row(str(p.partition), str(p.leader), ",".join(map(str, p.replicas)), ",".join(map(str, p.isr)),
                      str(p.records))
    configs = ", ".join(f"{k}={v}" for k, v in detail.configs.items()) or "broker defaults"
    _emit(args, detail.to_dict(),
          f"{detail.name}: {len(detail.partitions)} partitions, {total} records; configs: {configs}", table)
    return 0


def parse_config(items: list[str]) -> dict[str, str]:
    config = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise TopicError(f"--config {item!r}: expected KEY=VALUE, e.g. cleanup.policy=compact")
        config[name] = value
    return config


def run_create(args: argparse.Namespace, settings: Settings) -> int:
    info = create_topic(settings.kafka, args.topic, settings.partitions, settings.replication_factor,
                        parse_config(args.config))
    _emit(args, {"name": info.name, "partitions": info.partitions},
          f"Created topic {info.name} with {info.partitions} partitions")
    return 0


#: What deleting an internal topic costs, said in the refusal.
INTERNAL_LOSS = ("an internal topic of Kafka (deleting __consumer_offsets loses every group's committed offsets, "
                 "__transaction_state every open transaction)")


def internal_topics(topics: Iterable[str], marked: Iterable[str] = ()) -> list[str]:
    """The topics Kafka keeps for itself: named ``__...`` (as ``kafka-topics --delete`` refuses), or ``marked``
    internal by the broker."""
    marked = set(marked)
    return [topic for topic in topics if topic.startswith("__") or topic in marked]


def refuse_internal(topics: Iterable[str], marked: Iterable[str] = ()) -> None:
    """One line naming the first internal topic and the flag that deletes it anyway."""
    internal = internal_topics(topics, marked)
    if internal:
        raise TopicError(f"topic {internal[0]}: {INTERNAL_LOSS}; nothing deleted (--include-internal deletes it "
                         f"anyway)")


def broker_internal(bootstrap: Any, topics: list[str]) -> set[str]:
    """The topics among ``topics`` that the broker marks internal (a topic it cannot describe is left out)."""
    futures = admin_client(bootstrap).describe_topics(TopicCollection(topics), request_timeout=ADMIN_TIMEOUT)
    marked = set()
    for name, future in futures.items():
        try:
            if future.result(ADMIN_TIMEOUT).is_internal:
                marked.add(name)
        except KafkaException:
            continue
    return marked


def confirmed(question: str, stdin: TextIO, stderr: TextIO) -> bool:
    """Ask on the terminal; only ``y`` or ``yes`` is a yes."""
    stderr.write(f"{question} [y/N] ")
    stderr.flush()
    return stdin.readline().strip().lower() in ("y", "yes")


def run_delete(args: argparse.Namespace, settings: Settings) -> int:
    topics = list(dict.fromkeys(args.topics))
    if not args.include_internal:
        refuse_internal(topics)
    if not args.yes and not sys.stdin.isatty():
        raise TopicError(f"deleting {', '.join(topics)} loses their records: give --yes to confirm (standard input "
                         f"is not a terminal, so there is no one to ask); nothing deleted")
    existing = describe(settings.kafka, topics)
    missing = [topic for topic in topics if topic not in existing]
    if missing:
        raise TopicError(f"topic {missing[0]} does not exist on {settings.bootstrap_servers}; nothing deleted")
    if not args.include_internal:
        refuse_internal(topics, broker_internal(settings.kafka, topics))
    shown = ", ".join(f"{t} ({existing[t].partitions} partitions)" for t in topics)
    if not args.yes and not confirmed(f"Delete {shown} on {settings.bootstrap_servers}? Their records are gone "
                                      f"for good.", sys.stdin, sys.stderr):
        print("Nothing deleted.", file=sys.stderr)
        return 1
    for topic in topics:
        delete_topic(settings.kafka, topic)
    _emit(args, {"deleted": topics}, f"Deleted topics: {', '.join(topics)}")
    return 0


def topic_partitioner(bootstrap: str, topic: str, given: str | None) -> tuple[str, str]:
    """The partitioner to measure with, and how it was chosen (given, or fingerprinted)."""
    if given:
        return given, "given with --partitioner"
    fingerprint = fingerprint_topic(bootstrap, topic)
    if fingerprint.keyed == 0:
        return "murmur2_random", "no keyed records, so no key can move"
    if len(fingerprint.families) == 1:
        return fingerprint.families[0][0], f"fingerprinted: {fingerprint.verdict}"
    raise TopicError(f"cannot tell which partitioner wrote {topic}: {fingerprint.verdict} Give --partitioner NAME.")


#: How many moved keys the people's report names, one a line; ``--json`` names every one.
SHOWN_KEYS = 5


def render_impact(impact: PartitionImpact, how: str) -> str:
    """The impact as people read it: the share that moves, then the first moved keys by name."""
    lines = [
        f"Adding partitions to {impact.topic}: {impact.old_count} -> {impact.new_count} "
        f"(partitioner {impact.partitioner}, {how})",
        f" - Keys that would change partition: {impact.moved} of {impact.keys} ({impact.moved_pct:.2f}%)"
        + (f"; {impact.unscored} keys placed at random not counted" if impact.unscored else "")
        + (", among them:" if impact.moved_keys else ""),
    ]
    lines += [f"     {m.text}: {m.old_partition} -> {m.new_partition}" for m in impact.moved_keys[:SHOWN_KEYS]]
    if impact.moved > SHOWN_KEYS:
        lines.append(f"     and {impact.moved - SHOWN_KEYS} more (--json lists every one)")
    return "\n".join(lines)


def run_add_partitions(args: argparse.Namespace, settings: Settings) -> int:
    bootstrap = settings.kafka
    check_new_count(bootstrap, args.topic, args.count)
    name, how = topic_partitioner(bootstrap, args.topic, args.partitioner)
    impact = add_partitions_impact(bootstrap, args.topic, args.count, name)
    result: dict[str, object] = {"impact": impact.to_dict(), "partitioner_source": how, "applied": False}
    if not args.json:
        people_console().print(render_impact(impact, how), markup=False)
    if args.dry_run:
        if args.json:
            print(json.dumps(result, indent=2))
        return 0
    try:
        info = add_partitions(bootstrap, args.topic, args.count)
    except TopicError as exc:
        if args.json:
            print(json.dumps({**result, "error": str(exc)}, indent=2))
        raise
    result["applied"] = True
    _emit(args, result, f"{info.name} now has {info.partitions} partitions; records already written stay where "
                        f"they are, new records of the moved keys go to their new partitions")
    return 0
