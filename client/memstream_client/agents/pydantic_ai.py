"""Seed 000's and seed 001's memory tools as a pydantic-ai toolset (docs/agents.md).

An agent run's deps are a `MemoryRun`: the SDK client, the run's id (which the server
budgets searches by: at most `max_searches_per_run`, 10 by default, then a search is
refused), and the run's counters. `memory_toolset()` holds the tools; `memory_reminder` is
the output validator that sends the agent back once when it tries to finish without having
checked or written memory, and accepts its output the second time.

A write answers what became of it (docs/agents.md): each writing tool waits, as the SDK's
writes do, up to `wait_s` (5 s) for the worker to decide it, and answers the record that holds
it (a new one, or the memory it restated), the pending diff it became, why it was refused or
dead-lettered, or that it is still pending with the event id `check_memory_write` reads it
by. Never an id that no record has. The counters count what memory kept, not what was sent:
a pending write is counted once it is found kept (by `check_memory_write`, or by the reminder,
which reads the outcomes still pending before it judges).

A tool never makes the run fail because memory did: a failure the model cannot fix is
answered as the tool's result (`error`, `retriable`); a call it can fix before anything is
written (a parameter refused, a related id that names no memory) is a `ModelRetry` that says
what to change. A write the worker judged (refused, dead-lettered) is the tool's result: it
was sent, and the model decides what to do about it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.toolsets import FunctionToolset

from memstream_client.answers.recall import SearchAnswer
from memstream_client.answers.records import StoredRecord
from memstream_client.answers.writes import WriteOutcome
from memstream_client.events import MAX_RELATED_IDS
from memstream_client.sdk import AsyncMemoryClient, BadRequest, MemstreamError, NotFound
from memstream_client.sdk.outcomes import CHANGED, HELD, held_by, note
from memstream_client.sdk.routes import DEFAULT_WAIT_S

# Seed 000: top 5, relevance at least 0.5.
SEARCH_LIMIT = 5
MIN_RELEVANCE = 0.5
# What a memory-grounded summary may take of the model's context, in tokens.
SUMMARY_TOKENS = 400
# Times in a row a tool may send the model back to fix its call (a related id that names no
# memory, a parameter refused) before the run fails.
TOOL_RETRIES = 3
# What the model is told to do about a write still pending: read it, not write it twice (the
# worker applies it once it gets to it).
CHECK_LATER = ("check_memory_write with this event_id reads what became of it; do not write "
               "it again")

Output = TypeVar("Output")
A = TypeVar("A")


@dataclass
class MemoryCounters:
    """What a run did with memory (seed 000's deps)."""

    # Writes memory kept: memories stored or restated (write_memory, create_active_memory),
    # updates applied or proposed for review (update_active_memory). Not those refused,
    # dead-lettered or still pending.
    memories_written: int = 0
    # Memories shown to the model: search hits and memories read by id.
    checked_memories: int = 0
    # Searches asked of the server, those it refused included (it counts them too).
    memory_searches: int = 0

    @property
    def checked(self) -> bool:
        return self.memory_searches > 0 or self.checked_memories > 0


@dataclass
class MemoryRun:
    """An agent run's deps: the client (its key decides the namespace, the permissions and
    the agent whose active memories seed 001's tools keep), the run's id (one per run: the
    server budgets searches by it), and what the run did with memory."""

    memory: AsyncMemoryClient
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    counters: MemoryCounters = field(default_factory=MemoryCounters)
    reminded: bool = False
    # The writes not decided when their tool answered, by event id: the outcomes that will
    # count each as written once it is decided.
    pending_writes: dict[str, frozenset[str]] = field(default_factory=dict)

    def count(self, outcome: WriteOutcome, counted: frozenset[str]) -> None:
        """Count a write by its outcome: written if `counted` holds it; pending, once it
        is found decided so (`decided`)."""
        if not outcome.decided:
            self.pending_writes[outcome.event_id] = counted
        elif outcome.outcome in counted:
            self.counters.memories_written += 1

    def decided(self, outcome: WriteOutcome) -> None:
        """A pending write's outcome read again: counted once decided, if memory kept it."""
        counted = self.pending_writes.get(outcome.event_id)
        if counted is not None and outcome.decided:
            del self.pending_writes[outcome.event_id]
            self.count(outcome, counted)


async def memory_reminder(ctx: RunContext[MemoryRun], output: Output) -> Output:
    """Seed 000's nudge, as an output validator (`agent.output_validator(memory_reminder)`):
    the first time the agent tries to finish without having checked memory or without
    memory having kept a write of its, it is sent back with a reminder; after that its
    output is accepted. The writes still pending are read again first: one kept since counts;
    one still pending does not, and the reminder asks the agent to check it."""
    run = ctx.deps
    await settle(run)
    if run.reminded:
        return output
    reminder = reminder_of(run)
    if reminder is not None:
        run.reminded = True
        raise ModelRetry(reminder)
    return output


async def settle(run: MemoryRun) -> None:
    """Read again the outcome of each write still pending (without waiting): those decided
    since are counted. Memory failing leaves them pending: the reminder is no reason to
    fail the run."""
    for event_id in list(run.pending_writes):
        try:
            run.decided(await run.memory.write_outcome(event_id))
        except MemstreamError:
            return


def reminder_of(run: MemoryRun) -> str | None:
    """What the run has not done with memory, and what to do about it; None when it has
    checked memory and memory kept a write of its."""
    missing, asks = [], []
    if not run.counters.checked:
        missing.append("you have not checked memory")
        asks.append("check memory for what earlier runs learnt about this task")
    if run.counters.memories_written == 0 and run.pending_writes:
        missing.append("memory has not kept anything you wrote yet (still pending: event "
                       f"{', '.join(run.pending_writes)})")
        asks.append("read what became of it with check_memory_write, and write again only "
                    "what it says memory did not keep")
    elif run.counters.memories_written == 0:
        missing.append("you have not written memory")
        asks.append("write what this run learnt that will help the next one (general "
                    "insights, not this task's details)")
    if not missing:
        return None
    advice = ", and ".join(asks)
    return (f"Before you finish: {' and '.join(missing)}. {advice[0].upper()}{advice[1:]}. "
            "Then give your answer again.")


def memory_toolset(*, search_limit: int = SEARCH_LIMIT, min_relevance: float = MIN_RELEVANCE,
                   summary_tokens: int = SUMMARY_TOKENS,
                   wait_s: float = DEFAULT_WAIT_S) -> FunctionToolset[MemoryRun]:
    """Seed 000's tools (`write_memory`, `semantic_memory_search`, `card_memory_search`,
    `subagent_memory_search`) and seed 001's (`create_active_memory`,
    `update_active_memory`, `get_detailed_active_memories`), for an agent whose deps are a
    `MemoryRun`; and memstream's `check_memory_write`, which reads what became of a write
    still pending. A write waits up to `wait_s` for the worker to decide it."""
    toolset = FunctionToolset[MemoryRun](max_retries=TOOL_RETRIES)

    @toolset.tool
    async def write_memory(ctx: RunContext[MemoryRun], text: str, title: str | None = None,
                           related_ids: list[str] | None = None,
                           tags: list[str] | None = None) -> dict[str, Any]:
        """Write a durable insight to memory, for later runs: something general
        that this run learnt (a pattern, a pitfall, what worked), not the task's details
        and nothing about a user. Answers what memory did with it: `stored` under
        `record_id`; `restated` when a memory already said it (`record_id` is that memory,
        which now holds your write too); `refused` with `reason` when it holds no fact worth
        keeping (filler, too short, only a secret); `dead_lettered` with `reason`; or
        `pending` with the `event_id` to check it by. `written` is true only when memory
        keeps it.

        Args:
            text: The insight, self-contained.
            title: A short title.
            related_ids: Ids of up to 10 memories it relates to.
            tags: Words to file it under.
        """
        run = ctx.deps
        related = list(related_ids or [])
        unchecked = await check_related(run, related)
        if unchecked is not None:
            return unchecked
        written = await call(run.memory.write_memory(
            text, title=title, related_ids=related, tags=tags, source_ref=f"run:{run.run_id}",
            wait_s=wait_s))
        if isinstance(written, dict):
            return written
        run.count(written, HELD)
        return {**written_view(written), "written": written.outcome in HELD}

    @toolset.tool
    async def semantic_memory_search(ctx: RunContext[MemoryRun], query: str) -> dict[str, Any]:
        """Search memory in natural language for what earlier runs learnt: the 5 most
        relevant memories, if any is relevant enough. A run may search 10 times.

        Args:
            query: What you want to know.
        """
        found = await searched(ctx.deps, query, min_relevance, search_limit)
        return found if isinstance(found, dict) else hits_view(found)

    @toolset.tool
    async def card_memory_search(ctx: RunContext[MemoryRun], related_ids: list[str],
                                 query: str | None = None) -> dict[str, Any]:
        """Find the memories related to some memories (those that list any of their ids in
        their related ids): without a query, those related to the most of them first, then
        the newest; with one, the closest to it first. Counts as a search.

        Args:
            related_ids: The ids (up to 10) of the memories they relate to.
            query: What you want to know about them, if anything in particular.
        """
        if not related_ids or len(related_ids) > MAX_RELATED_IDS:
            raise ModelRetry(f"give 1 to {MAX_RELATED_IDS} related ids")
        # The relation is the filter: relevance only ranks what it lets through.
        found = await searched(ctx.deps, query, 0.0, search_limit, related_ids=related_ids)
        return found if isinstance(found, dict) else hits_view(found)

    @toolset.tool
    async def subagent_memory_search(ctx: RunContext[MemoryRun], query: str) -> str:
        """A short summary of what memory holds about `query`, each memory cited by its id
        (read one whole with get_detailed_active_memories). Counts as a search.

        Args:
            query: What you want to know.
        """
        run = ctx.deps
        run.counters.memory_searches += 1
        answer = await call(run.memory.summary(
            query, run_id=run.run_id, min_score=min_relevance, limit=search_limit,
            budget_tokens=summary_tokens))
        if isinstance(answer, dict):
            return str(answer["error"])
        if answer.budget_exhausted or answer.summary is None:
            return str(budget_spent(answer.max_searches_per_run)["error"])
        run.counters.checked_memories += len(answer.memory_ids)
        return answer.summary

    @toolset.tool
    async def create_active_memory(ctx: RunContext[MemoryRun], title: str,
                                   content: str) -> dict[str, Any]:
        """Create an active memory of your own (working memory for what you are doing now)
        when nothing you hold is about it; else update that one. Answers its `memory_id`
        once memory stored it (`created`); `restated` when an active memory of yours already
        says it (`memory_id` is that one: update it from now on); `refused` or
        `dead_lettered` with `reason`; or `pending` with the `event_id` to check it by.

        Args:
            title: What it is about.
            content: The whole of what to keep.
        """
        run = ctx.deps
        written = await call(run.memory.write_memory(
            content, title=title, tier="active", scope="personal",
            source_ref=f"run:{run.run_id}", wait_s=wait_s))
        if isinstance(written, dict):
            return written
        run.count(written, HELD)
        view = written_view(written, "memory_id")
        return {**view, "created": written.outcome == "stored"}

    @toolset.tool
    async def update_active_memory(ctx: RunContext[MemoryRun], memory_id: str,
                                   content: str | None = None,
                                   title: str | None = None) -> dict[str, Any]:
        """Update an active memory: read it first (get_detailed_active_memories) and give
        its whole new content, not only what changed. Your own active memories change at
        once; a protected memory (a shared or promoted approved one) only once a reviewer
        approves. Answers `updated` (`applied`, its new `version`); `proposed`, waiting for
        review as the pending diff `change_id`; `unchanged`; `dead_lettered` with `reason`
        (e.g. it changed since it was read); or `pending` with the `event_id` to check it by.

        Args:
            memory_id: The memory's id.
            content: Its whole new content.
            title: Its new title.
        """
        run = ctx.deps
        if content is None and title is None:
            raise ModelRetry("give the memory's new content or title")
        current = await call(run.memory.record(memory_id))
        if isinstance(current, dict):
            return current
        changed = await call(run.memory.update_memory(
            memory_id, expected_version=current.version, text=content, title=title,
            wait_s=wait_s))
        if isinstance(changed, dict):
            return changed
        run.count(changed, CHANGED)
        view = {"memory_id": memory_id, "outcome": changed.outcome,
                "applied": changed.outcome == "updated",
                "based_on_version": current.version}
        if changed.outcome == "updated":
            view["version"] = changed.version
        if changed.outcome == "proposed":
            view["change_id"] = changed.diff_id
        return {**view, **explained(changed)}

    @toolset.tool
    async def get_detailed_active_memories(ctx: RunContext[MemoryRun],
                                           active_memory_ids: list[str]) -> dict[str, Any]:
        """Read memories whole by their ids.

        Args:
            active_memory_ids: The memories' ids.
        """
        run = ctx.deps
        if not active_memory_ids:
            raise ModelRetry("give the ids of the memories to read")
        found = await call(run.memory.records(active_memory_ids))
        if isinstance(found, dict):
            return found
        run.counters.checked_memories += len(found.records)
        return {"memories": [{**memory_view(record), "version": record.version}
                             for record in found.records],
                "not_found": found.not_found}

    @toolset.tool
    async def check_memory_write(ctx: RunContext[MemoryRun], event_id: str) -> dict[str, Any]:
        """What became of a write a tool answered `pending`: read it by the `event_id` that
        tool gave (waits a few seconds for it). Answers as the write would have: the
        `record_id` memory keeps it under, the pending diff `change_id`, why it was refused
        or dead-lettered, or still `pending`.

        Args:
            event_id: The event_id of the pending write.
        """
        run = ctx.deps
        found = await call(run.memory.write_outcome(event_id, wait_s=wait_s))
        if isinstance(found, dict):
            return found
        run.decided(found)
        view = written_view(found)
        # Decided, its record is the one it made or changed (a refused or dead-lettered
        # write has none).
        if found.decided and found.record_id is not None:
            view = {**view, "record_id": found.record_id, "version": found.version}
        if found.outcome == "proposed":
            view["change_id"] = found.diff_id
        return view

    return toolset


def written_view(outcome: WriteOutcome, id_name: str = "record_id") -> dict[str, Any]:
    """A write's outcome as the model reads it: the record that holds it (under `id_name`)
    when memory keeps it, and what became of it otherwise."""
    held = held_by(outcome)
    return {"outcome": outcome.outcome, **({id_name: held} if held is not None else {}),
            **explained(outcome)}


def explained(outcome: WriteOutcome) -> dict[str, Any]:
    """What the model needs beyond the outcome's name: why it was refused or dead-lettered,
    and while it is pending, the event id to read it by."""
    said_more = note(outcome, CHECK_LATER)
    return {**({"reason": outcome.reason} if outcome.reason else {}),
            **({} if outcome.decided else {"event_id": outcome.event_id}),
            **({"note": said_more} if said_more is not None else {})}


async def searched(run: MemoryRun, query: str | None, min_relevance: float, limit: int,
                   related_ids: Sequence[str] | None = None) -> SearchAnswer | dict[str, Any]:
    """A search for the run, counted, or why it answered nothing (the run's budget spent,
    or the search failed)."""
    run.counters.memory_searches += 1
    answer = await call(run.memory.search(query, run_id=run.run_id, min_score=min_relevance,
                                          limit=limit, related_id=related_ids))
    if isinstance(answer, dict):
        return answer
    if answer.budget_exhausted:
        return budget_spent(answer.max_searches_per_run)
    run.counters.checked_memories += len(answer.hits)
    return answer


def budget_spent(max_searches_per_run: int | None) -> dict[str, Any]:
    """What a search tool answers once the server refused the run's search."""
    return {"error": f"search refused: this run has made its {max_searches_per_run} "
                     "searches. Work with what you found; you can still write memory.",
            "budget_exhausted": True}


def hits_view(answer: SearchAnswer) -> dict[str, Any]:
    """Search hits as the model reads them."""
    return {"hits": [{"record_id": hit.record_id, "title": hit.title, "text": hit.text,
                      "relevance": hit.relevance, "related_ids": hit.related_ids,
                      "tags": hit.tags} for hit in answer.hits]}


def memory_view(record: StoredRecord) -> dict[str, Any]:
    """A memory read by id, as the model reads it."""
    return {"memory_id": record.record_id, "title": record.title, "content": record.text,
            "tier": record.tier, "tags": record.tags, "related_ids": record.related_ids,
            "created_at": record.created_at.isoformat()}


async def check_related(run: MemoryRun, related_ids: Sequence[str]) -> dict[str, Any] | None:
    """Seed 000: at most 10 related ids, each a memory that exists (the worker would dead-
    letter the write otherwise); why not, if the check could not be made."""
    if len(related_ids) > MAX_RELATED_IDS:
        raise ModelRetry(f"at most {MAX_RELATED_IDS} related ids; keep the closest")
    if not related_ids:
        return None
    found = await call(run.memory.records(related_ids))
    if isinstance(found, dict):
        return found
    if found.not_found:
        raise ModelRetry(f"related ids {', '.join(map(repr, found.not_found))} name no "
                         "memory; give ids that a search answered")
    return None


async def call(pending: Awaitable[A]) -> A | dict[str, Any]:
    """The answer, or, when memory failed, the tool's result that says so: a request the
    model can fix is sent back to it (`ModelRetry`); a record it may not see is missing."""
    try:
        return await pending
    except BadRequest as exc:
        raise ModelRetry(f"refused: {exc.detail}") from None
    except NotFound as exc:
        return {"error": f"not found: {exc.detail}", "not_found": True}
    except MemstreamError as exc:
        return {"error": f"memory failed: {exc}", "retriable": exc.retriable}
