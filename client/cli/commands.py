"""The `memstream` command: its arguments, and each command as a call of the HTTP API whose
answer is shown as a table (or, with `--json`, as the API's JSON)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from client.cli.api import Api
from client.cli.config import Config, load_config
from client.cli.errors import EXIT_OTHER, EXIT_USAGE, CliError
from client.cli.tables import (
    aligned,
    cell,
    column_widths,
    fields,
    prose,
    table,
    when,
    wrapped,
)

# How often `tail --follow` asks for new changes.
FOLLOW_INTERVAL_S = 1.0
# The items a review decision looks its id up among: the most the review queue answers.
REVIEW_LOOKUP_LIMIT = 500
# What `review approve|reject` says it decided, by the queue item's kind.
REVIEWED = {"pending_diff": "diff", "draft_merge": "draft merge"}
EXIT_INTERRUPTED = 130
# `tail` prints each change as it comes, so its columns are as wide as their values may be
# (a record id, the longest change kind), not as the rows seen so far; the actor is cut first.
TAIL_HEADERS = ("changed at", "record", "v", "change", "actor")
TAIL_WIDTHS = (19, 28, 3, 10, 20)


class Output:
    """Where a command writes, and how wide a line may be."""

    def __init__(self, out: TextIO, err: TextIO, as_json: bool) -> None:
        self.out, self.err, self.as_json = out, err, as_json
        self.width = shutil.get_terminal_size((100, 24)).columns

    def line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        print(text, file=self.err, flush=True)

    def json(self, value: object, *, compact: bool = False) -> None:
        self.line(json.dumps(value, ensure_ascii=False, indent=None if compact else 2))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]],
              flexible: Sequence[int] = (-1,), texts: Sequence[object] = ()) -> None:
        # Headers over no rows read as a broken answer.
        self.line(table(headers, rows, self.width, flexible, texts) if rows else "(none)")


Command = Callable[[Api, argparse.Namespace, Config, Output], int]


def namespace_of(args: argparse.Namespace, config: Config) -> str:
    if not config.namespace:
        raise CliError(EXIT_USAGE, "no namespace: give -n NAMESPACE, set MEMSTREAM_NAMESPACE "
                                   "or `namespace` in the config file")
    return config.namespace


def one_line(item: dict[str, Any]) -> str:
    """A record's title and text as one line: what a table shows of it."""
    title, text = item.get("title"), item.get("text") or item.get("excerpt") or ""
    return f"{title}: {text}" if title and not str(text).startswith(str(title)) else str(text)


def search(api: Api, args: argparse.Namespace, config: Config, output: Output) -> int:
    answer = api.get("/v1/search", {
        "namespace": namespace_of(args, config), "query": args.query, "agent_id": args.agent,
        "kind": args.kind, "tag": args.tag, "memory_type": args.type, "profile": args.profile,
        "limit": args.limit, "min_score": args.min_score})
    if output.as_json:
        output.json(answer)
        return 0
    hits = answer["hits"]
    output.table(["#", "record", "kind", "relevance"],
                 [(rank, hit["record_id"], hit["kind"], hit["relevance"])
                  for rank, hit in enumerate(hits, 1)], texts=[one_line(hit) for hit in hits])
    note_empty_namespace(answer, output)
    if answer.get("degraded"):
        output.note("degraded: the index is down, these come from Postgres")
    if answer.get("budget_exhausted"):
        output.note(f"the search budget of run {answer.get('run_id')} is spent")
    return 0


def note_empty_namespace(answer: dict[str, Any], output: Output) -> None:
    if answer.get("namespace_holds_records") is False:
        output.note(f"namespace {answer.get('namespace')!r} holds no records: is its name "
                    "spelled right?")


def context(api: Api, args: argparse.Namespace, config: Config, output: Output) -> int:
    answer = api.get("/v1/context", {
        "namespace": namespace_of(args, config), "query": args.query, "agent_id": args.agent,
        "budget_tokens": args.budget, "error": args.error, "run_id": args.run,
        "profile": args.profile})
    if output.as_json:
        output.json(answer)
        return 0
    packed = [(section, item) for section, items in answer.get("sections", {}).items()
              for item in items]
    output.table(["section", "record", "kind", "tokens", "source"],
                 [(section, item["record_id"], item["kind"], item.get("token_cost"),
                   item.get("source")) for section, item in packed],
                 texts=[one_line(item) for _, item in packed])
    note_empty_namespace(answer, output)
    budget = answer.get("budget_tokens")
    output.note(f"{answer.get('tokens', 0)} tokens" + (f" of {budget}" if budget else "")
                + (f"; degraded: {', '.join(answer['degraded'])}"
                   if answer.get("degraded") else ""))
    return 0


def show(api: Api, args: argparse.Namespace, config: Config, output: Output) -> int:
    answer = api.get(f"/v1/records/{args.record_id}",
                     {"namespace": namespace_of(args, config)})
    if output.as_json:
        output.json(answer)
        return 0
    record = answer["record"]
    provenance = record.get("provenance") or {}
    output.line(fields([
        ("record", record["record_id"]), ("kind", record["record_kind"]),
        ("title", record.get("title")), ("version", answer["version"]),
        ("type", record.get("memory_type")), ("scope", record["scope"]),
        ("agent", record.get("agent_id")), ("tags", record.get("tags")),
        ("tier", record.get("tier")), ("review", record.get("review_state")),
        ("trust", record.get("trust_class")), ("source", record.get("source_ref")),
        ("producer", provenance.get("producer")), ("event", provenance.get("event_id")),
        ("created", when(record.get("created_at"))), ("superseded by", answer.get("superseded_by")),
    ], output.width))
    output.line()
    output.line(prose(record["text"], output.width))
    # What each version changed is in its history.
    versions = api.get(f"/v1/records/{args.record_id}/history",
                       {"namespace": namespace_of(args, config)})["versions"]
    if versions:
        output.line()
        versions_table(versions, output)
    if answer.get("supersedes"):
        output.line()
        output.line("supersedes:")
        output.table(["record", "version"],
                     [(m["record_id"], m["version"]) for m in answer["supersedes"]],
                     texts=[one_line(m) for m in answer["supersedes"]])
    if answer.get("members"):
        output.line()
        output.line("merges:")
        output.table(["record", "version", "review", "superseded by"],
                     [(m["record_id"], m["version"], m["review_state"], m["superseded_by"])
                      for m in answer["members"]],
                     texts=[one_line(m) for m in answer["members"]])
    return 0


def history(api: Api, args: argparse.Namespace, config: Config, output: Output) -> int:
    answer = api.get(f"/v1/records/{args.record_id}/history",
                     {"namespace": namespace_of(args, config)})
    if output.as_json:
        output.json(answer)
        return 0
    versions_table(answer["versions"], output)
    return 0


def versions_table(versions: Sequence[dict[str, Any]], output: Output) -> None:
    """A record's versions as its history gives them: what changed in each, by whom and
    why, and its text."""
    output.table(["v", "changed at", "change", "actor", "changed", "reason"],
                 [(v["version"], when(v["changed_at"]), v["change"], v["actor"], v["changed"],
                   v["reason"]) for v in versions], flexible=(3, 4, 5),
                 texts=[v["text"] for v in versions])


def diff(api: Api, args: argparse.Namespace, config: Config, output: Output) -> int:
    answer = api.get(f"/v1/records/{args.record_id}/diff", {
        "namespace": namespace_of(args, config), "from": args.from_version,
        "to": args.to_version})
    if output.as_json:
        output.json(answer)
        return 0
    output.line(f"{answer['record_id']}: version {answer['from']} to {answer['to']}")
    if answer["fields"]:
        output.table(["field", "from", "to"],
                     [(name, change["from"], change["to"])
                      for name, change in answer["fields"].items()], flexible=(1, 2))
    for line in answer["text"]:
        output.line(line)
    if not answer["fields"] and not answer["text"]:
        output.line("no change")
    return 0


def review(api: Api, args: argparse.Namespace, config: Config, output: Output) -> int:
    namespace = namespace_of(args, config)
    if args.decision is None:
        return pending(api, namespace, args, output)
    listed = api.get("/v1/review-queue", {"namespace": namespace,
                                          "limit": REVIEW_LOOKUP_LIMIT})["items"]
    # An item of the queue says how to decide it (a diff names its record or block); any
    # other id, a draft record.
    item = next((i for i in listed if i["id"] == args.target), None)
    body = item["review"][args.decision] if item is not None else {
        "namespace": namespace, "decision": args.decision, "record_id": args.target}
    answer = api.post("/v1/reviews", {**body, **({"note": args.note} if args.note else {})})
    if output.as_json:
        output.json(answer)
    else:
        what = "record" if item is None else REVIEWED[item["kind"]]
        output.line(f"{args.decision} of {what} {args.target} sent "
                    f"(event {answer.get('event_id')})")
    return 0


def pending(api: Api, namespace: str, args: argparse.Namespace, output: Output) -> int:
    answer = api.get("/v1/review-queue", {"namespace": namespace, "record_id": args.record,
                                          "limit": args.limit})
    if output.as_json:
        output.json(answer)
        return 0
    output.table(["kind", "id", "of", "proposer", "proposed at", "what"],
                 [(i["kind"], i["id"], awaiting_of(i), i["proposer"], when(i["proposed_at"]),
                   proposal(i["proposed"]) if i["kind"] == "pending_diff" else one_line(i))
                  for i in answer["items"]])
    return 0


def awaiting_of(item: dict[str, Any]) -> str:
    """What a queue item would change: a diff's record or block, a merge's members."""
    if item["kind"] == "draft_merge":
        return f"merge of {len(item['members'])}"
    return item.get("record_id") or f"block {item['block']['agent_id']}/{item['block']['label']}"


def proposal(proposed: dict[str, Any]) -> str:
    return "; ".join(f"{name}={cell(value)}" for name, value in proposed.items())


def keys(api: Api, args: argparse.Namespace, config: Config, output: Output) -> int:
    if args.action == "create":
        made = api.post("/v1/keys", {
            "namespace": None if args.all_namespaces else namespace_of(args, config),
            "permissions": args.perm, "agent_id": args.agent, "label": args.label})
        if output.as_json:
            output.json(made)
        else:
            output.line(made["token"])
            output.note(f"key {made['key_id']} made; the token above is shown this once")
        return 0
    if args.action == "revoke":
        revoked = api.delete(f"/v1/keys/{args.key_id}")
        if output.as_json:
            output.json(revoked)
        else:
            output.line(f"key {revoked['key_id']} revoked at {revoked['revoked_at']}")
        return 0
    listed = api.get("/v1/keys", {
        "namespace": None if args.all_namespaces else namespace_of(args, config)})
    if output.as_json:
        output.json(listed)
        return 0
    output.table(["key", "namespace", "permissions", "agent", "label", "created", "revoked"],
                 [(k["key_id"], k["namespace"] or "*", k["permissions"], k["agent_id"],
                   k["label"], when(k["created_at"]), when(k["revoked_at"]))
                  for k in listed["keys"]], flexible=(4,))
    return 0


def tail(api: Api, args: argparse.Namespace, config: Config, output: Output) -> int:
    namespace, after = namespace_of(args, config), args.after
    widths = column_widths(TAIL_WIDTHS, output.width, flexible=(4,))
    headed = False
    try:
        while True:
            page = api.get("/v1/changes", {"namespace": namespace, "after": after,
                                           "agent_id": args.agent, "limit": args.limit})
            for change in page["changes"]:
                if output.as_json:
                    output.json(change, compact=True)
                else:
                    if not headed:
                        output.line(aligned(TAIL_HEADERS, widths))
                        headed = True
                    output.line("\n".join(change_lines(change, widths, output.width)))
                # Advanced with each change shown, so that an interrupt resumes after it.
                after = change["cursor"]
            if len(page["changes"]) < args.limit:
                if not args.follow:
                    break
                time.sleep(FOLLOW_INTERVAL_S)
    except KeyboardInterrupt:
        pass  # the way out of --follow
    if after:
        output.note(f"next: memstream tail -n {namespace} --after {after}")
    return 0


def change_lines(change: dict[str, Any], widths: Sequence[int], width: int) -> list[str]:
    """A change in the columns of `TAIL_HEADERS`, its title and text under it."""
    return [aligned([cell(value) for value in (
        when(change["changed_at"]), change["record_id"], change["version"], change["change"],
        change["actor"])], widths), *wrapped(one_line(change), width)]


def dead_letters(api: Api, args: argparse.Namespace, config: Config, output: Output) -> int:
    answer = api.get("/v1/dead-letters", {
        "namespace": None if args.all_namespaces else config.namespace,
        "reason": args.reason, "limit": args.limit, "before": args.before})
    if output.as_json:
        output.json(answer)
        return 0
    listed = answer["dead_letters"]
    # Time, topic and reason are never cut; the key and the bytes share what is left of 80
    # columns.
    output.table(["time", "topic", "reason", "key", "bytes"],
                 [(when(d["dead_lettered_at"]), d["source"]["topic"] or d["dlq"]["topic"],
                   d["reason"], d["key"], d["first_bytes"]) for d in listed], flexible=(3, 4))
    output.note(f"{len(listed)} of {answer['total']} dead letters"
                + (f"; older ones: --before {answer['next']}" if answer.get("next") else ""))
    return 0


COMMANDS: dict[str, Command] = {
    "search": search, "context": context, "show": show, "history": history, "diff": diff,
    "review": review, "keys": keys, "tail": tail,
    "dead-letters": dead_letters,
}


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a flag given after the command overrides the one before it, if any.
    common.add_argument("--url", default=argparse.SUPPRESS,
                        help="the worker's HTTP API (MEMSTREAM_URL; http://127.0.0.1:6066)")
    common.add_argument("-n", "--namespace", default=argparse.SUPPRESS,
                        help="the namespace (MEMSTREAM_NAMESPACE, or the config file's)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="the API's JSON instead of a table")
    main_parser = argparse.ArgumentParser(
        prog="memstream", parents=[common],
        description="Search and keep the memories of a memstream worker. The key comes from "
                    "MEMSTREAM_API_KEY or `key` in the config file ($MEMSTREAM_CONFIG, else "
                    "~/.config/memstream/config.toml).")
    commands = main_parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str,
                parent: Any = commands) -> argparse.ArgumentParser:
        made: argparse.ArgumentParser = parent.add_parser(name, parents=[common],
                                                          help=help_text, description=help_text)
        return made

    found = command("search", "hybrid search of a namespace's records")
    found.add_argument("query")
    found.add_argument("--agent", help="whose personal memories to include (admin keys)")
    found.add_argument("--kind", action="append", help="memory, run_digest, fix_pattern")
    found.add_argument("--tag", action="append")
    found.add_argument("--type", help="memory type (fact, decision, lesson, …)")
    found.add_argument("--profile", help="default, planning, incident, handoff")
    found.add_argument("--min-score", type=float)
    found.add_argument("--limit", type=int)

    pack = command("context", "the context pack for a task: history, then long-term memories")
    pack.add_argument("query")
    pack.add_argument("--agent")
    pack.add_argument("--budget", type=int, help="token budget")
    pack.add_argument("--error", help="an error text: the fix patterns of its signature")
    pack.add_argument("--run", help="a run id: the errors it met, and its search budget")
    pack.add_argument("--profile")

    for name, help_text in (("show", "one record: text, provenance, versions, lineage"),
                            ("history", "every version of a record")):
        command(name, help_text).add_argument("record_id")
    changes = command("diff", "what changed between two versions of a record")
    changes.add_argument("record_id")
    changes.add_argument("--from", dest="from_version", type=int)
    changes.add_argument("--to", dest="to_version", type=int)

    reviews = command("review", "list what awaits review (pending diffs, draft merges), or "
                                "approve or reject one (or a draft)")
    reviews.add_argument("--record", help="what awaits review of this record only")
    reviews.add_argument("--limit", type=int)
    decisions = reviews.add_subparsers(dest="decision", metavar="approve|reject")
    for decision in ("approve", "reject"):
        decided = command(decision, f"{decision} a pending diff, a draft merge or a draft record",
                          decisions)
        decided.add_argument("target", metavar="ID")
        decided.add_argument("--note")

    key_commands = command("keys", "API keys: list, create, revoke").add_subparsers(
        dest="action", required=True, metavar="list|create|revoke")
    for name in ("list", "create"):
        key_command = command(name, f"{name} the keys of the namespace", key_commands)
        key_command.add_argument("--all-namespaces", action="store_true",
                                 help="every namespace (an operator's key)")
        if name == "create":
            key_command.add_argument("--perm", required=True,
                                     help="read, write, review, admin (comma-separated)")
            key_command.add_argument("--agent", help="bind the key to this agent")
            key_command.add_argument("--label", default="")
    command("revoke", "revoke a key", key_commands).add_argument("key_id")

    follow = command("tail", "the namespace's changes, oldest first, after a cursor")
    follow.add_argument("--after", help="the cursor a previous tail printed")
    follow.add_argument("-f", "--follow", action="store_true",
                        help="keep printing new changes until Ctrl-C")
    follow.add_argument("--agent")
    follow.add_argument("--limit", type=int, default=100, help="changes asked per request")

    dead = command("dead-letters", "events no stage could use, newest first (admin keys)")
    dead.add_argument("--all-namespaces", action="store_true",
                      help="every namespace's, and those of none (an operator's key)")
    dead.add_argument("--reason", action="append", help="of this reason only (repeatable)")
    dead.add_argument("--limit", type=int, help="at most this many (50; at most 500)")
    dead.add_argument("--before", help="the cursor a previous listing printed: older ones")
    return main_parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = parser().parse_args(argv)
    output = Output(out, err, getattr(args, "json", False))
    try:
        config = load_config(os.environ, url=getattr(args, "url", None),
                             namespace=getattr(args, "namespace", None))
        api = Api(config.url, config.key)
        try:
            return COMMANDS[args.command](api, args, config, output)
        finally:
            api.close()
    except CliError as exc:
        print(f"memstream: {exc}", file=err)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader (`| head`) left: nothing more to say, and nothing to flush to it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (KeyError, TypeError) as exc:
        print(f"memstream: unexpected answer from the worker ({type(exc).__name__}: {exc})",
              file=err)
        return EXIT_OTHER
