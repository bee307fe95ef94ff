"""The `memstream` command: its arguments, and each command as a call of the SDK
(memstream_client/sdk) whose answer is shown as a table (or, with `--json`, as the API's JSON).

A write (a review) waits, as the SDK's writes do, for the worker to decide it, and shows what
became of it; `outcome` reads that of any write by its event id, later."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from memstream_client.answers.gaps import GapGroup
from memstream_client.answers.recall import (
    ContextPack,
    ListPlace,
    MemorySummary,
    SearchAnswer,
    SearchHit,
)
from memstream_client.answers.records import Change, RecordVersion
from memstream_client.answers.review import ReviewItem
from memstream_client.answers.writes import WriteOutcome
from memstream_client.cli.docs import local_documents
from memstream_client.cli.errors import EXIT_NOT_FOUND, EXIT_OTHER, EXIT_USAGE, CliError, failure_of
from memstream_client.cli.tables import (
    aligned,
    cell,
    column_widths,
    fields,
    prose,
    table,
    when,
    wrapped,
)
from memstream_client.documents import content_hash
from memstream_client.redaction import redact_secrets
from memstream_client.sdk import Config, MemoryClient, MemstreamError, UnexpectedAnswer
from memstream_client.sdk.outcomes import note, subject

# How often `tail --follow` asks for new changes.
FOLLOW_INTERVAL_S = 1.0
# The items a review decision looks its id up among: the most the review queue answers.
REVIEW_LOOKUP_LIMIT = 500
# The outcomes of a write that changed nothing: refused as not worth keeping, or
# dead-lettered (a review of what is no longer pending, of a stale version).
NOT_APPLIED = frozenset({"refused", "dead_lettered"})
# What `review approve|reject` says it decided, by the queue item's kind.
REVIEWED = {"pending_diff": "diff", "draft_merge": "draft merge",
            "proposed_lesson": "proposed lesson"}
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


Command = Callable[[MemoryClient, argparse.Namespace, Config, Output], int]


def namespace_of(args: argparse.Namespace, config: Config) -> str:
    if not config.namespace:
        raise CliError(EXIT_USAGE, "no namespace: give -n NAMESPACE, set MEMSTREAM_NAMESPACE "
                                   "or `namespace` in the config file")
    return config.namespace


def one_line(item: Mapping[str, Any]) -> str:
    """A record's title and text, as an answer gives them, as one line: what a table shows
    of it."""
    title, text = item.get("title"), item.get("text") or item.get("excerpt") or ""
    return f"{title}: {text}" if title and not str(text).startswith(str(title)) else str(text)


def search(client: MemoryClient, args: argparse.Namespace, config: Config,
           output: Output) -> int:
    answer = client.search(
        args.query, namespace=namespace_of(args, config), agent_id=args.agent, kind=args.kind,
        tag=args.tag, memory_type=args.type, profile=args.profile, limit=args.limit,
        min_score=args.min_score, explain=args.explain, repo=args.repo,
        security_scope=args.security_scope, as_of=args.as_of,
        min_confidence=args.min_confidence, expand=args.expand)
    if output.as_json:
        output.json(answer.raw)
        return 0
    hits = answer.hits
    if args.explain:
        output.table(["#", "record", "ranks", "fused", "weight", "adapt", "blend", "score"],
                     [explained_row(rank, hit) for rank, hit in enumerate(hits, 1)],
                     texts=[one_line(hit.raw) for hit in hits])
    else:
        output.table(["#", "record", "kind", "relevance"],
                     [(rank, hit.record_id, hit.kind, hit.relevance)
                      for rank, hit in enumerate(hits, 1)],
                     texts=[hit_line(hit) for hit in hits])
    note_empty_namespace(answer, output)
    if answer.degraded:
        output.note("degraded: the index is down, these come from Postgres")
    if answer.budget_exhausted:
        output.note(f"the search budget of run {answer.run_id} is spent")
    return 0

def hit_line(hit: SearchHit) -> str:
    """A hit's line: its text, and for one a hit's links reached, from which hit; for one
    out of force (asked as of an earlier moment), what superseded it; for one a newer memory
    contests pending review, by which."""
    line = one_line(hit.raw)
    if hit.contested is not None:
        line = f"(contested by {hit.contested.newer}, pending review) {line}"
    if hit.via is not None:
        line = f"(via {hit.via.from_}, {hit.via.hops} hop{'s' * (hit.via.hops > 1)}) {line}"
    if hit.invalidated_by is not None:
        until = f" on {hit.valid_until.date().isoformat()}" if hit.valid_until else ""
        line = f"(superseded by {hit.invalidated_by}{until}) {line}"
    return line


def narrowed_by_keys(parser: argparse.ArgumentParser) -> None:
    """Seed 002's keys as options of a read: a repo (its records and the namespace-wide
    ones) and security scopes."""
    parser.add_argument("--repo", action="append",
                        help="only this repo's records and those of no repo (repeatable)")
    parser.add_argument("--security-scope", action="append",
                        help="only records labelled with this security scope (repeatable)")


def viewed_from(parser: argparse.ArgumentParser) -> None:
    """A read's viewpoint: memory as of a moment, the confidence records need, the hops
    followed from the best hits."""
    parser.add_argument("--as-of", metavar="TIME",
                        help="memory as it stood then (ISO 8601: 2026-11-01 or "
                             "2026-11-01T09:30Z)")
    parser.add_argument("--min-confidence", type=float,
                        help="only records memory is at least this sure of (0 to 1; by "
                             "default each tier's threshold)")
    parser.add_argument("--expand", type=int, metavar="HOPS",
                        help="follow the best hits' links and shared entities this many hops "
                             "(0 to 3)")


def explained_row(rank: int, hit: SearchHit) -> tuple[object, ...]:
    """A hit's row of `search --explain`, narrow enough for 80 columns: its rank in the dense
    and lexical lists (- when not in one), the fused score, the profile's weight, the agent's
    adaptive score (- without one), the blend, and the score they make."""
    why = hit.explain
    if why is None:
        raise UnexpectedAnswer(f"hit {hit.record_id} came without the explanation asked for")

    def rank_in(place: ListPlace) -> str:
        return "-" if place.rank is None else str(place.rank)

    return (rank, hit.record_id, f"{rank_in(why.dense)}/{rank_in(why.lexical)}", why.fused,
            why.profile_weight, "-" if why.adaptive is None else why.adaptive.score,
            why.blend_factor, why.score)


def note_empty_namespace(answer: SearchAnswer | ContextPack | MemorySummary,
                         output: Output) -> None:
    if answer.namespace_holds_records is False:
        output.note(f"namespace {answer.namespace!r} holds no records: is its name "
                    "spelled right?")


def context(client: MemoryClient, args: argparse.Namespace, config: Config,
            output: Output) -> int:
    answer = client.context(
        args.query, namespace=namespace_of(args, config), agent_id=args.agent,
        budget_tokens=args.budget, error=args.error, run_id=args.run, profile=args.profile,
        repo=args.repo, security_scope=args.security_scope, as_of=args.as_of,
        min_confidence=args.min_confidence, expand=args.expand)
    if output.as_json:
        output.json(answer.raw)
        return 0
    packed = [(section, item) for section, items in answer.sections.items()
              for item in items]
    blocks = answer.core.blocks if answer.core else []
    output.table(["section", "record", "kind", "tokens", "source"],
                 [("core", block.label, "block", block.token_cost,
                   f"block:{block.label} v{block.version}") for block in blocks]
                 + [(section, item.record_id, item.kind, item.token_cost, item.source)
                    for section, item in packed],
                 texts=[block.text.replace("\n", " ") for block in blocks]
                 + [one_line(item.raw) for _, item in packed])
    note_core(answer, output)
    note_empty_namespace(answer, output)
    for line in answer.notes:
        output.note(line)
    budget = answer.budget_tokens
    output.note(f"{answer.tokens} tokens" + (f" of {budget}" if budget else "")
                + (f"; degraded: {', '.join(answer.degraded)}" if answer.degraded else ""))
    return 0


def note_core(answer: ContextPack, output: Output) -> None:
    """What the pack's core section could not hold, or why it holds nothing."""
    if answer.core is None:
        return
    # A pack read as no agent has no core blocks to speak of; one read as an agent says why
    # it holds none.
    if answer.core.absent and answer.core.agent_id is not None:
        output.note(f"no core blocks: {answer.core.absent}")
    for block in answer.core.blocks:
        if block.fields_left_out:
            output.note(f"core block {block.label}: {', '.join(block.fields_left_out)} left "
                        f"out of the budget (GET /v1/blocks/{block.label} shows it whole)")


def summary(client: MemoryClient, args: argparse.Namespace, config: Config,
            output: Output) -> int:
    answer = client.summary(
        args.query, namespace=namespace_of(args, config), agent_id=args.agent,
        budget_tokens=args.budget, run_id=args.run, profile=args.profile,
        min_score=args.min_score, limit=args.limit, as_of=args.as_of,
        min_confidence=args.min_confidence, expand=args.expand)
    if output.as_json:
        output.json(answer.raw)
        return 0
    if answer.budget_exhausted:
        output.note(f"the search budget of run {answer.run_id} is spent")
        return 0
    output.line(answer.summary or "")
    note_empty_namespace(answer, output)
    output.note(f"{answer.hits_used} of {answer.hits_found} memories found, {answer.tokens} "
                f"tokens of {answer.budget_tokens}"
                + ("; rewritten by the LLM hook" if answer.rewritten else "")
                + ("; degraded: the index is down, these come from Postgres"
                   if answer.degraded else ""))
    return 0


def show(client: MemoryClient, args: argparse.Namespace, config: Config,
         output: Output) -> int:
    if len(args.record_ids) > 1:
        if args.as_of is not None:
            raise CliError(EXIT_USAGE, "--as-of reads one record: name one")
        return show_many(client, args, config, output)
    [record_id] = args.record_ids
    namespace = namespace_of(args, config)
    answer = client.record(record_id, namespace=namespace, as_of=args.as_of)
    if output.as_json:
        output.json(answer.raw)
        return 0
    record = answer.record
    standing = answer.standing
    then = answer.as_of
    output.line(fields([
        ("record", record.record_id), ("kind", record.record_kind),
        ("title", record.title), ("version", answer.version),
        ("type", record.memory_type), ("scope", record.scope),
        ("agent", record.agent_id), ("tags", record.tags),
        ("tier", record.tier), ("review", record.review_state),
        ("trust", record.trust_class), ("source", record.source_ref),
        ("producer", record.provenance.producer),
        ("event", record.provenance.source_event_id),
        ("in force", None if standing is None else
         "yes" if standing.in_force else f"no: {standing.note}"),
        *([] if then is None else [("as of", f"{when(then.moment)}: {then.standing}" + (
            "" if then.version is None else f", version {then.version.version}"))]),
        ("created", when(record.created_at)), ("superseded by", answer.superseded_by),
    ], output.width))
    output.line()
    output.line(prose(record.text, output.width))
    # What each version changed is in its history.
    versions = client.record_history(record_id, namespace=namespace).versions
    if versions:
        output.line()
        versions_table(versions, output)
    if answer.supersedes:
        output.line()
        output.line("supersedes:")
        output.table(["record", "version"],
                     [(m.record_id, m.version) for m in answer.supersedes],
                     texts=[one_line(m.raw) for m in answer.supersedes])
    if answer.members:
        output.line()
        output.line("merges:")
        output.table(["record", "version", "review", "superseded by"],
                     [(m.record_id, m.version, m.review_state, m.superseded_by)
                      for m in answer.members],
                     texts=[one_line(m.raw) for m in answer.members])
    return 0


def neighbours(client: MemoryClient, args: argparse.Namespace, config: Config,
               output: Output) -> int:
    answer = client.neighbours(args.start, namespace=namespace_of(args, config),
                               depth=args.depth, as_of=args.as_of)
    if output.as_json:
        output.json(answer.raw)
        return 0
    nodes = [node for node in answer.nodes if node.hops > 0]
    output.table(["hops", "node", "via", "strength"],
                 [(node.hops, node.id, f"{node.relation} of {node.via}", node.strength)
                  for node in nodes],
                 texts=[one_line(node.raw) if node.type == "record"
                        else f"entity {node.name} ({node.entity_kind}, {node.records} records)"
                        for node in nodes])
    if answer.truncated:
        output.note("the walk stopped early: it reached the most nodes one answer shows")
    return 0


def entities(client: MemoryClient, args: argparse.Namespace, config: Config,
             output: Output) -> int:
    if args.name is not None:
        return entity(client, args, config, output)
    answer = client.entities(namespace=namespace_of(args, config), prefix=args.prefix,
                             limit=args.limit)
    if output.as_json:
        output.json(answer.raw)
        return 0
    output.table(["entity", "kind", "records", "first seen"],
                 [(entity.name, entity.entity_kind, entity.records, when(entity.first_seen))
                  for entity in answer.entities],
                 texts=[", ".join(entity.aliases) for entity in answer.entities])
    return 0


def entity(client: MemoryClient, args: argparse.Namespace, config: Config,
           output: Output) -> int:
    """One entity: its fields, its relations with their confidence, the records naming it."""
    answer = client.entity(args.name, namespace=namespace_of(args, config))
    if output.as_json:
        output.json(answer.raw)
        return 0
    output.line(fields([("entity", answer.name), ("key", answer.key),
                        ("kind", answer.entity_kind), ("aliases", answer.aliases),
                        ("records", answer.records), ("first seen", when(answer.first_seen))],
                       output.width))
    output.line()
    output.table(["relation", "with", "conf", "records"],
                 [(relation.relation, relation.target if relation.source == answer.key
                   else f"{relation.source} (of)", relation.confidence, relation.records)
                  for relation in answer.relations])
    output.line()
    output.table(["record", "kind"], [(r.record_id, r.kind) for r in answer.mentioned_by],
                 texts=[one_line(r.raw) for r in answer.mentioned_by])
    return 0


def show_many(client: MemoryClient, args: argparse.Namespace, config: Config,
              output: Output) -> int:
    """Several records in one read: each one's fields and text, in the order asked; the ids
    of none the key may read, said last (exit 4)."""
    answer = client.records(args.record_ids, namespace=namespace_of(args, config))
    if output.as_json:
        output.json(answer.raw)
    else:
        for number, record in enumerate(answer.records):
            if number:
                output.line()
            output.line(fields([
                ("record", record.record_id), ("kind", record.record_kind),
                ("title", record.title), ("version", record.version),
                ("type", record.memory_type), ("scope", record.scope),
                ("agent", record.agent_id), ("tier", record.tier),
                ("created", when(record.created_at)),
                ("superseded by", record.superseded_by),
            ], output.width))
            output.line(prose(record.text, output.width))
    if answer.not_found:
        output.note(f"not found: {', '.join(answer.not_found)}")
        return EXIT_NOT_FOUND
    return 0


def list_records(client: MemoryClient, args: argparse.Namespace, config: Config,
                 output: Output) -> int:
    """A page of records, newest first: id, type, tier, agent, and a one-line description."""
    answer = client.list_records(
        namespace=namespace_of(args, config), agent=args.agent, tier=args.tier,
        memory_type=args.type, kind=args.kind, cursor=args.cursor, limit=args.limit)
    if output.as_json:
        output.json(answer.raw)
        return 0
    output.table(["record", "type", "tier", "agent", "created"],
                 [(item.record_id, item.memory_type or item.kind, item.tier, item.agent_id,
                   when(item.created_at)) for item in answer.records],
                 flexible=(3,),
                 texts=[f"{item.title}: {item.description}" if item.title
                        else item.description for item in answer.records])
    if answer.next:
        output.note(f"more: memstream list --cursor {answer.next}")
    return 0


def history(client: MemoryClient, args: argparse.Namespace, config: Config,
            output: Output) -> int:
    answer = client.record_history(args.record_id, namespace=namespace_of(args, config))
    if output.as_json:
        output.json(answer.raw)
        return 0
    versions_table(answer.versions, output)
    return 0


def versions_table(versions: Sequence[RecordVersion], output: Output) -> None:
    """A record's versions as its history gives them: what changed in each, by whom and
    why, and its text."""
    output.table(["v", "changed at", "change", "actor", "changed", "reason"],
                 [(v.version, when(v.changed_at), v.change, v.actor, v.changed, v.reason)
                  for v in versions], flexible=(3, 4, 5),
                 texts=[v.text for v in versions])


def diff(client: MemoryClient, args: argparse.Namespace, config: Config,
         output: Output) -> int:
    answer = client.record_diff(args.record_id, namespace=namespace_of(args, config),
                                from_version=args.from_version, to_version=args.to_version)
    if output.as_json:
        output.json(answer.raw)
        return 0
    output.line(f"{answer.record_id}: version {answer.from_version} to {answer.to_version}")
    if answer.fields:
        output.table(["field", "from", "to"],
                     [(name, change.before, change.after)
                      for name, change in answer.fields.items()], flexible=(1, 2))
    for line in answer.text:
        output.line(line)
    if not answer.fields and not answer.text:
        output.line("no change")
    return 0


def review(client: MemoryClient, args: argparse.Namespace, config: Config,
           output: Output) -> int:
    namespace = namespace_of(args, config)
    if args.decision is None:
        return pending(client, namespace, args, output)
    listed = client.review_queue(namespace=namespace, limit=REVIEW_LOOKUP_LIMIT).items
    # An item of the queue says how to decide it (a diff names its record or block); any
    # other id, a draft record.
    item = next((i for i in listed if i.id == args.target), None)
    note = args.note or None
    if item is None:
        answer = client.review(args.decision, namespace=namespace, record_id=args.target,
                               note=note)
    else:
        body = item.review.approve if args.decision == "approve" else item.review.reject
        answer = client.review(args.decision, namespace=body.namespace,
                               record_id=body.record_id, diff_id=body.diff_id,
                               block=body.block, note=note)
    if output.as_json:
        output.json(answer.raw)
    else:
        what = "record" if item is None else REVIEWED[item.kind]
        output.line(f"{args.decision} of {what} {args.target}:")
        show_outcome(answer, namespace, output)
    # A decision the worker refused changed nothing: a script must not take it as made.
    return EXIT_OTHER if answer.outcome in NOT_APPLIED else 0


def outcome(client: MemoryClient, args: argparse.Namespace, config: Config,
            output: Output) -> int:
    """What became of a write, by its event id (`GET /v1/writes/{event_id}`)."""
    namespace = namespace_of(args, config)
    answer = client.write_outcome(args.event_id, namespace=namespace, wait_s=args.wait)
    if output.as_json:
        output.json(answer.raw)
    else:
        show_outcome(answer, namespace, output)
    return 0


def show_outcome(answer: WriteOutcome, namespace: str, output: Output) -> None:
    """A write's outcome: its fields (a record only once decided: none holds a pending
    write), what it means, and while it is pending, on stderr, how to read it later."""
    output.line(fields([(name, value) for name, value in (
        ("event", answer.event_id), ("outcome", answer.outcome),
        ("record", answer.record_id if answer.decided else None),
        ("block", subject(answer) if answer.block is not None else None),
        ("version", answer.version), ("diff", answer.diff_id), ("reason", answer.reason),
        ("detail", answer.detail), ("decided", when(answer.decided_at)),
    ) if value is not None], output.width))
    later = f"memstream outcome {answer.event_id} -n {namespace} --wait 10 reads it later"
    said = note(answer, later)
    if said is None:
        return
    if answer.decided:
        output.line(prose(said, output.width))
    else:
        output.note(said)


def pending(client: MemoryClient, namespace: str, args: argparse.Namespace,
            output: Output) -> int:
    answer = client.review_queue(namespace=namespace, record_id=args.record, limit=args.limit)
    if output.as_json:
        output.json(answer.raw)
        return 0
    output.table(["kind", "id", "of", "proposer", "proposed at", "what"],
                 [(i.kind, i.id, awaiting_of(i), i.proposer, when(i.proposed_at),
                   proposal(i.proposed or {}) if i.kind == "pending_diff" else one_line(i.raw))
                  for i in answer.items])
    return 0


def awaiting_of(item: ReviewItem) -> str:
    """What a queue item would change: a diff's record or block, a merge's members."""
    if item.kind == "draft_merge":
        return f"merge of {len(item.members)}"
    if item.kind == "proposed_lesson":
        return f"{item.memory_type} from {item.source_ref}"
    if item.record_id:
        return item.record_id
    if item.block is None:
        raise UnexpectedAnswer(f"review item {item.id} names neither a record nor a block")
    return f"block {item.block.agent_id}/{item.block.label}"


def proposal(proposed: Mapping[str, Any]) -> str:
    return "; ".join(f"{name}={cell(value)}" for name, value in proposed.items())


def keys(client: MemoryClient, args: argparse.Namespace, config: Config,
         output: Output) -> int:
    if args.action == "revoke":
        revoked = client.revoke_key(args.key_id)
        if output.as_json:
            output.json(revoked.raw)
        else:
            output.line(f"key {revoked.key_id} revoked at {when(revoked.revoked_at)}")
        return 0
    namespace = None if args.all_namespaces else namespace_of(args, config)
    if args.action == "create":
        made = client.create_key(args.perm, namespace=namespace,
                                 all_namespaces=args.all_namespaces, agent_id=args.agent,
                                 label=args.label)
        if output.as_json:
            output.json(made.raw)
        else:
            output.line(made.token)
            output.note(f"key {made.key_id} made; the token above is shown this once")
        return 0
    listed = client.keys(namespace=namespace, all_namespaces=args.all_namespaces)
    if output.as_json:
        output.json(listed.raw)
        return 0
    output.table(["key", "namespace", "permissions", "agent", "label", "created", "revoked"],
                 [(k.key_id, k.namespace or "*", k.permissions, k.agent_id, k.label,
                   when(k.created_at), when(k.revoked_at)) for k in listed.keys],
                 flexible=(4,))
    return 0


def tail(client: MemoryClient, args: argparse.Namespace, config: Config,
         output: Output) -> int:
    namespace, after = namespace_of(args, config), args.after
    widths = column_widths(TAIL_WIDTHS, output.width, flexible=(4,))
    headed = False
    try:
        while True:
            page = client.changes(namespace=namespace, after=after, agent_id=args.agent,
                                  limit=args.limit)
            for change in page.changes:
                # A change is shown and the cursor advanced past it as one step: a Ctrl-C
                # between the two would leave the resume command behind what was shown.
                with interrupts_deferred():
                    if output.as_json:
                        output.json(change.raw, compact=True)
                    else:
                        if not headed:
                            output.line(aligned(TAIL_HEADERS, widths))
                            headed = True
                        output.line("\n".join(change_lines(change, widths, output.width)))
                    after = change.cursor
            if len(page.changes) < args.limit:
                if not args.follow:
                    break
                time.sleep(FOLLOW_INTERVAL_S)
    except KeyboardInterrupt:
        pass  # the way out of --follow
    if after:
        output.note(f"next: memstream tail -n {namespace} --after {after}")
    return 0


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Run the block whole: a SIGINT that arrives meanwhile is raised when it ends."""
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, _frame: caught.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def change_lines(change: Change, widths: Sequence[int], width: int) -> list[str]:
    """A change in the columns of `TAIL_HEADERS`, its title and text under it."""
    return [aligned([cell(value) for value in (
        when(change.changed_at), change.record_id, change.version, change.change,
        change.actor)], widths), *wrapped(one_line(change.raw), width)]


def dead_letters(client: MemoryClient, args: argparse.Namespace, config: Config,
                 output: Output) -> int:
    answer = client.dead_letters(namespace=config.namespace,
                                 all_namespaces=args.all_namespaces, reason=args.reason,
                                 limit=args.limit, before=args.before)
    if output.as_json:
        output.json(answer.raw)
        return 0
    listed = answer.dead_letters
    # Time, topic and reason are never cut; the key and the bytes share what is left of 80
    # columns.
    output.table(["time", "topic", "reason", "key", "bytes"],
                 [(when(d.dead_lettered_at), d.source.topic or d.dlq.topic, d.reason, d.key,
                   d.first_bytes) for d in listed], flexible=(3, 4))
    output.note(f"{len(listed)} of {answer.total} dead letters"
                + (f"; older ones: --before {answer.next}" if answer.next else ""))
    return 0


def session(client: MemoryClient, args: argparse.Namespace, config: Config,
            output: Output) -> int:
    answer = client.session(args.session_id, namespace=namespace_of(args, config))
    if output.as_json:
        output.json(answer.raw)
        return 0
    output.line(fields([
        ("session", answer.session_id), ("agent", answer.agent_id), ("task", answer.task),
        ("state", answer.state), ("woke", when(answer.woke_at)),
        ("slept", when(answer.slept_at)),
        ("handoff", answer.handoff_record_id),
    ], output.width))
    output.line()
    output.table(["occurred at", "type", "event"],
                 [(when(entry.occurred_at), entry.type, entry.event_id)
                  for entry in answer.events],
                 flexible=(2,), texts=[step_text(entry.payload) for entry in answer.events])
    return 0


def step_text(payload: Mapping[str, Any]) -> str:
    """What a session event says: its task, its memories, or its summary and next steps."""
    if "memories" in payload:
        return "; ".join(memory["text"] for memory in payload["memories"])
    if "summary" in payload:
        return "; ".join([payload["summary"], *payload.get("next_steps", [])])
    return str(payload.get("task", ""))


# How `rate` reads a rating's verdict: `ID:useful` or `ID:not`.
VERDICTS = {"useful": True, "not": False}


def rating_of(argument: str) -> tuple[str, bool]:
    """`mem_…:useful` or `mem_…:not` as (memory id, useful)."""
    memory_id, _, verdict = argument.rpartition(":")
    if not memory_id or verdict not in VERDICTS:
        raise CliError(EXIT_USAGE, f"a rating is ID:useful or ID:not, not {argument!r}")
    return memory_id, VERDICTS[verdict]


def rate(client: MemoryClient, args: argparse.Namespace, config: Config,
         output: Output) -> int:
    ratings = dict(rating_of(argument) for argument in args.ratings)
    if len(ratings) < len(args.ratings):
        raise CliError(EXIT_USAGE, "each memory is rated once")
    answer = client.rate_memories(ratings, gap=args.gap, gap_query=args.gap_query,
                                  namespace=namespace_of(args, config), agent_id=args.agent)
    if output.as_json:
        output.json(answer.raw)
    else:
        output.line(f"{answer.rated} ratings by {answer.agent_id} sent "
                    f"(event {answer.event_id})")
    return 0


def scoring_change_of(argument: str) -> tuple[str, int | float]:
    """`name=number` as (name, number): a number written as an integer stays one."""
    name, equals, written = argument.partition("=")
    number: int | float
    try:
        number = int(written)
    except ValueError:
        try:
            number = float(written)
        except ValueError:
            number = math.nan
    if not name or not equals or not math.isfinite(number):
        raise CliError(EXIT_USAGE, f"a change is NAME=NUMBER, not {argument!r}")
    return name, number


def scoring(client: MemoryClient, args: argparse.Namespace, config: Config,
            output: Output) -> int:
    namespace = namespace_of(args, config)
    if args.action == "set":
        changes = dict(scoring_change_of(argument) for argument in args.changes)
        if len(changes) < len(args.changes):
            raise CliError(EXIT_USAGE, "each parameter is set once")
        accepted = client.set_scoring_config(changes, namespace=namespace,
                                             expected_version=args.expected_version)
        if output.as_json:
            output.json(accepted.raw)
        else:
            output.line(f"change of {', '.join(changes)} sent (event {accepted.event_id}); "
                        f"checked on version {accepted.checked_on_version}")
        return 0
    if args.action == "history":
        history = client.scoring_config_history(namespace=namespace, limit=args.limit)
        if output.as_json:
            output.json(history.raw)
            return 0
        output.table(["version", "changed at", "by", "changes"], [
            (v.version, when(v.changed_at), v.changed_by,
             ", ".join(f"{name}={value:g}" for name, value in sorted(v.changes.items())))
            for v in history.versions])
        return 0
    settings = client.scoring_config(namespace=namespace)
    if output.as_json:
        output.json(settings.raw)
        return 0
    output.line(f"version {settings.version}, changed by {settings.changed_by} at "
                f"{when(settings.changed_at)}" if settings.changed_by is not None
                else "version 0: the defaults, never changed")
    output.table(["parameter", "value", "default", "valid"], [
        (p.name, f"{p.value:g}", f"{p.default:g}", p.valid) for p in settings.parameters])
    for constraint in settings.constraints:
        output.line(f"and {constraint}")
    return 0


def gaps(client: MemoryClient, args: argparse.Namespace, config: Config,
         output: Output) -> int:
    """What agents needed and memory did not hold, a group a row, its question under it."""
    answer = client.gaps(status=args.status, namespace=namespace_of(args, config),
                         agent_id=args.agent, limit=args.limit, cursor=args.cursor)
    if output.as_json:
        output.json(answer.raw)
        return 0
    groups = answer.groups
    output.table(["group", "status", "times", "agents", "last seen"],
                 [(group.group_id, group.status, group.times, ", ".join(group.agents),
                   when(group.last_seen)) for group in groups], flexible=(3,),
                 texts=[gap_text(group) for group in groups])
    if answer.next:
        output.note(f"more: memstream gaps --status {answer.status} --cursor {answer.next}")
    return 0


def gap_text(group: GapGroup) -> str:
    """A group's question, and the memories that answered it."""
    answered = [resolution.record_id for resolution in group.resolved_by]
    return group.question + (f" (answered by {', '.join(answered)})" if answered else "")


def plan(client: MemoryClient, args: argparse.Namespace, config: Config,
         output: Output) -> int:
    """A repository's planning (docs/planning.md): its items, one item's context, or a sync
    of the pending write-backs into its issues.jsonl."""
    namespace = namespace_of(args, config)
    if args.action == "sync":
        accepted = client.plan_sync(args.repo, namespace=namespace)
        if output.as_json:
            output.json(accepted.raw)
        else:
            output.line(f"sync of {accepted.repo} requested (event {accepted.event_id})")
        return 0
    if args.action == "show":
        found = client.planning_item(args.repo, args.item_id, namespace=namespace)
        if output.as_json:
            output.json(found.raw)
            return 0
        item = found.item
        output.line(f"{item.id} [{item.status}, P{item.priority}, {item.issue_type}"
                    f"{', ready' if item.ready else ''}] {item.title}")
        if found.degraded:
            output.note(f"degraded: {found.degraded_why}")
        for text in (item.description, item.acceptance_criteria and
                     f"Acceptance criteria:\n{item.acceptance_criteria}"):
            if text:
                output.line(text)
        output.table(["relation", "item", "status", "title"], [
            *(("blocked by" if b.open else "was blocked by", b.id, b.status or "?",
               b.title or "") for b in found.blockers),
            *(("ready sibling", s.id, s.status, s.title) for s in found.ready_siblings)],
            flexible=(3,))
        return 0
    listed = client.planning_items(args.repo, namespace=namespace)
    if output.as_json:
        output.json(listed.raw)
        return 0
    if listed.degraded:
        output.note(f"degraded: {listed.degraded_why} (the items as last read)")
    output.table(["item", "status", "P", "ready", "blockers", "title"], [
        (item.id, item.status, item.priority, "yes" if item.ready else "",
         ", ".join(item.blockers), item.title) for item in listed.items], flexible=(5,))
    return 0


def mcp(client: MemoryClient, args: argparse.Namespace, config: Config, output: Output) -> int:
    """The MCP server over stdio (docs/mcp.md), until the agent that started it leaves."""
    # Imported here: the mcp SDK takes a second to import, which every other command would
    # pay for nothing.
    from memstream_client.mcp_server.stdio import serve_stdio

    serve_stdio(config)
    return 0


def docs(client: MemoryClient, args: argparse.Namespace, config: Config,
         output: Output) -> int:
    """`docs sync`, `docs list`, `docs show`."""
    namespace = namespace_of(args, config)
    if args.action == "sync":
        return sync_documents(client, namespace, Path(args.directory), args.repo, output)
    if args.action == "show":
        shown = client.document(args.doc_id, namespace=namespace)
        if output.as_json:
            output.json(shown.raw)
            return 0
        document = shown.document
        deleted = f"  deleted {when(document.deleted)}" if document.deleted else ""
        output.line(f"{document.doc_id}  v{document.version}  {document.chunks} chunks"
                    f"{deleted}")
        output.table(["#", "heading", "tokens", "record"],
                     [(c.position, " > ".join(c.heading_path), c.token_count, c.record_id)
                      for c in shown.chunks], flexible=(1,))
        return 0
    listed = client.documents(namespace=namespace, repo=args.repo,
                              include_deleted=args.deleted or None)
    if output.as_json:
        output.json(listed.raw)
        return 0
    output.table(["document", "repo", "chunks", "version", "updated", "deleted"],
                 [(d.doc_id, d.repo, d.chunks, d.version, when(d.updated), when(d.deleted))
                  for d in listed.documents], flexible=(0,))
    return 0


def sync_documents(client: MemoryClient, namespace: str, root: Path, repo: str,
                   output: Output) -> int:
    """Post an upsert of every document under `root` that differs from the one indexed, and
    a delete of every document of `repo` indexed and no longer under `root`; print each."""
    if not root.is_dir():
        raise CliError(EXIT_USAGE, f"{root} is not a directory")
    found, skipped = local_documents(root)
    for reason in skipped:
        output.note(f"skipped {reason}")
    indexed = {d.doc_id: d for d in client.documents(namespace=namespace, repo=repo).documents}
    sent: list[tuple[str, str, str]] = []
    for document in found:
        known = indexed.get(document.doc_id)
        # The worker hashes the redacted text: the same text hashes the same here.
        if known is not None and known.content_hash == content_hash(
                redact_secrets(document.text).text):
            continue
        accepted = client.upsert_document(
            document.doc_id, document.text, title=document.title,
            content_type=document.content_type, repo=repo, namespace=namespace)
        sent.append(("upsert", document.doc_id, accepted.event_id))
    for doc_id in sorted(set(indexed) - {document.doc_id for document in found}):
        accepted = client.delete_document(doc_id, namespace=namespace)
        sent.append(("delete", doc_id, accepted.event_id))
    if output.as_json:
        output.json([{"sent": what, "doc_id": doc_id, "event_id": event_id}
                     for what, doc_id, event_id in sent])
        return 0
    for what, doc_id, event_id in sent:
        output.line(f"{what:6}  {doc_id}  ({event_id})")
    upserts = sum(1 for what, _, _ in sent if what == "upsert")
    output.note(f"{len(sent)} sent, {len(found) - upserts} unchanged, "
                f"{len(skipped)} skipped")
    return 0


COMMANDS: dict[str, Command] = {
    "search": search, "context": context, "show": show, "list": list_records,
    "history": history, "diff": diff,
    "review": review, "keys": keys, "tail": tail,
    "dead-letters": dead_letters, "session": session, "mcp": mcp,
    "summary": summary, "rate": rate, "scoring": scoring, "gaps": gaps, "docs": docs,
    "plan": plan, "neighbours": neighbours, "entities": entities, "outcome": outcome,
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
    found.add_argument("--profile", help="default, planning, incident, handoff, anchor")
    found.add_argument("--min-score", type=float)
    found.add_argument("--limit", type=int)
    found.add_argument("--explain", action="store_true",
                       help="how each hit's score was made: its ranks in the dense and "
                            "lexical lists, the fused score, the profile's weight, the agent's "
                            "adaptive score, its blend and the score")
    narrowed_by_keys(found)
    viewed_from(found)

    pack = command("context", "the context pack for a task: the agent's core blocks, "
                   "history, then long-term memories")
    pack.add_argument("query")
    pack.add_argument("--agent")
    pack.add_argument("--budget", type=int, help="token budget")
    pack.add_argument("--error", help="an error text: the fix patterns of its signature")
    pack.add_argument("--run", help="a run id: the errors it met, and its search budget")
    pack.add_argument("--profile")
    narrowed_by_keys(pack)
    viewed_from(pack)

    brief = command("summary", "what memory holds about a query, in a token budget: the "
                               "hits condensed, each memory cited by its id")
    brief.add_argument("query")
    brief.add_argument("--agent")
    brief.add_argument("--budget", type=int, help="token budget (400)")
    brief.add_argument("--run", help="a run id: the summary is one search of its budget")
    brief.add_argument("--profile")
    brief.add_argument("--min-score", type=float)
    brief.add_argument("--limit", type=int, help="hits to summarize (5)")
    viewed_from(brief)
    shown = command("show", "records by id: one with its provenance, versions, lineage and "
                            "whether it is in force; several in one read")
    shown.add_argument("record_ids", nargs="+", metavar="record_id")
    shown.add_argument("--as-of", metavar="TIME",
                       help="also the record's version at that moment, and whether it was in "
                            "force then (one record)")
    around = command("neighbours", "the records and entities around a record or an entity "
                                   "(entity:NAME), along related ids, wiki-links and shared "
                                   "entities")
    around.add_argument("start", metavar="RECORD|entity:NAME")
    around.add_argument("--depth", type=int, help="hops out, 1 to 3 (1)")
    around.add_argument("--as-of", metavar="TIME", help="among the records in force then")
    named = command("entities", "the entities the namespace's records mention, the most "
                                "mentioned first")
    named.add_argument("name", nargs="?", metavar="NAME",
                       help="one entity: its relations and the records that name it")
    named.add_argument("--prefix", help="those whose name starts so")
    named.add_argument("--limit", type=int, help="at most this many (50; at most 500)")
    listed = command("list", "the records the key may read, newest first, a page at a time")
    listed.add_argument("--agent", help="those of this agent only")
    listed.add_argument("--tier", action="append",
                        help="active, short_term, long_term (repeatable)")
    listed.add_argument("--type", action="append", help="memory type (repeatable)")
    listed.add_argument("--kind", action="append", help="memory, run_digest, fix_pattern")
    listed.add_argument("--cursor", help="the cursor a previous list printed: the next page")
    listed.add_argument("--limit", type=int, help="at most this many (50; at most 200)")
    command("history", "every version of a record").add_argument("record_id")
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

    read_outcome = command("outcome", "what became of a write, by its event id: stored, "
                                      "restated, changed, proposed, refused, dead-lettered "
                                      "or pending")
    read_outcome.add_argument("event_id")
    read_outcome.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                              help="wait up to this long for it to be decided (0; at most 30)")

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

    command("session", "an agent session's ledger: its task, state, handoff and events"
            ).add_argument("session_id")
    rated = command("rate", "rate memories you were given: ID:useful or ID:not, and name a "
                            "gap (what you needed and memory did not hold)")
    rated.add_argument("ratings", nargs="+", metavar="ID:useful|ID:not")
    rated.add_argument("--gap", help="what was needed and not found")
    rated.add_argument("--gap-query", help="what was searched for the gap")
    rated.add_argument("--agent", help="the rating agent (admin keys bound to none)")
    scoring_commands = command("scoring", "the adaptive scoring's config: show, history, set "
                                          "(admin keys)").add_subparsers(
        dest="action", required=True, metavar="show|history|set")
    command("show", "the config in effect: each parameter's value, default and range",
            scoring_commands)
    command("history", "the config's versions, newest first: what each changed, who, when",
            scoring_commands).add_argument("--limit", type=int,
                                           help="at most this many (20; at most 200)")
    setting = command("set", "change parameters, the others kept (an admin key)",
                      scoring_commands)
    setting.add_argument("changes", nargs="+", metavar="NAME=NUMBER")
    setting.add_argument("--expected-version", type=int,
                         help="the version the change is made on: refused if it moved since")
    needed = command("gaps", "what agents needed and memory did not hold, grouped by "
                             "question, the most recently met first")
    needed.add_argument("--status", choices=("open", "resolved", "all"),
                        help="open (the default), resolved, or all")
    needed.add_argument("--agent", help="this agent's gaps and those of no agent (admin keys "
                                        "bound to none)")
    needed.add_argument("--limit", type=int, help="at most this many groups (20; at most 100)")
    needed.add_argument("--cursor", help="the cursor a previous listing printed: the next page")
    document_commands = command("docs", "documents: sync a directory, list what is indexed, "
                                        "show one").add_subparsers(
        dest="action", required=True, metavar="sync|list|show")
    syncing = command("sync", "index the .md, .markdown and .txt files under DIRECTORY "
                              "(doc_id: the path relative to it) and delete the repo's "
                              "documents no longer there", document_commands)
    syncing.add_argument("directory")
    syncing.add_argument("--repo", required=True, help="the repository the documents are of")
    listing = command("list", "the namespace's documents: repo, chunks, version, updated",
                      document_commands)
    listing.add_argument("--repo", help="of this repository only")
    listing.add_argument("--deleted", action="store_true", help="deleted ones too")
    command("show", "a document's chunks in order: heading path and tokens",
            document_commands).add_argument("doc_id")
    plan_commands = command("plan", "a repository's planning (its Beads work items): list, "
                                    "show, sync").add_subparsers(
        dest="action", required=True, metavar="list|show|sync")
    command("list", "its items: status, priority, readiness, open blockers",
            plan_commands).add_argument("repo")
    shown_item = command("show", "an item: its blockers and ready siblings", plan_commands)
    shown_item.add_argument("repo")
    shown_item.add_argument("item_id", metavar="ID")
    command("sync", "write the pending claims, closes and follow-ups into its "
                    ".beads/issues.jsonl", plan_commands).add_argument("repo")
    command("mcp", "serve memstream to an MCP client over stdio (docs/mcp.md)")
    return main_parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = parser().parse_args(argv)
    output = Output(out, err, getattr(args, "json", False))
    config: Config | None = None
    try:
        with MemoryClient(getattr(args, "url", None), namespace=getattr(args, "namespace", None),
                          env=os.environ) as client:
            config = client.config
            return COMMANDS[args.command](client, args, config, output)
    except MemstreamError as exc:
        failure = failure_of(exc, key_given=config is not None and config.key is not None)
        print(f"memstream: {failure}", file=err)
        return failure.exit_code
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
