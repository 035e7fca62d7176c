"""The reference pages that come from the code: every setting, and every command and option.

mkdocs-gen-files runs this file at each build (``plugins: gen-files`` in mkdocs.yml), so the
pages cannot drift from ``streamapp/settings.py`` and the argparse parsers.  ``tests/test_docs.py``
imports it to check that no setting and no flag lacks a description.
"""
from __future__ import annotations

import argparse
import html
from dataclasses import Field, fields
from typing import Iterator

from spark_batch.options import build_parser as reconcile_parser
from streamapp.cli import build_commands, command_parsers, settings_commands
from streamapp.settings import FILE_SUFFIX, SECRETS, Settings, env_name

SETTINGS_PAGE = "reference/settings.md"
CLI_PAGE = "reference/cli.md"
RECONCILE = "python -m spark_batch.reconcile"

#: How the settings page groups them; a setting in no group is listed under "Other settings".
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Kafka", ("bootstrap_servers", "broker_session_timeout", "broker_heap")),
    ("Secured clusters", ("security_protocol", "sasl_mechanism", "sasl_username", "sasl_password", "ssl_cafile",
                          "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")),
    ("Joins", ("statements", "output_prefix", "partitioner", "partitions", "replication_factor", "dead_letter_topic",
               "app_id", "data_dir", "processing_guarantee", "guard_policy")),
    ("The seed's topics (the demo)", ("users_topic", "orders_topic", "users_repartition_topic", "merged_topic",
                                      "merged_repartition_topic", "ksqldb_users_repartition_topic",
                                      "ksqldb_merged_topic", "ksqldb_merged_repartition_topic")),
    ("Web server", ("web_host", "web_port", "web_token", "web_table_blueprint")),
    ("Health", ("kafka_unreachable_timeout", "kafka_unreachable_exit", "output_failure_exit", "stop_timeout")),
    ("ksqlDB", ("ksqldb_endpoint", "ksqldb_username", "ksqldb_password", "ksqldb_cafile")),
)


def inline(text: str) -> str:
    """Text from the code as Markdown: ``<topic>`` and ``|`` escaped outside code spans."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = html.escape(parts[i], quote=False).replace("|", "\\|").replace("*", "\\*")
    return "`".join(parts)


def grouped() -> Iterator[tuple[str, list[Field]]]:
    by_name = {f.name: f for f in fields(Settings)}
    placed: set[str] = set()
    for title, names in GROUPS:
        found = [by_name[n] for n in names if n in by_name]
        placed.update(n for n in names if n in by_name)
        if found:
            yield title, found
    rest = [f for f in fields(Settings) if f.name not in placed]
    if rest:
        yield "Other settings", rest


def default_of(f: Field) -> str:
    return "empty" if f.default == "" else f"`{f.default}`"


def settings_page() -> str:
    commands = settings_commands()
    out = [
        "# Settings",
        "",
        "Every setting lives in `streamapp/settings.py`; this page is generated from it at each build.",
        "",
        "- Each setting is read from its environment variable, `STREAMAPP_` and its name in capitals.",
        "- A `streamapp` command that takes the setting's flag overrides the environment.",
        "- The worker (`faust -A streamapp worker`) reads the environment only: Faust owns its command line.",
        "- A secret (a password) is read from the environment or from a file. It is never a flag and never shown.",
        "- A value the worker or Kafka cannot use stops the worker at start, in one line naming the setting.",
        "  Examples: a replication factor below 1, a session timeout of 0 or less, an address that is not",
        "  this machine's, a web port in use, a data directory that is a file.",
        "",
        "| setting | environment variable | default |",
        "|---|---|---|",
    ]
    for f in fields(Settings):
        out.append(f"| [{f.name}](#{f.name}) | `{env_name(f.name)}` | {default_of(f)} |")
    for title, found in grouped():
        out += ["", f"## {title}"]
        for f in found:
            takers = commands.get(f.name, ())
            if f.name in SECRETS:
                variable = f"`{env_name(f.name)}`, or the file `{env_name(f.name)}{FILE_SUFFIX}` names"
                flag = "none: a secret is never a flag"
            else:
                variable = f"`{env_name(f.name)}`"
                flag = (f"`--{f.name.replace('_', '-')}` on " + ", ".join(f"[{c}](cli.md#{c.replace(' ', '-')})" for c in takers)
                        if takers else "none: environment only")
            type_name = getattr(f.type, "__name__", f.type)
            out += [
                "", f"### {f.name} {{#{f.name}}}", "",
                inline(f.metadata.get("doc", "")), "",
                f"- Environment: {variable}",
                f"- Flag: {flag}",
                f"- Type: {type_name}; default: {default_of(f)}",
            ]
    return "\n".join(out) + "\n"


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str | None, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command of ``parser``."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            found += [(name, helps.get(name), sub) for name, sub in action.choices.items()]
    return found


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and a.help != argparse.SUPPRESS]


def help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    return parser._get_formatter()._expand_help(action) if action.help else ""


def option_default(action: argparse.Action) -> str:
    """The default column: blank for a flag, an empty default, or one the help itself states (a default worked
    out when the command runs, such as this host's name, is the reader's, not the build machine's)."""
    if (isinstance(action, (argparse._StoreConstAction, argparse._StoreTrueAction, argparse._StoreFalseAction))
            or "default" in (action.help or "")):
        return ""
    if action.default is None and action.dest in {f.name for f in fields(Settings)}:
        return f"the setting [{action.dest}](settings.md#{action.dest})"
    if action.default is None or action.default is False or action.default in ("", argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def option_name(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    metavar = "" if action.nargs == 0 else " " + (action.metavar or action.dest.upper())
    return ", ".join(f"`{o}{metavar}`" for o in action.option_strings)


def command_section(level: int, title: str, anchor: str, summary: str | None,
                    parser: argparse.ArgumentParser) -> list[str]:
    out = ["", f"{'#' * level} {title} {{#{anchor}}}", ""]
    if summary:
        out += [inline(summary[0].upper() + summary[1:]) + ".", ""]
    if parser.description:
        out += [inline(parser.description), ""]
    usage = parser.format_usage().removeprefix("usage: ").rstrip().splitlines()
    out += ["```text", *usage[:1], *(line[len("usage: "):] for line in usage[1:]), "```"]
    rows = options(parser)
    if rows:
        out += ["", "| option | default | what it does |", "|---|---|---|"]
        for action in rows:
            text = inline(help_of(parser, action).rstrip()) or "(no description)"
            if action.choices:
                text += ("" if text.endswith(".") else ".") + f" One of {', '.join(f'`{c}`' for c in action.choices)}."
            out.append(f"| {option_name(action)} | {option_default(action)} | {text} |")
    for name, helped, sub in subcommands(parser):
        out += command_section(level + 1, f"{title} {name}", f"{anchor}-{name}", helped, sub)
    return out


def cli_page() -> str:
    parser, _ = build_commands()
    out = [
        "# Commands",
        "",
        "Generated at each build from the argparse parsers (`streamapp.cli.build_commands()` and",
        "`spark_batch/options.py`). Every command prints one line and exits 2 on a bad option:",
        "see [Exit codes](exit-codes.md).",
        "",
        "- `streamapp COMMAND`: the command-line tool, one sub-command per task (below).",
        "- `faust -A streamapp worker -l info`: the worker. Faust owns its command line,",
        "  so the worker reads [settings](settings.md) from the environment only.",
        "- `python -m spark_batch.reconcile`: the nightly reconciliation (also `spark-submit spark_batch/reconcile.py`).",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name, helped, _sub in subcommands(parser):
        out.append(f"| [streamapp {name}](#{name}) | {inline(helped or '')} |")
    out.append("| [python -m spark_batch.reconcile](#reconcile) | the nightly reconciliation of the worker's join "
               "against ksqlDB's |")
    for name, helped, sub in subcommands(parser):
        out += command_section(2, f"streamapp {name}", name, helped, sub)
    out += command_section(2, RECONCILE, "reconcile", None, reconcile())
    return "\n".join(out) + "\n"


def reconcile() -> argparse.ArgumentParser:
    """The reconciliation job's parser, with the defaults of the code (not of this machine's environment)."""
    parser = reconcile_parser(Settings())
    parser.prog = RECONCILE
    return parser


def all_parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield "streamapp", build_commands()[0]
    for name, parser in command_parsers().items():
        yield f"streamapp {name}", parser
    yield RECONCILE, reconcile()


def undocumented() -> list[str]:
    """Every setting and every flag without a description, as ``where: what``; empty when all have one."""
    missing = [f"setting {f.name}" for f in fields(Settings) if not str(f.metadata.get("doc", "")).strip()]
    for where, parser in all_parsers():
        for action in options(parser):
            if action.option_strings and not help_of(parser, action).strip():
                missing.append(f"{where} {'/'.join(action.option_strings)}")
        for name, helped, _ in subcommands(parser):
            if not (helped or "").strip():
                missing.append(f"{where} {name} (the sub-command's one-line help)")
    return missing


PAGES = {SETTINGS_PAGE: settings_page, CLI_PAGE: cli_page}


def write() -> None:
    import mkdocs_gen_files

    for path, page in PAGES.items():
        with mkdocs_gen_files.open(path, "w") as out:
            out.write(page())
        mkdocs_gen_files.set_edit_path(path, "docs/gen_reference.py")


if __name__ in ("<run_path>", "__main__"):  # mkdocs-gen-files runs it with runpy.run_path
    write()
