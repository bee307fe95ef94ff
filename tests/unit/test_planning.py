"""The planning plane's rules (processors/planning/write_backs.py), its configuration, the file
adapter (stores/beads_repo.py) on a temporary checkout, with a stand-in `bd` on the PATH, and
the sync timer."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from memstream_client.events import RunFinished, RunStarted
from processors.planning.beads import (
    Claim,
    Close,
    FollowUp,
    Release,
    parse,
    planning_context,
    serialize,
)
from processors.planning.write_backs import change_of, claim_of, finish_of, pack_entries, settle
from stores.beads_repo import BeadsRepos, PlanningUnavailable, UnknownRepo
from streams.plumbing.config import MemoryFlags, planning_repos
from streams.plumbing.messages import Outbound
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.stages.runs.planning_ledger import request_syncs
from tests.unit.store_fakes import InMemoryStores

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "beads"
AT = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)


def run_started(**payload: object) -> RunStarted:
    return RunStarted.model_validate({
        "event_id": "ev-start", "type": "run.started", "namespace": "team-a",
        "occurred_at": AT.isoformat(), "producer": "tests",
        "payload": {"run_id": "r-1", "agent": "agent-7", **payload}})


def run_finished(**payload: object) -> RunFinished:
    return RunFinished.model_validate({
        "event_id": "ev-finish", "type": "run.finished", "namespace": "team-a",
        "occurred_at": (AT + timedelta(hours=1)).isoformat(), "producer": "tests",
        "payload": {"run_id": "r-1", "status": "succeeded", **payload}})


def test_a_run_on_an_item_claims_it_and_its_finish_closes_it_with_follow_ups() -> None:
    started = run_started(repo="beads", planning_ref="bd-2vh3.5")
    claim = claim_of(started)
    assert claim is not None
    assert (claim.payload.item_id, claim.payload.assignee, claim.occurred_at) == \
        ("bd-2vh3.5", "agent-7", AT)
    assert claim_of(run_started(repo="beads")) is None
    with pytest.raises(ValidationError, match="planning_ref needs the run's repo"):
        run_started(planning_ref="bd-2vh3.5")

    finished = finish_of(started, run_finished(summary="Done.", next_steps=[
        "Write the docs", "  ", "Measure it\nOn 500 steps."]))
    assert [event.type for event in finished] == [
        "planning.closed", "planning.followup_discovered", "planning.followup_discovered"]
    assert [change_of(e.type, e.payload.model_dump(), e.occurred_at) for e in finished] == [
        Close("bd-2vh3.5", "Done.", AT + timedelta(hours=1)),
        FollowUp("bd-2vh3.5", "Write the docs", "Found by run r-1.", "agent-7",
                 AT + timedelta(hours=1)),
        FollowUp("bd-2vh3.5", "Measure it", "On 500 steps.\n\nFound by run r-1.", "agent-7",
                 AT + timedelta(hours=1))]
    # Named by the run event: a replay publishes the same ids.
    again = finish_of(started, run_finished(summary="Done.", next_steps=[
        "Write the docs", "  ", "Measure it\nOn 500 steps."]))
    assert [e.event_id for e in again] == [e.event_id for e in finished]
    assert len({e.event_id for e in finished}) == 3

    failed = finish_of(started, run_finished(status="failed", error="TimeoutError"))
    assert change_of(failed[0].type, failed[0].payload.model_dump(), AT) == \
        Release("bd-2vh3.5", "run r-1 failed: TimeoutError", AT)


def test_settling_write_backs_skips_those_of_items_the_file_lost() -> None:
    beads = parse((FIXTURES / "beads-2025-12" / "issues.jsonl").read_text(encoding="utf-8"))
    settled = settle(beads, [("a", Claim("bd-2vh3.5", "x", AT)),
                             ("b", Close("bd-gone", "done", AT)),
                             ("c", Close("bd-2vh3.5", "done", AT))])
    assert (settled.applied, settled.failed) == \
        (["a", "c"], [("b", "the file holds no item 'bd-gone'")])
    assert settled.beads.item("bd-2vh3.5").status == "closed"


def test_the_pack_entries_of_an_item() -> None:
    beads = parse((FIXTURES / "beads-2025-12" / "issues.jsonl").read_text(encoding="utf-8"))
    entries = pack_entries(planning_context(beads, "bd-2vh3.5"))
    assert [(entry.role, entry.item.id) for entry in entries] == [
        ("item", "bd-2vh3.5"), ("blocker", "bd-2vh3.4"), ("ready_sibling", "bd-2vh3.4"),
        ("ready_sibling", "bd-2vh3.6")]
    assert entries[0].text.startswith(
        "Work item bd-2vh3.5: Tier 4: Auto-squash on molecule completion\nstatus open")
    assert entries[1].text == \
        "Blocked by bd-2vh3.4 (blocks, open): Tier 3: AI-powered squash summarization"


def test_the_configuration_of_planning() -> None:
    assert planning_repos(" a=/x/a, b=/y ,") == {"a": Path("/x/a"), "b": Path("/y")}
    with pytest.raises(ValueError, match="not name=path"):
        planning_repos("a")
    with pytest.raises(ValueError, match="not name=path"):
        planning_repos("no spaces=/x")
    assert not MemoryFlags.from_env({}).planning
    assert MemoryFlags.from_env({"MEMORY_PLANNING": "beads"}).planning
    with pytest.raises(ValueError, match="off or beads"):
        MemoryFlags.from_env({"MEMORY_PLANNING": "jira"})


def checkout(tmp_path: Path, text: str | None) -> Path:
    (tmp_path / ".beads").mkdir(parents=True)
    if text is not None:
        (tmp_path / ".beads" / "issues.jsonl").write_text(text, encoding="utf-8")
    return tmp_path


def test_the_file_is_read_and_written_whole_and_its_failures_named(tmp_path: Path) -> None:
    text = (FIXTURES / "beads-2025-10" / "issues.jsonl").read_text(encoding="utf-8")
    files = BeadsRepos({"ok": checkout(tmp_path / "ok", text),
                        "none": checkout(tmp_path / "none", None),
                        "bad": checkout(tmp_path / "bad", text.replace("}", "", 1))})
    beads = asyncio.run(files.read("ok"))
    asyncio.run(files.write("ok", beads))
    assert (tmp_path / "ok" / ".beads" / "issues.jsonl").read_text(encoding="utf-8") == text
    # The write leaves no temporary file behind.
    assert [p.name for p in (tmp_path / "ok" / ".beads").iterdir()] == ["issues.jsonl"]
    with pytest.raises(PlanningUnavailable, match="does not exist"):
        asyncio.run(files.read("none"))
    with pytest.raises(PlanningUnavailable, match="corrupt: line 1: not JSON"):
        asyncio.run(files.read("bad"))
    with pytest.raises(UnknownRepo):
        asyncio.run(files.read("elsewhere"))


def test_bd_on_the_path_exports_before_a_read_and_imports_after_a_write(
        tmp_path: Path) -> None:
    text = (FIXTURES / "beads-2026-04" / "issues.jsonl").read_text(encoding="utf-8")
    repo = checkout(tmp_path / "repo", text)
    log = tmp_path / "bd.log"
    bd = tmp_path / "bd"
    bd.write_text(f'#!/bin/sh\necho "$PWD $*" >> {log}\n[ "$1" != fail ]\n', encoding="utf-8")
    bd.chmod(bd.stat().st_mode | stat.S_IEXEC)
    files = BeadsRepos({"repo": repo}, bd=str(bd))
    beads = asyncio.run(files.read("repo"))
    asyncio.run(files.write("repo", beads))
    assert log.read_text(encoding="utf-8").splitlines() == [
        f"{repo} export -o .beads/issues.jsonl --json",
        f"{repo} import -i .beads/issues.jsonl --json"]
    assert serialize(beads) == text
    failing = tmp_path / "failing-bd"
    failing.write_text("#!/bin/sh\necho 'no database' >&2\nexit 3\n", encoding="utf-8")
    failing.chmod(failing.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(PlanningUnavailable, match="bd export exited 3: no database"):
        asyncio.run(BeadsRepos({"repo": repo}, bd=str(failing)).read("repo"))


class PendingRepos:
    """The one question the sync timer asks of the planning store."""

    def __init__(self, pending: list[tuple[str, str]]) -> None:
        self._pending = pending

    async def pending_repos(self) -> list[tuple[str, str]]:
        return self._pending


class Sent:
    def __init__(self) -> None:
        self.messages: list[Outbound] = []

    async def produce(self, messages: Sequence[Outbound]) -> None:
        self.messages += messages


def timer_runtime(files: BeadsRepos | None, sent: Sent) -> Runtime:
    return Runtime(stores=InMemoryStores(planning=PendingRepos(
                       [("team-a", "beads"), ("team-b", "beads"), ("team-a", "forgotten")])),
                   embedder=None,  # type: ignore[arg-type]
                   metrics=Metrics(), producer=sent, announcements=None,  # type: ignore[arg-type]
                   max_event_bytes=1024, planning=files)


def test_the_sync_timer_asks_for_each_known_repo_with_write_backs_pending(
        tmp_path: Path) -> None:
    sent = Sent()
    asyncio.run(request_syncs(timer_runtime(BeadsRepos({"beads": tmp_path}), sent)))
    requests = [json.loads(message.value) for message in sent.messages]
    assert [(m.topic, m.key) for m in sent.messages] == [("planning.events", b"beads")] * 2
    assert [(r["type"], r["namespace"], r["payload"]["repo"]) for r in requests] == [
        ("planning.sync_requested", "team-a", "beads"),
        ("planning.sync_requested", "team-b", "beads")]
    off = Sent()
    asyncio.run(request_syncs(timer_runtime(None, off)))
    assert off.messages == []
