"""The SDK on the real stack: every route of the HTTP API through `MemoryClient` and through
`AsyncMemoryClient` (each test runs once with each), its answers read into the models, its
errors with their status and reason, the key rules of every read, and a write whose answer
is lost sent again as the same event, which the worker applies once."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.kafka_io import TopicReader, wait_caught_up
from harness.stack import Stack, Worker
from memstream_client.ids import digest_record_id, fix_pattern_record_id, memory_record_id
from memstream_client.sdk import (
    AsyncMemoryClient,
    BadRequest,
    Forbidden,
    MemoryClient,
    NotFound,
    Unauthorized,
)
from publisher.kafka_publisher import Publisher
from tests.integration.test_consolidation import APPROVALS, VPN
from tests.integration.test_lifecycle import announced

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]

WAIT_S = 40.0
TEXT = "The billing deploy needs the office VPN; the bastion host rejects other traffic."
NEW_TEXT = "The billing deploy goes through the bastion host; the VPN is no longer needed."
RELATED = "Ask #ops for a VPN profile before the first billing deploy."
TRACE = """Traceback (most recent call last):
  File "/srv/ci/build-{build}/app/cache.py", line {line}, in load_user
    return self._users[user_id]
KeyError: 'user-{user}'"""


class InThreads:
    """A `MemoryClient` whose methods are awaited: each call runs in a thread, so that the
    test's event loop (which reads memory.updated) keeps running."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.client, name)

        async def in_thread(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return in_thread


class LoseFirstAnswer(httpx.BaseTransport):
    """Sends each request to the worker, and loses the first answer on its way back, as a
    connection that drops once the worker has published the event; keeps the bodies of the
    requests that had one."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self._worker = httpx.HTTPTransport()
        self._answered = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self._worker.handle_request(request)
        if request.read():
            self.bodies.append(json.loads(request.content))
        self._answered += 1
        if self._answered == 1:
            answer.read()
            answer.close()
            raise httpx.ReadError("the answer was lost", request=request)
        return answer


class AsyncLoseFirstAnswer(httpx.AsyncBaseTransport):
    """`LoseFirstAnswer` for the async client."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self._worker = httpx.AsyncHTTPTransport()
        self._answered = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self._worker.handle_async_request(request)
        if await request.aread():
            self.bodies.append(json.loads(request.content))
        self._answered += 1
        if self._answered == 1:
            await answer.aread()
            await answer.aclose()
            raise httpx.ReadError("the answer was lost", request=request)
        return answer


@dataclass
class Clients:
    """Makes clients of one kind (`sync` or `async`) of the worker, closed after the test;
    each with the key and namespace given, and nothing read from the environment or a
    config file of the user's."""

    kind: str
    worker: Worker
    home: Path
    opened: list[Any] = field(default_factory=list)

    def connect(self, key: str | None, namespace: str | None = None,
                transport: Any = None) -> Any:
        env = {"HOME": str(self.home)}
        if self.kind == "sync":
            client = MemoryClient(self.worker.base_url, key=key, namespace=namespace, env=env,
                                  transport=transport)
            self.opened.append(client)
            return InThreads(client)
        made = AsyncMemoryClient(self.worker.base_url, key=key, namespace=namespace, env=env,
                                 transport=transport)
        self.opened.append(made)
        return made

    def losing_first_answer(self) -> LoseFirstAnswer | AsyncLoseFirstAnswer:
        return LoseFirstAnswer() if self.kind == "sync" else AsyncLoseFirstAnswer()

    async def close(self) -> None:
        for client in self.opened:
            if isinstance(client, MemoryClient):
                client.close()
            else:
                await client.aclose()


@pytest.fixture(params=["sync", "async"])
async def clients(request: pytest.FixtureRequest, worker: Worker,
                  tmp_path: Path) -> AsyncIterator[Clients]:
    made = Clients(request.param, worker, tmp_path)
    yield made
    await made.close()


async def eventually(read: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not done(value := await read()):
        assert loop.time() < deadline, f"still {value!r}"
        await asyncio.sleep(0.2)
    return value


def key_id_of(token: str) -> str:
    return token.split("_")[1]


async def test_a_memory_written_searched_reviewed_deprecated_and_restored(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, clients: Clients,
) -> None:
    memory = clients.connect(stack.operator_key, namespace)
    key_id = key_id_of(stack.operator_key)
    health = await memory.health()
    assert (health.status, health.role, health.postgres, health.index) == (
        "ok", "ingest", "ok", "ok")

    written = await memory.write_memory(TEXT, title="Billing deploys", tags=["ops"],
                                        memory_type="fact")
    record_id = written.record_id
    assert (record_id, written.topic) == (memory_record_id(namespace, written.event_id),
                                          "memory.events")
    await announced(updates, record_id, [("created", 1)])
    related = (await memory.write_memory(RELATED, related_ids=[record_id])).record_id
    await announced(updates, related, [("created", 1)])

    found = await memory.search("does the billing deploy need the VPN?", tag="ops")
    (hit,) = found.hits
    assert (hit.record_id, hit.kind, hit.title, hit.text, hit.tags, hit.memory_type) == (
        record_id, "memory", "Billing deploys", TEXT, ["ops"], "fact")
    assert 0 < hit.relevance <= 1 and hit.ranks.dense == 1
    assert isinstance(hit.created_at, datetime) and hit.created_at.tzinfo is not None
    assert (found.namespace, found.namespace_holds_records, found.budget_exhausted,
            found.degraded, found.profile) == (namespace, True, False, False, "default")
    assert found.raw["hits"][0]["record_id"] == record_id
    elsewhere = await memory.search("billing deploy", namespace=f"{namespace}-none")
    assert (elsewhere.hits, elsewhere.namespace_holds_records) == ([], False)

    pack = await memory.context("deploy billing", budget_tokens=300)
    assert record_id in [item.record_id for item in pack.sections["long_term"]]
    assert pack.tokens <= 300 == pack.budget_tokens and pack.enabled
    assert pack.sections["long_term"][0].recency.age_days < 1

    lineage = await memory.record(record_id)
    assert (lineage.record.text, lineage.record.title, lineage.version) == (
        TEXT, "Billing deploys", 1)
    assert (lineage.record.provenance.source_event_id, lineage.record.provenance.producer) \
        == (written.event_id, f"http:{key_id}")
    assert lineage.supersedes == [] and lineage.members == []

    # Approved, so protected: the update waits as a pending diff, named by its event id.
    proposed = await memory.update_memory(record_id, expected_version=1, text=NEW_TEXT)
    assert proposed.record_id == record_id
    await announced(updates, record_id, [("created", 1), ("proposed", 1)])
    pending = await memory.pending_diffs()
    assert [(d.diff_id, d.target, d.record_id, d.base_version, d.proposed["text"])
            for d in pending.pending_diffs] == [(proposed.event_id, "record", record_id, 1,
                                                 NEW_TEXT)]
    (item,) = (await memory.review_queue()).items
    assert (item.kind, item.id, item.record_id, item.text, item.proposer) == (
        "pending_diff", proposed.event_id, record_id, TEXT, f"http:{key_id}")
    body = item.review.approve
    approved = await memory.review(body.decision, namespace=body.namespace,
                                   record_id=body.record_id, diff_id=body.diff_id,
                                   note="checked")
    assert approved.record_id == record_id
    await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2)])
    assert (await memory.review_queue(record_id=record_id)).items == []

    versions = (await memory.record_history(record_id)).versions
    assert [(v.version, v.change, v.text) for v in versions] == [
        (1, "created", TEXT), (2, "approved", NEW_TEXT)]
    assert versions[1].actor == f"key:{key_id}" and versions[1].changed == ["text"]
    diff = await memory.record_diff(record_id)
    assert (diff.from_version, diff.to_version) == (1, 2)
    assert f"-{TEXT}" in diff.text and f"+{NEW_TEXT}" in diff.text
    assert (await memory.record_diff(record_id, from_version=1, to_version=1)).text == []

    await memory.deprecate_memory(record_id, reason="billing left the VPN", expected_version=2)
    await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2),
                                         ("deprecated", 3)])
    await memory.restore_memory(record_id, version=1)
    await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2),
                                         ("deprecated", 3), ("restored", 4)])
    restored = await memory.record(record_id)
    assert (restored.record.text, restored.version, restored.record.review_state) == (
        TEXT, 4, "approved")

    stats = await memory.stats()
    assert (stats.namespace, stats.records, stats.index_points) == (
        namespace, {"memory": 2}, 2)

    feed = await memory.changes()
    assert [(c.version, c.change) for c in feed.changes if c.record_id == record_id] == [
        (1, "created"), (2, "approved"), (3, "deprecated"), (4, "restored")]
    assert feed.next == feed.changes[-1].cursor and feed.changes[0].excerpt == TEXT
    after_first = await memory.changes(after=feed.changes[0].cursor, limit=1)
    assert [c.cursor for c in after_first.changes] == [feed.changes[1].cursor]
    assert (await memory.changes(after=feed.next)).changes == []

    graph = await memory.graph()
    assert {node.record_id for node in graph.nodes} == {record_id, related}
    assert [(e.source, e.target, e.relation) for e in graph.edges] == [
        (related, record_id, "related")]
    assert graph.truncated is False


async def test_a_core_block_edited_and_read(
    stack: Stack, worker: Worker, namespace: str, clients: Clients,
) -> None:
    operator = clients.connect(stack.operator_key, namespace)
    edited = await operator.edit_block("human", agent_id="finn",
                                       set={"USER": "Alice", "PREFS": ["Socratic questions"]})
    assert (edited.agent_id, edited.label) == ("finn", "human")
    # A key bound to finn edits finn's blocks without naming him.
    finn_key = await operator.create_key("read,write", agent_id="finn")
    finn = clients.connect(finn_key.token, namespace)
    appended = await finn.edit_block("human", append={"PREFS": ["Detailed feedback"]},
                                     expected_version=1)
    assert appended.agent_id == "finn"
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])

    block = await finn.block("human")
    assert (block.agent_id, block.version, block.strategy) == ("finn", 2, "adaptive")
    assert block.fields == {"USER": "Alice",
                            "PREFS": ["Socratic questions", "Detailed feedback"]}
    assert block.text == "[USER] Alice\n[PREFS] Socratic questions; Detailed feedback"
    assert block.chars == len(block.text) and 0 < block.usage < 1
    assert [(v.version, v.event_id) for v in block.versions] == [
        (2, appended.event_id), (1, edited.event_id)], "newest first"
    assert (await operator.block("human", agent_id="finn")).raw == block.raw
    with pytest.raises(Forbidden) as other_agent:
        await finn.block("human", agent_id="ruby")
    assert other_agent.value.status == 403
    with pytest.raises(NotFound):
        await operator.block("persona", agent_id="finn")


async def test_runs_their_history_and_what_fixed_their_error(
    stack: Stack, worker: Worker, namespace: str, clients: Clients,
) -> None:
    memory = clients.connect(stack.operator_key, namespace)
    failed, fixed = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("failed", "fixed"))
    task = {"task_key": "CACHE-7", "repo": "acme/web"}
    trace = TRACE.format(build=101, line=42, user="1234")
    start = datetime.now(UTC) - timedelta(minutes=10)
    for run_id, steps in (
        (failed, [("run.started", {"intent": "Warm the user cache", **task}),
                  ("run.step", {"kind": "error", "error": trace}),
                  ("run.finished", {"status": "failed", "error": trace})]),
        (fixed, [("run.started", {"intent": "Warm the user cache", **task}),
                 ("run.finished", {"status": "succeeded", "commits": ["7c0ffee"]})]),
    ):
        for step, (event_type, payload) in enumerate(steps):
            accepted = await memory.run_event(event_type, {"run_id": run_id, **payload},
                                              occurred_at=start + timedelta(seconds=step))
            assert accepted.run_id == run_id
        start += timedelta(minutes=5)
        await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])

    # The fix pattern names the run that fixed it once the refresh has run.
    lookup = TRACE.format(build=3, line=99, user="5")
    patterns = await eventually(lambda: memory.fix_patterns(lookup),
                                lambda found: bool(found.fix_patterns)
                                and bool(found.fix_patterns[0].fixes))
    exact = patterns.fix_patterns[0]
    assert (exact.match, exact.record_id) == (
        "exact", fix_pattern_record_id(namespace, patterns.signature.signature_id))
    assert patterns.signature.exception_type == "KeyError"
    assert [fix["run_id"] for fix in exact.fixes] == [fixed] and exact.success_count == 1
    assert exact.occurrences["runs"] == [failed]

    listed = await memory.runs()
    assert [(r.run_id, r.status, r.event_count, r.error_count) for r in listed.runs] == [
        (fixed, "succeeded", 2, 0), (failed, "failed", 3, 1)]
    assert [r.run_id for r in (await memory.runs(status="failed")).runs] == [failed]
    assert [r.run_id for r in (await memory.runs(since=start - timedelta(minutes=5))).runs] \
        == [fixed]

    history = await memory.run(failed)
    assert [e.type for e in history.events] == ["run.started", "run.step", "run.finished"]
    assert history.digest is not None
    assert history.digest.record_id == digest_record_id(namespace, failed)
    (error,) = history.errors
    assert (error.count, error.exception_type) == (1, "KeyError")
    assert error.fix_pattern is not None and error.fix_pattern.record_id == exact.record_id
    fixing = await memory.run(fixed)
    assert [(p.record_id, p.after_runs) for p in fixing.fixed] == [(exact.record_id, [failed])]
    with pytest.raises(NotFound):
        await memory.run("no-such-run")


async def test_consolidation_counts_reports_and_a_draft_merge_approved(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, clients: Clients,
) -> None:
    memory = clients.connect(stack.operator_key, namespace)
    written = [(await memory.write_memory(text, memory_type="fact")).record_id
               for text in (*VPN, *APPROVALS)]
    for record_id in written:
        await announced(updates, record_id, [("created", 1)])
    counts = await memory.consolidation_counts()
    assert (counts.namespace, counts.new_since_report, counts.reports_today) == (
        namespace, 5, 0)
    assert counts.current_window.memories == 5 and counts.rules.min_new_memories > 0
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        await publisher.request_consolidation(namespace)

    reports = await eventually(memory.consolidation_reports,
                               lambda found: len(found.reports) == 1
                               and found.reports[0].announced_at is not None)
    (report,) = reports.reports
    assert (report.namespace, report.memories, len(report.new_ids)) == (namespace, 5, 2)
    assert set(report.new_ids) <= set(reports.records)
    assert {reports.records[record_id].record_kind for record_id in written} == {"memory"}
    assert (await memory.consolidation_counts()).last_report_id == report.report_id

    merges = [item for item in (await memory.review_queue()).items
              if item.kind == "draft_merge"]
    by_members = {frozenset(m.record_id for m in item.members): item for item in merges}
    assert set(by_members) == {frozenset(written[:3]), frozenset(written[3:])}
    merge = by_members[frozenset(written[:3])]
    assert (merge.id, merge.version, merge.review.approve.record_id) == (
        merge.record_id, 1, merge.record_id)
    assert {(m.review_state, m.superseded_by) for m in merge.members} == {("approved", None)}
    lineage = await memory.record(merge.id)
    assert lineage.record.review_state == "draft"
    assert sorted(m.record_id for m in lineage.members) == sorted(written[:3])

    body = merge.review.approve
    await memory.review(body.decision, namespace=body.namespace, record_id=body.record_id)
    for member in written[:3]:
        await updates.wait_for(lambda _, member=member: ("superseded", 2) in [
            (b["change"], b["version"]) for b in map(json.loads, (
                m.value for m in updates.messages)) if b["record_id"] == member])
    approved = await memory.record(merge.id)
    assert approved.record.review_state == "approved"
    assert {m.superseded_by for m in approved.members} == {merge.id}


async def test_errors_carry_their_status_and_reason_and_dead_letters_are_read(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, clients: Clients,
) -> None:
    memory = clients.connect(stack.operator_key, namespace)
    with pytest.raises(BadRequest) as refused:
        await memory.write_memory("A personal note of nobody's.", scope="personal")
    assert (refused.value.status, refused.value.reason, refused.value.retriable) == (
        400, "invalid_event", False)
    assert "agent_id" in refused.value.detail
    with pytest.raises(BadRequest) as unusable:
        await memory.search("vpn", limit=0)
    assert unusable.value.reason is None and unusable.value.detail.startswith("limit:")
    with pytest.raises(NotFound) as missing:
        await memory.record("mem_000000000000000000000000")
    assert (missing.value.status, missing.value.detail) == (
        404, f"no record 'mem_000000000000000000000000' in '{namespace}'")
    reader = clients.connect((await memory.create_key("read")).token, namespace)
    with pytest.raises(Forbidden):
        await reader.write_memory("A reader may not write.")
    with pytest.raises(Unauthorized):
        await clients.connect(None, namespace).stats()

    # What only the worker can tell is dead-lettered: a change of a version long gone.
    record_id = (await memory.write_memory(TEXT)).record_id
    await announced(updates, record_id, [("created", 1)])
    stale = await memory.update_memory(record_id, expected_version=7, text=NEW_TEXT)
    listed = await eventually(lambda: memory.dead_letters(reason="stale_version"),
                              lambda found: found.total == 1)
    (letter,) = listed.dead_letters
    assert (listed.namespace, listed.by_reason, listed.next) == (
        namespace, {"stale_version": 1}, None)
    assert (letter.namespace, letter.reason, letter.error_class, letter.retriable) == (
        namespace, "stale_version", "Rejected", False)
    assert letter.source.topic == "memory.events" and stale.event_id in letter.first_bytes
    assert letter.replay_command is not None
    assert (await memory.dead_letter(letter.dead_letter_id)).raw == letter.raw
    everywhere = await memory.dead_letters(all_namespaces=True, reason="stale_version",
                                           limit=500)
    assert letter.dead_letter_id in [d.dead_letter_id for d in everywhere.dead_letters]
    assert everywhere.namespace is None
    with pytest.raises(Forbidden):
        await reader.dead_letters()


async def test_keys_made_listed_revoked_and_an_agent_key_sees_only_its_own(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, clients: Clients,
) -> None:
    operator = clients.connect(stack.operator_key, namespace)
    made = await operator.create_key(["read", "write"], agent_id="finn", label="sdk-finn")
    assert (made.namespace, made.permissions, made.agent_id, made.label, made.revoked_at) == (
        namespace, ["read", "write"], "finn", "sdk-finn", None)
    assert made.token.startswith(f"msk_{made.key_id}")
    assert made.key_id in [k.key_id for k in (await operator.keys()).keys]
    assert (await operator.key(made.key_id)).label == "sdk-finn"
    assert made.key_id in [k.key_id for k in (await operator.keys(all_namespaces=True)).keys]
    ruby = clients.connect((await operator.create_key("read,write", agent_id="ruby")).token,
                           namespace)
    finn = clients.connect(made.token, namespace)

    finns = (await finn.write_memory("Finn's deploy checklist: drain the blue pool first.",
                                     scope="personal")).record_id
    rubys = (await ruby.write_memory("Ruby's deploy checklist: drain the green pool first.",
                                     scope="personal")).record_id
    await announced(updates, finns, [("created", 1)])
    await announced(updates, rubys, [("created", 1)])
    assert (await finn.record(finns)).record.agent_id == "finn"

    hits = (await finn.search("deploy checklist drain pool", min_score=0)).hits
    assert [hit.record_id for hit in hits] == [finns]
    with pytest.raises(NotFound) as hidden:
        await finn.record(rubys)
    assert hidden.value.detail == f"no record '{rubys}' in '{namespace}'", \
        "answered as a record that does not exist"
    with pytest.raises(NotFound):
        await finn.record_history(rubys)
    with pytest.raises(NotFound):
        await finn.deprecate_memory(rubys, reason="not finn's")
    with pytest.raises(Forbidden):
        await finn.search("deploy checklist", agent_id="ruby")
    assert [c.record_id for c in (await finn.changes()).changes] == [finns]
    assert [n.record_id for n in (await finn.graph()).nodes] == [finns]
    # A key bound to no agent reads the personal memories of the agent it names.
    assert [hit.record_id for hit in (await operator.search(
        "deploy checklist drain pool", agent_id="ruby", min_score=0)).hits] == [rubys]

    revoked = await operator.revoke_key(made.key_id)
    assert revoked.revoked_at is not None
    with pytest.raises(Unauthorized) as refused:
        await finn.stats()
    assert (refused.value.status, refused.value.detail) == (
        401, f"key {made.key_id} was revoked")


async def test_a_write_whose_answer_is_lost_is_sent_again_and_applied_once(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, clients: Clients,
) -> None:
    transport = clients.losing_first_answer()
    memory = clients.connect(stack.operator_key, namespace, transport=transport)
    written = await memory.write_memory(TEXT)
    first, again = transport.bodies
    assert again == first, "the same event, with the same event id"
    assert written.record_id == memory_record_id(namespace, first["event_id"])
    await announced(updates, written.record_id, [("created", 1)])
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    versions = (await memory.record_history(written.record_id)).versions
    assert [(v.version, v.change) for v in versions] == [(1, "created")]


def test_the_examples_of_the_sdk_guide_run_as_written(
    stack: Stack, worker: Worker, namespace: str, tmp_path: Path,
) -> None:
    """docs/sdk.md's Python, in the guide's namespace made this test's, run as a user runs
    it: configured by the environment alone."""
    guide = (REPO_ROOT / "docs" / "sdk.md").read_text()
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("MEMSTREAM_")}
    environment.update(HOME=str(tmp_path), MEMSTREAM_URL=worker.base_url,
                       MEMSTREAM_API_KEY=stack.operator_key)
    ran = []
    for example in re.findall(r"```python\n(.*?)```", guide, re.S):
        done = subprocess.run(
            [sys.executable, "-c", example.replace('"team-a"', f'"{namespace}"')],
            cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        ran.append(done.stdout.splitlines())
    (said, found, *_), (packed,) = ran
    record_id, relevance, text = found.split(" ", 2)
    assert said == f"stored {record_id}"
    assert (text, float(relevance) >= 0.5) == ("Deploys to staging need the VPN.", True)
    tokens, long_term = packed.split(" ", 1)
    assert int(tokens) > 0 and long_term == repr([record_id])


async def test_a_session_woken_checkpointed_slept_and_its_handoff_read_next_time(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, clients: Clients,
) -> None:
    operator = clients.connect(stack.operator_key, namespace)
    finn = clients.connect((await operator.create_key("read,write", agent_id="finn")).token,
                           namespace)
    ruby = clients.connect((await operator.create_key("read,write", agent_id="ruby")).token,
                           namespace)
    woke = await finn.wake("upgrade the payment SDK", budget_tokens=500)
    assert (woke.agent_id, woke.handoff) == ("finn", None)
    assert woke.context is not None and woke.context.query == "upgrade the payment SDK"
    assert woke.context.core is not None and woke.context.core.blocks == []
    kept = await finn.checkpoint(woke.session_id, [
        {"text": "The payment SDK 4.x drops the sync client.", "memory_type": "lesson"}])
    slept = await finn.sleep(woke.session_id, "Moved checkout to the async client.",
                             next_steps=["Upgrade the refunds service"])
    for record_id in [*kept.record_ids, slept.handoff_record_id]:
        await announced(updates, record_id, [("created", 1)])
    session = await eventually(lambda: finn.session(woke.session_id),
                               lambda found: found.state == "asleep")
    assert [e.type for e in session.events] == [
        "session.woke", "session.checkpointed", "session.slept"]
    assert session.handoff_record_id == slept.handoff_record_id

    again = await finn.wake("upgrade the refunds service")
    assert again.handoff is not None
    assert (again.handoff.record_id, again.handoff.next_steps) == (
        slept.handoff_record_id, ["Upgrade the refunds service"])
    with pytest.raises(NotFound):
        await ruby.session(woke.session_id)
    with pytest.raises(NotFound):
        await ruby.sleep(woke.session_id, "Not mine to end.")
    with pytest.raises(BadRequest) as refused:
        await finn.checkpoint(again.session_id, [])
    assert refused.value.reason == "invalid_event"


async def test_links_entities_stale_facts_and_memory_as_of_a_moment(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, clients: Clients,
) -> None:
    memory = clients.connect(stack.operator_key, namespace)
    anchor = (await memory.write_memory(
        "Atlas is the billing rewrite; card payments go through the gateway.",
        title="Project: Atlas", links=["Payments gateway"])).record_id
    gateway = (await memory.write_memory(
        "The gateway writes every charge to the ledger.", title="Payments gateway",
        links=["Ledger database"])).record_id
    ledger = (await memory.write_memory("Charges are kept for seven years.",
                                        title="Ledger database")).record_id
    for record_id in (anchor, gateway, ledger):
        await announced(updates, record_id, [("created", 1)])

    # The entity index follows the records by a tick.
    listed = await eventually(lambda: memory.entities(prefix="Atl"),
                              lambda answer: [e.key for e in answer.entities] == ["atlas"])
    assert (listed.entities[0].name, listed.entities[0].entity_kind) == ("Atlas", "project")
    around = await eventually(lambda: memory.neighbours(anchor, depth=2),
                              lambda answer: ledger in {node.id for node in answer.nodes})
    assert {node.id: node.hops for node in around.nodes if node.type == "record"} == {
        anchor: 0, gateway: 1, ledger: 2}
    atlas = await memory.entity("Project: Atlas")
    assert ("links_to", "payments gateway", [anchor]) in [
        (r.relation, r.target, r.evidence) for r in atlas.relations]
    assert [record.record_id for record in atlas.mentioned_by] == [anchor]
    found = await memory.search("Atlas", profile="anchor", limit=10)
    reached = {hit.record_id: hit.via for hit in found.hits}
    assert reached[anchor] is None
    assert reached[ledger] is not None and (reached[ledger].from_, reached[ledger].hops) == (
        anchor, 2)
    assert {hit.record_id for hit in (await memory.search("Atlas", expand=1, limit=10)).hits} \
        == {anchor, gateway}
    assert (await memory.search("Atlas", min_confidence=0.95)).hits == [], \
        "a statement as written is 0.7 sure"

    # A personal fact restated with another value: invalidated a tick later.
    ann = clients.connect(stack.make_key("--namespace", namespace, "--perm", "read,write",
                                         "--agent", "ann"), namespace)
    old = (await ann.write_memory("My laptop runs Ubuntu 22.04 with 16 GB of memory.",
                                  scope="personal", memory_type="fact",
                                  tags=["laptop"])).record_id
    await announced(updates, old, [("created", 1)])
    await asyncio.sleep(1.0)
    before = datetime.now(UTC)
    await asyncio.sleep(1.0)
    new = (await ann.write_memory("My laptop runs Ubuntu 24.04 with 16 GB of memory.",
                                  scope="personal", memory_type="fact",
                                  tags=["laptop"])).record_id
    await announced(updates, old, [("created", 1), ("invalidated", 2)])
    question = "which Ubuntu does my laptop run"
    facts = {"min_score": 0, "tag": "laptop"}
    assert [hit.record_id for hit in (await ann.search(question, **facts)).hits] == [new]
    then = await ann.search(question, as_of=before, **facts)
    assert [(hit.record_id, hit.invalidated_by) for hit in then.hits] == [(old, new)]
    record = await ann.record(old, as_of=before)
    assert record.standing is not None and record.standing.invalidated_by == new
    assert record.as_of is not None and record.as_of.standing == "in_force"
    assert record.as_of.version is not None and record.as_of.version.version == 1
