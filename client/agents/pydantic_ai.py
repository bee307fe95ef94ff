"""Seed 000's and seed 001's memory tools as a pydantic-ai toolset (docs/agents.md).

An agent run's deps are a `MemoryRun`: the SDK client, the run's id (which the server
budgets searches by: at most `max_searches_per_run`, 10 by default, then a search is
refused), and the run's counters. `memory_toolset()` holds the tools; `memory_reminder` is
the output validator that sends the agent back once when it tries to finish without having
checked or written memory, and accepts its output the second time.

A tool never makes the run fail because memory did: a failure the model cannot fix is
answered as the tool's result (`error`, `retriable`); one it can fix (a parameter refused,
a related id that names no memory) is a `ModelRetry` that says what to change.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.toolsets import FunctionToolset

from client.sdk import AsyncMemoryClient, BadRequest, MemstreamError, NotFound
from schemas.answers.recall import SearchAnswer
from schemas.answers.records import StoredRecord
from schemas.events import MAX_RELATED_IDS

# Seed 000: top 5, relevance at least 0.5.
SEARCH_LIMIT = 5
MIN_RELEVANCE = 0.5
# What a memory-grounded summary may take of the model's context, in tokens.
SUMMARY_TOKENS = 400
# Times in a row a tool may send the model back to fix its call (a related id that names no
# memory, a parameter refused) before the run fails.
TOOL_RETRIES = 3
REMINDER = ("Before you finish: {missing}. Check memory for what earlier runs learnt about "
            "this task, and write what this run learnt that will help the next one (general "
            "insights, not this task's details). Then give your answer again.")

Output = TypeVar("Output")
A = TypeVar("A")


@dataclass
class MemoryCounters:
    """What a run did with memory (seed 000's deps)."""

    # Memories written, created or updated.
    memories_written: int = 0
    # Memories shown to the model: search hits and memories read by id.
    checked_memories: int = 0
    # Searches asked of the server, those it refused included (it counts them too).
    memory_searches: int = 0

    @property
    def checked(self) -> bool:
        return self.memory_searches > 0 or self.checked_memories > 0

    def missing(self) -> list[str]:
        """What the run has not done with memory yet."""
        return [what for what, done in (("you have not checked memory", self.checked),
                                        ("you have not written memory",
                                         self.memories_written > 0)) if not done]


@dataclass
class MemoryRun:
    """An agent run's deps: the client (its key decides the namespace, the permissions and
    the agent whose active memories seed 001's tools keep), the run's id (one per run: the
    server budgets searches by it), and what the run did with memory."""

    memory: AsyncMemoryClient
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    counters: MemoryCounters = field(default_factory=MemoryCounters)
    reminded: bool = False


def memory_reminder(ctx: RunContext[MemoryRun], output: Output) -> Output:
    """Seed 000's nudge, as an output validator (`agent.output_validator(memory_reminder)`):
    the first time the agent tries to finish without having checked or written memory, it
    is sent back with a reminder; after that its output is accepted."""
    run = ctx.deps
    missing = run.counters.missing()
    if missing and not run.reminded:
        run.reminded = True
        raise ModelRetry(REMINDER.format(missing=" and ".join(missing)))
    return output


def memory_toolset(*, search_limit: int = SEARCH_LIMIT, min_relevance: float = MIN_RELEVANCE,
                   summary_tokens: int = SUMMARY_TOKENS) -> FunctionToolset[MemoryRun]:
    """Seed 000's tools (`write_memory`, `semantic_memory_search`, `card_memory_search`,
    `subagent_memory_search`) and seed 001's (`create_active_memory`,
    `update_active_memory`, `get_detailed_active_memories`), for an agent whose deps are a
    `MemoryRun`."""
    toolset = FunctionToolset[MemoryRun](max_retries=TOOL_RETRIES)

    @toolset.tool
    async def write_memory(ctx: RunContext[MemoryRun], text: str, title: str | None = None,
                           related_ids: list[str] | None = None,
                           tags: list[str] | None = None) -> dict[str, Any]:
        """Write a durable insight to memory, for later runs: something general
        that this run learnt (a pattern, a pitfall, what worked), not the task's details
        and nothing about a user.

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
            text, title=title, related_ids=related, tags=tags, source_ref=f"run:{run.run_id}"))
        if isinstance(written, dict):
            return written
        run.counters.memories_written += 1
        return {"record_id": written.record_id, "written": True}

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
        when nothing you hold is about it; else update that one.

        Args:
            title: What it is about.
            content: The whole of what to keep.
        """
        run = ctx.deps
        written = await call(run.memory.write_memory(
            content, title=title, tier="active", scope="personal",
            source_ref=f"run:{run.run_id}"))
        if isinstance(written, dict):
            return written
        run.counters.memories_written += 1
        return {"memory_id": written.record_id, "created": True}

    @toolset.tool
    async def update_active_memory(ctx: RunContext[MemoryRun], memory_id: str,
                                   content: str | None = None,
                                   title: str | None = None) -> dict[str, Any]:
        """Update an active memory: read it first (get_detailed_active_memories) and give
        its whole new content, not only what changed. Your own active memories change at
        once; a protected memory (a shared or promoted approved one) only once a reviewer
        approves.

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
        accepted = await call(run.memory.update_memory(
            memory_id, expected_version=current.version, text=content, title=title))
        if isinstance(accepted, dict):
            return accepted
        run.counters.memories_written += 1
        # Whether it applies at once or waits for review, the worker decides after this
        # answer: the change's id names the pending diff in the second case.
        return {"memory_id": memory_id, "accepted": True, "change_id": accepted.event_id,
                "based_on_version": current.version,
                "applies": "at once to your own active memory; to a protected one when a "
                           "reviewer approves the pending diff change_id"}

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

    return toolset


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
    letter the write otherwise, after the tool had answered); why not, if the check could
    not be made."""
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
