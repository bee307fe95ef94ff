"""The CLI's tables at 80 columns, from answers shaped as the API gives them: every line fits,
ids stay whole, and a record's text has the whole width, under its row."""

from __future__ import annotations

import io
from typing import Any

import httpx
import pytest

from memstream_client.cli.commands import COMMANDS, Output, parser
from memstream_client.cli.tables import TEXT_INDENT, TEXT_LINES, table, wrapped
from memstream_client.sdk import MemoryClient

WIDTH = 80
RECORD = "mem_0123456789abcdef01234567"
FIX = "fix_0123456789abcdef01234567"
TITLE = "Staging deploys"
TEXT = ("Deploys to staging need the VPN; the bastion host rejects other traffic. Ask #ops "
        "for a VPN profile before your first deploy, and keep it on until the smoke tests "
        "pass.")
NEW_TEXT = "Deploys to staging go through the bastion host; the VPN is no longer needed."
SOURCE = "https://wiki.example.com/ops/deploys#staging-and-the-vpn-profile-for-new-people"

# The fields each version keeps beside its text, as history writes them.
VERSIONED = {"title": "Staging deploys", "memory_type": "fact", "tags": ["ops", "staging"],
             "related_ids": [], "review_state": "approved", "tier": "active",
             "valid_until": None, "invalidated_by": None}
VERSIONS = [
    {"version": 1, "change": "created", "actor": "http:0123456789ab", "event_id": "e" * 32,
     "changed_at": "2026-11-21T10:00:00.123456+00:00", "changed": [], "reason": None,
     "text": TEXT, **VERSIONED, "tags": ["ops"], "review_state": "draft"},
    {"version": 2, "change": "approved", "actor": "key:0123456789ab", "event_id": "f" * 32,
     "changed_at": "2026-11-21T10:05:00+00:00", "changed": ["text", "tags"],
     "reason": "checked with the ops team: the bastion replaced the VPN in November",
     "text": NEW_TEXT, **VERSIONED},
    {"version": 3, "change": "deprecated", "actor": "orchestrator", "event_id": "a" * 32,
     "changed_at": "2026-11-22T09:00:00+00:00", "changed": ["review_state"],
     "reason": "superseded by the runbook", "text": NEW_TEXT, **VERSIONED,
     "review_state": "deprecated"},
]
CREATED_AT = "2026-11-21T10:00:00+00:00"


def hit(record_id: str, kind: str, relevance: float, title: str | None,
        text: str) -> dict[str, Any]:
    return {"record_id": record_id, "kind": kind, "relevance": relevance, "title": title,
            "text": text, "score": relevance, "similarity": relevance,
            "ranks": {"dense": 1, "lexical": None}, "created_at": CREATED_AT,
            "source_ref": None, "member_source_refs": [], "scope": "shared",
            "memory_type": "fact", "tags": [], "related_ids": [], "tier": "active",
            "review_state": "approved", "trust_class": "raw",
            # What explain=true adds (the table without --explain leaves it out).
            "explain": {"dense": {"rank": 1, "score": 0.6123, "scaled": 1.0},
                        "lexical": {"rank": None, "score": None, "scaled": 0.0},
                        "fused": 0.4, "profile_weight": 1.2,
                        "adaptive": {"score": 0.8755, "usefulness": 1.0, "recency": 1.0,
                                     "frequency": 0.1763, "config_version": 3},
                        "blend_factor": 0.9627, "score": 0.4621, "support": 0.8,
                        "relevance": relevance}}


def packed(record_id: str, kind: str, tokens: int, source: str, text: str,
           **more: str) -> dict[str, Any]:
    return {"record_id": record_id, "kind": kind, "token_cost": tokens, "source": source,
            "text": text, "trust_class": "raw", "provenance": {},
            "recency": {"created_at": CREATED_AT, "age_days": 1.0}, "score": 1.0, **more}


def gap_group(group_id: int, status: str, question: str, agents: list[str],
              resolved_by: list[str]) -> dict[str, Any]:
    return {"group_id": group_id, "status": status, "question": question, "times": 12,
            "first_seen": CREATED_AT, "last_seen": CREATED_AT, "agents": agents,
            "sources": ["explicit", "implicit"], "gap_count": 1, "gaps": [],
            "resolved_by": [{"record_id": record_id, "relevance": 0.61,
                             "resolved_at": CREATED_AT} for record_id in resolved_by]}


ANSWERS: dict[str, dict[str, Any]] = {
    "/v1/search": {"namespace": "team-a", "budget_exhausted": False, "hits": [
        hit(RECORD, "memory", 1.0, TITLE, TEXT), hit(FIX, "fix_pattern", 0.4312, None, NEW_TEXT)]},
    "/v1/context": {"namespace": "team-a", "tokens": 360, "budget_tokens": 2000,
                    "degraded": [], "sections": {
        "history": [packed(FIX, "fix_pattern", 312, "run:pay-2", NEW_TEXT)],
        "long_term": [packed(RECORD, "memory", 48, SOURCE, TEXT, title=TITLE)]}},
    f"/v1/records/{RECORD}/history": {"namespace": "team-a", "record_id": RECORD,
                                      "versions": VERSIONS},
    f"/v1/records/{RECORD}": {
        "record": {"record_id": RECORD, "namespace": "team-a", "record_kind": "memory",
                   "title": TITLE, "memory_type": "fact", "scope": "shared", "agent_id": None,
                   "tags": ["ops", "staging"], "related_ids": [], "tier": "active",
                   "review_state": "deprecated", "trust_class": "raw", "source_ref": SOURCE,
                   "run_ref": None, "thread": None, "repo": None, "security_scope": None,
                   "body": {},
                   "provenance": {"source_event_id": "e" * 32, "source_topic": "memory.events",
                                  "source_partition": 0, "source_offset": 7,
                                  "producer": "orchestrator"},
                   "created_at": CREATED_AT, "expires_at": None, "valid_until": None,
                   "invalidated_by": None, "text": TEXT},
        "version": 3, "superseded_by": None,
        "versions": [{**{key: v[key] for key in ("version", "text", "event_id", "changed_at")},
                      "body": {}} for v in VERSIONS],
        "supersedes": [{"record_id": "mem_aaaaaaaaaaaaaaaaaaaaaaaa", "version": 2,
                        "title": None, "text": TEXT}],
        "members": [], "confidence": 0.62, "recorded_at": CREATED_AT,
        "standing": {"in_force": True, "note": None}},
    "/v1/changes": {"namespace": "team-a", "next": "c3", "changes": [
        {"changed_at": v["changed_at"], "record_id": RECORD, "version": v["version"],
         "change": v["change"], "actor": v["actor"], "event_id": v["event_id"],
         "changed": v["changed"], "reason": v["reason"], "record_kind": "memory",
         "memory_type": "fact", "scope": "shared", "agent_id": None, "title": TITLE,
         "excerpt": v["text"], "cursor": f"c{v['version']}"} for v in VERSIONS]},
    "/v1/gaps": {"namespace": "team-a", "status": "all", "agent_id": None, "next": "g2",
                 "groups": [
        gap_group(7, "open", "How do I get a VPN profile for the staging bastion before my "
                  "first deploy, and who in ops hands them out?", ["ann", "bob"], []),
        gap_group(3, "resolved", "staging deploy VPN", ["ann"], [RECORD])]},
    "/v1/graph/neighbours": {
        "namespace": "team-a", "as_of": None, "from": RECORD, "depth": 1, "truncated": False,
        "nodes": [
            {"id": RECORD, "hops": 0, "via": None, "relation": None, "strength": 1.0,
             "type": "record", "record_id": RECORD, "kind": "memory", "title": TITLE,
             "excerpt": TEXT, "memory_type": "fact", "version": 1},
            {"id": FIX, "hops": 1, "via": RECORD, "relation": "related", "strength": 1.0,
             "type": "record", "record_id": FIX, "kind": "fix_pattern", "title": None,
             "excerpt": NEW_TEXT, "memory_type": None, "version": 2},
            {"id": "entity:bastion host", "hops": 1, "via": RECORD, "relation": "mentions",
             "strength": 0.9, "type": "entity", "key": "bastion host",
             "name": "bastion host", "entity_kind": "service", "aliases": ["Bastion"],
             "records": 3, "first_seen": CREATED_AT}],
        "edges": [{"source": RECORD, "target": FIX, "relation": "related"}]},
}


def answering(request: httpx.Request) -> httpx.Response:
    """The worker's answers by path."""
    return httpx.Response(200, json=ANSWERS[request.url.path])


def shown(*argv: str) -> list[str]:
    args = parser().parse_args([*argv, "-n", "team-a"])
    out = io.StringIO()
    output = Output(out, io.StringIO(), as_json=False)
    output.width = WIDTH
    client = MemoryClient("http://worker", key="k", namespace="team-a", env={},
                          transport=httpx.MockTransport(answering))
    assert COMMANDS[args.command](client, args, client.config, output) == 0
    return out.getvalue().splitlines()


def texts_in(lines: list[str]) -> str:
    """The texts under the rows, each made one line again."""
    return " ".join(line.strip() for line in lines if line.startswith(TEXT_INDENT))


@pytest.mark.parametrize(("argv", "header", "texts"), [
    (("search", "vpn"), ["#", "record", "kind", "relevance"], [f"{TITLE}: {TEXT}", NEW_TEXT]),
    (("search", "vpn", "--explain"),
     ["#", "record", "ranks", "fused", "weight", "adapt", "blend", "score"],
     [f"{TITLE}: {TEXT}", NEW_TEXT]),
    (("context", "deploy"), ["section", "record", "kind", "tokens", "source"],
     [NEW_TEXT, f"{TITLE}: {TEXT}"]),
    (("history", RECORD), ["v", "changed", "at", "change", "actor", "changed", "reason"],
     [TEXT, NEW_TEXT, NEW_TEXT]),
    (("tail",), ["changed", "at", "record", "v", "change", "actor"],
     [f"{TITLE}: {TEXT}", f"{TITLE}: {NEW_TEXT}", f"{TITLE}: {NEW_TEXT}"]),
])
def test_at_80_columns_every_text_is_whole_and_every_line_fits(
        argv: tuple[str, ...], header: list[str], texts: list[str]) -> None:
    lines = shown(*argv)
    assert [len(line) for line in lines if len(line) > WIDTH] == []
    assert lines[0].split() == header
    assert texts_in(lines) == " ".join(texts)
    rows = [line for line in lines[1:] if not line.startswith(TEXT_INDENT)]
    assert len(rows) == len(texts)
    if argv[0] != "history":
        assert all(RECORD in row or FIX in row for row in rows), "ids are never cut"


def test_gaps_show_each_group_with_its_question_under_it_and_what_resolved_it() -> None:
    lines = shown("gaps", "--status", "all")
    assert [len(line) for line in lines if len(line) > WIDTH] == []
    assert lines[0].split() == ["group", "status", "times", "agents", "last", "seen"]
    (open_group, resolved) = ANSWERS["/v1/gaps"]["groups"]
    assert texts_in(lines) == (f"{open_group['question']} {resolved['question']} "
                               f"(answered by {RECORD})")
    rows = [line.split() for line in lines[1:] if not line.startswith(TEXT_INDENT)]
    assert [row[:3] for row in rows] == [["7", "open", "12"], ["3", "resolved", "12"]]


def test_neighbours_show_a_record_by_its_words_and_an_entity_by_its_name() -> None:
    lines = shown("neighbours", RECORD)
    assert lines[0].split() == ["hops", "node", "via", "strength"]
    assert texts_in(lines) == f"{NEW_TEXT} entity bastion host (service, 3 records)"


def test_history_and_tail_say_what_each_version_changed() -> None:
    rows = [line.split() for line in shown("history", RECORD)[1:]
            if not line.startswith(TEXT_INDENT)]
    assert [(row[0], row[3]) for row in rows] == [
        ("1", "created"), ("2", "approved"), ("3", "deprecated")]
    assert "text, tags" in next(line for line in shown("history", RECORD) if line[:2] == "2 ")
    tail_rows = [line for line in shown("tail")[1:] if not line.startswith(TEXT_INDENT)]
    assert [row.split()[:5] for row in tail_rows] == [
        ["2026-11-21", "10:00:00", RECORD, "1", "created"],
        ["2026-11-21", "10:05:00", RECORD, "2", "approved"],
        ["2026-11-22", "09:00:00", RECORD, "3", "deprecated"]]


def test_show_has_the_fields_the_text_and_the_versions_with_their_changes() -> None:
    lines = shown("show", RECORD)
    assert [len(line) for line in lines if len(line) > WIDTH] == []
    assert f"record:        {RECORD}" in lines
    # A long value wraps under itself instead of being cut.
    source = lines.index(next(line for line in lines if line.startswith("source:")))
    assert (lines[source] + lines[source + 1].strip()).endswith(SOURCE)
    assert " ".join(lines[lines.index("superseded by: -") + 2:][:3]) == TEXT
    versions = lines.index(next(line for line in lines if line.startswith("v  changed at")))
    assert lines[versions].split() == ["v", "changed", "at", "change", "actor", "changed",
                                       "reason"]
    assert [line.split()[3] for line in lines[versions + 1:] if line[:1].isdigit()] == [
        "created", "approved", "deprecated"]
    assert lines[lines.index("supersedes:") + 2].startswith("mem_aaaaaaaaaaaaaaaaaaaaaaaa  2")
    assert texts_in(lines[lines.index("supersedes:"):]) == TEXT


def test_a_long_text_is_cut_after_its_last_line_and_a_narrow_terminal_still_wraps() -> None:
    lines = wrapped("word " * 500, WIDTH)
    assert len(lines) == TEXT_LINES and lines[-1].endswith("…")
    assert all(len(line) <= WIDTH and line.startswith(TEXT_INDENT) for line in lines)
    assert wrapped(None, WIDTH) == wrapped("", WIDTH) == []
    narrow = table(["#", "record"], [(1, RECORD)], 20, flexible=(), texts=[TEXT]).splitlines()
    assert narrow[1] == f"1  {RECORD}"
    assert texts_in(narrow[2:]).replace(" …", "") in TEXT


def test_context_shows_the_core_blocks_first_and_says_what_the_budget_left_out() -> None:
    core = {"agent_id": "finn", "absent": None, "tokens": 20, "share_tokens": 1000,
            "truncated": True, "blocks": [
                {"label": "human", "version": 3, "text": "[USER] Alice\n[TASK] Billing",
                 "token_cost": 20, "fields_left_out": ["CONTEXT"]}]}
    answer = {**ANSWERS["/v1/context"], "core": core}
    args = parser().parse_args(["context", "deploy", "-n", "team-a"])
    out, err = io.StringIO(), io.StringIO()
    output = Output(out, err, as_json=False)
    output.width = WIDTH
    client = MemoryClient("http://worker", key="k", namespace="team-a", env={},
                          transport=httpx.MockTransport(
                              lambda request: httpx.Response(200, json=answer)))
    assert COMMANDS["context"](client, args, client.config, output) == 0
    lines = out.getvalue().splitlines()
    assert lines[1].split() == ["core", "human", "block", "20", "block:human", "v3"]
    assert texts_in(lines).startswith("[USER] Alice [TASK] Billing ")
    assert "core block human: CONTEXT left out of the budget" in err.getvalue()
    answer["core"] = {**core, "absent": "the agent has no core blocks", "blocks": [],
                      "tokens": 0, "truncated": False}
    assert COMMANDS["context"](client, args, client.config, output) == 0
    assert "no core blocks: the agent has no core blocks" in err.getvalue()
    err.seek(0)
    err.truncate()
    answer["core"] = {**answer["core"], "agent_id": None, "absent": "no agent: …"}
    assert COMMANDS["context"](client, args, client.config, output) == 0
    assert "core" not in err.getvalue()
