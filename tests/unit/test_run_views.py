"""The run history views' rules without a stack: what a listing request asks for, where the
feed of changes starts, and which records a run view shows to which key."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from multidict import MultiDict

from memstream_client.events import Provenance
from memstream_client.ids import digest_record_id, fix_pattern_record_id
from processors.api.access import Caller
from processors.api.parameters import InvalidValue
from processors.runs.fix_patterns import ErrorOccurrence
from processors.runs.signatures import ErrorSignature
from stores.record_versions import ChangePosition
from stores.records import FoundRecord
from stores.runs import LedgerEntry, RunQuery, RunSummary
from streams.api.memory.changes import cursor_position, encode_cursor, start_position
from streams.api.operations.runs import run_history, run_query
from streams.api.params import BadQuery
from streams.plumbing.runtime import Runtime

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
SIGNATURE = ErrorSignature(signature_id="sig_0123456789abcdef0123", dialect="single_line",
                           exception_type="TimeoutError", template="TimeoutError: <*>",
                           frames=())


def test_a_listing_defaults_to_the_newest_fifty_of_every_status() -> None:
    assert run_query({}) == RunQuery(limit=50, statuses=(), agent=None, since=None)


def test_a_listing_takes_statuses_an_agent_a_time_and_a_limit() -> None:
    params = MultiDict([("status", "failed,unfinished"), ("status", "failed"),
                        ("agent", "scout"), ("since", "2026-11-21"), ("limit", "7")])
    assert run_query(params) == RunQuery(limit=7, statuses=("failed", "unfinished"),
                                         agent="scout", since=datetime(2026, 11, 21, tzinfo=UTC))


@pytest.mark.parametrize("params", [{"status": "running"}, {"limit": "0"}, {"limit": "501"},
                                    {"limit": "ten"}, {"since": "last week"}])
def test_a_listing_refuses_what_it_cannot_use(params: dict[str, str]) -> None:
    with pytest.raises(BadQuery):
        run_query(params)


def test_the_feed_starts_after_a_cursor_or_from_a_time_not_both() -> None:
    position = ChangePosition(T0, "mem_a", 2)
    assert start_position({}) is None
    assert start_position({"after": encode_cursor(position)}) == position
    start = start_position({"since": "2026-11-21T09:00:00Z"})
    assert start == ChangePosition(T0, "", 0)
    # What a reader resumes from when nothing came after that time.
    assert cursor_position(encode_cursor(start)) == start
    with pytest.raises(BadQuery, match="not both"):
        start_position({"after": encode_cursor(position), "since": "2026-11-21"})


@pytest.mark.parametrize("mixed", [ChangePosition(T0, "", 3), ChangePosition(T0, "mem_a", 0)])
def test_a_position_names_a_record_and_a_version_or_neither(mixed: ChangePosition) -> None:
    with pytest.raises(InvalidValue, match="not a cursor this feed gave"):
        cursor_position(encode_cursor(mixed))


# -- the run view ----------------------------------------------------------------------------

NAMESPACE = "team-a"
DIGEST_ID = digest_record_id(NAMESPACE, "r1")
PATTERN_ID = fix_pattern_record_id(NAMESPACE, SIGNATURE.signature_id)


def record(record_id: str, kind: str, body: dict[str, Any], *, scope: str = "shared",
           agent_id: str | None = None) -> FoundRecord:
    return FoundRecord(
        record_id=record_id, record_kind=kind, title=f"title of {record_id}",
        text=f"text of {record_id}", body=body, source_ref=None, created_at=T0,
        related_ids=(), tags=(), scope=scope, agent_id=agent_id, review_state="approved",
        trust_class="derived", tier="active", run_ref=None, version=1, memory_type=None,
        thread=None, provenance={}, expires_at=None, embedding=None)


class Runs:
    async def run(self, namespace: str, run_id: str) -> RunSummary | None:
        if run_id != "r1":
            return None
        return RunSummary("r1", "failed", "AUTH-7", "webapp", "builder", "Fix it", T0,
                          T0 + timedelta(minutes=5), 2, 1)

    async def run_ledger(self, namespace: str, run_id: str) -> list[LedgerEntry]:
        return [LedgerEntry(f"e{n}", "run.step", namespace, T0 + timedelta(minutes=n),
                            "tests", {"run_id": run_id, "n": n}) for n in range(600)]


class FixPatterns:
    def __init__(self, fixed: list[str]) -> None:
        self.fixed = fixed

    async def run_occurrences(self, namespace: str, run_id: str) -> list[ErrorOccurrence]:
        return [ErrorOccurrence(
            event_id="e1", namespace=namespace, run_id=run_id, origin="step",
            occurred_at=T0, signature=SIGNATURE, message="TimeoutError: after 30s",
            provenance=Provenance(source_event_id="e1", source_topic="runs.events",
                                  source_partition=0, source_offset=1, producer="tests"))]

    async def patterns_fixed_by(self, namespace: str, run_id: str) -> list[str]:
        return self.fixed


class Records:
    def __init__(self, found: list[FoundRecord]) -> None:
        self.found = {item.record_id: item for item in found}

    async def records_by_id(self, namespace: str,
                            record_ids: Sequence[str]) -> dict[str, FoundRecord]:
        return {i: self.found[i] for i in record_ids if i in self.found}


class Stores:
    def __init__(self, found: list[FoundRecord], fixed: list[str]) -> None:
        self.runs, self.fix_patterns, self.records = Runs(), FixPatterns(fixed), Records(found)


def runtime(found: list[FoundRecord], fixed: Sequence[str] = ()) -> Runtime:
    return cast(Runtime, type("FakeRuntime", (), {"stores": Stores(found, list(fixed))})())


def caller(agent_id: str | None = None) -> Caller:
    return Caller("k1", NAMESPACE, frozenset({"read"}), agent_id)


PATTERN = record(PATTERN_ID, "fix_pattern", {
    "signature_id": SIGNATURE.signature_id, "success_count": 1,
    "occurrences": {"count": 1, "runs": ["r1"]},
    "fixes": [{"run_id": "r2", "after_runs": ["r1"], "commits": ["4be2d1c"]}]})


async def test_a_run_shows_its_digest_and_its_errors_with_the_runs_that_fixed_them() -> None:
    shown = await run_history(runtime([record(DIGEST_ID, "run_digest", {"status": "failed"}),
                                       PATTERN]), caller(), NAMESPACE, "r1")
    assert shown is not None
    assert shown.run.event_count == 2 and shown.run.status == "failed"
    assert len(shown.events) == 500, "the first 500 events of a long run"
    assert json.loads(shown.events[0].rendered()) == {
        "event_id": "e0", "type": "run.step", "occurred_at": T0.isoformat(),
        "producer": "tests", "payload": {"run_id": "r1", "n": 0}}
    assert shown.digest is not None and shown.digest.record_id == DIGEST_ID
    assert shown.digest.body == {"status": "failed"}
    (error,) = shown.errors
    assert (error.count, error.example) == (1, "TimeoutError: after 30s")
    assert error.fix_pattern is not None
    assert error.fix_pattern.fixes[0]["run_id"] == "r2"
    assert error.fix_pattern.success_count == 1
    assert shown.fixed == []


async def test_a_run_the_namespace_does_not_have_is_none() -> None:
    assert await run_history(runtime([]), caller(), NAMESPACE, "r9") is None


async def test_records_a_key_may_not_see_are_left_out_as_missing_ones() -> None:
    personal = record(DIGEST_ID, "run_digest", {}, scope="personal", agent_id="finn")
    hidden = await run_history(runtime([personal, PATTERN]), caller("ana"), NAMESPACE, "r1")
    assert hidden is not None and hidden.digest is None
    missing = await run_history(runtime([PATTERN]), caller("ana"), NAMESPACE, "r1")
    assert missing is not None and hidden.rendered() == missing.rendered()
    own = await run_history(runtime([personal, PATTERN]), caller("finn"), NAMESPACE, "r1")
    assert own is not None and own.digest is not None and own.digest.record_id == DIGEST_ID


async def test_the_patterns_a_run_fixed_name_the_runs_it_came_after() -> None:
    fixed = record("fix_other", "fix_pattern", {
        "signature_id": "sig_x", "fixes": [{"run_id": "r1", "after_runs": ["r0"]}]})
    # Rebuilt since it was found: the run is no longer among its fixes.
    dropped = fixed._replace(record_id="fix_dropped", body={"fixes": [{"run_id": "r5"}]})
    shown = await run_history(runtime([fixed, dropped], ["fix_other", "fix_dropped"]),
                              caller(), NAMESPACE, "r1")
    assert shown is not None
    assert json.loads(shown.rendered())["fixed"] == [{
        "record_id": "fix_other", "title": "title of fix_other", "signature_id": "sig_x",
        "after_runs": ["r0"]}]
