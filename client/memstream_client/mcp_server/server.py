"""The MCP server: its tools and resources, each one call (or a few) of the SDK with the
caller's client (`callers.py`). A failure of the API reaches the model as a
tool error that says what was refused and whether trying again may help.

The descriptions are what a model reads to decide when to call a tool: they say when to
recall, what is worth remembering, and what is not.

A write answers what became of it: each writing tool waits, as the SDK's writes do (5 s), for
the worker to decide it, and answers its outcome (memstream_client/sdk/outcomes.py): the record that
holds it (a new one, or the memory it restated), the change made or proposed for review, why
it was refused or dead-lettered, or that it is still pending, with the event id
`write_outcome` reads it by later. Never a record id that no record has."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import Field

from memstream_client.answers.writes import WriteOutcome
from memstream_client.events import (
    MAX_NEXT_STEPS,
    MAX_RATINGS,
    MAX_SESSION_MEMORIES,
    MemoryRating,
    MemoryType,
    Repo,
    SessionMemory,
    Tier,
    WriteScope,
)
from memstream_client.mcp_server.callers import Callers
from memstream_client.sdk import AsyncMemoryClient, MemstreamError
from memstream_client.sdk.outcomes import note
from memstream_client.sdk.routes import DEFAULT_WAIT_S

INSTRUCTIONS = """\
memstream is your long-term memory, shared with the other agents of your team. At the start \
of a task, call `context` (or `recall` for a narrower question) before you act: what was \
decided, what failed before and how it was fixed. When you learn something that will matter \
after this conversation (a decision and why, a lesson from a failure, a fact about the \
project, a preference of the user, a commitment), call `remember` with one self-contained \
memory. Your core blocks (`core_block`) are the notes you always keep at hand. In a work \
session, `wake` first (your last handoff: where you stopped), `checkpoint` what you learn as \
you go, and `sleep` last with a summary and the next steps. A write answers what memory did \
with it: kept (under the record_id it gives), restated in a memory that already said it, \
refused as not worth keeping, or still pending (`write_outcome` reads it later). After you \
used what memory gave you, `rate_memories`: which memories helped and which did not, and \
what you needed and did not find."""

Profile = Literal["default", "planning", "incident", "handoff", "anchor"]
# As many ids as one call of `get_memories` reads: records whole fill a model's context fast.
MAX_IDS = 20
# Records one page of `list_memories` names.
MAX_LISTED = 50
RecordIds = Annotated[list[str], Field(min_length=1, max_length=MAX_IDS)]
Tags = Annotated[list[str], Field(max_length=20)]
RelatedIds = Annotated[list[str], Field(max_length=10)]
Links = Annotated[list[Annotated[str, Field(min_length=1, max_length=200,
                                            pattern=r"^[^\[\]|#]+$")]],
                  Field(max_length=20)]
SessionMemories = Annotated[list[SessionMemory],
                            Field(min_length=1, max_length=MAX_SESSION_MEMORIES)]
NextSteps = Annotated[list[str], Field(max_length=MAX_NEXT_STEPS)]
Ratings = Annotated[list[MemoryRating], Field(min_length=1, max_length=MAX_RATINGS)]
# The longest `write_outcome` may wait: the API's own bound (streams/reads/writes.py).
MAX_WAIT_S = 30.0
# What a model is told to do about a write still pending: read it, not write it twice (the
# worker applies it once it gets to it).
CHECK_LATER = ("call `write_outcome` with its event_id to read what became of it; do not "
               "write it again")


def memory_server(callers: Callers) -> MCPServer:
    """The server whose every call runs with the key `callers` gives it."""
    # WARNING: over stdio the INFO lines (every HTTP request) would flood the client's log.
    server: MCPServer = MCPServer("memstream", instructions=INSTRUCTIONS, log_level="WARNING")

    @asynccontextmanager
    async def memory(ctx: Context) -> AsyncIterator[AsyncMemoryClient]:
        try:
            yield callers.client(ctx.headers)
        except MemstreamError as failure:
            raise ToolError(refusal(failure)) from None

    @server.tool()
    async def recall(
        query: Annotated[str, Field(description="what you want to know, in plain words")],
        ctx: Context,
        profile: Annotated[Profile | None, Field(
            description="planning: decisions and how things are done; incident: what fixed "
                        "an error last time; handoff: where things stand; anchor: a subject "
                        "and what its memories link to (a project's page and the memories "
                        "it links, two hops out); default: all")] = None,
        memory_type: Annotated[list[MemoryType] | None, Field(
            description="only memories of these types")] = None,
        tags: Annotated[list[str] | None, Field(
            description="only memories with a tag of these")] = None,
        related_id: Annotated[str | None, Field(
            description="only memories related to this record id")] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="at most this many")] = 5,
        min_score: Annotated[float | None, Field(
            ge=0, le=1, description="the least relevance a memory must reach (0.5)")] = None,
        explain: Annotated[bool, Field(description=(
            "also say why each memory was recalled: how well its words and its meaning "
            "match, and how your past use and ratings of it moved it"))] = False,
        repo: Annotated[Repo | None, Field(description=(
            "the repository you work in: its memories and the team's, not other "
            "repositories'"))] = None,
        documents: Annotated[bool, Field(description=(
            "search the project's documents (design docs, specs, guides synced into "
            "memstream) instead of memories: each hit is a section of a document"))] = False,
        expand: Annotated[int | None, Field(ge=0, le=3, description=(
            "also follow the best memories' links (wiki-links, related ids, shared names) "
            "this many hops: memories linked to what you found, even in other words"))] = None,
        as_of: Annotated[str | None, Field(description=(
            "memory as it stood at this past moment (ISO 8601), e.g. to see what was "
            "believed when a decision was made; superseded facts show what replaced them"))]
            = None,
    ) -> dict[str, Any]:
        """Search long-term memory for what is relevant to a question: decisions, lessons,
        facts, fixes of past errors, your own personal memories and the team's shared ones.
        Call it before you decide or act on something the team may have met before, and
        before you `remember`, so as not to write what is already known. Each hit has its
        record_id (to read it whole with `get_memories`, to relate or update it), its title,
        text, relevance (0 to 1) and confidence (how sure memory is of it). A fact a newer
        memory restated with another value is left out: it is superseded. While a reviewer
        has not yet confirmed such a correction, the older fact is still shown, below the
        newer one, with `contested` (by which memory, pending which review): it may be out of
        date; the newer says what it `corrects`."""
        async with memory(ctx) as client:
            found = await client.search(query, profile=profile, memory_type=memory_type,
                                        tag=tags, related_id=related_id, limit=limit,
                                        min_score=min_score, explain=explain, repo=repo,
                                        kind="doc_chunk" if documents else None,
                                        expand=expand, as_of=as_of)
        return {"hits": [{"record_id": hit.record_id, "title": hit.title, "text": hit.text,
                          "relevance": round(hit.relevance, 3), "memory_type": hit.memory_type,
                          "tags": hit.tags, "scope": hit.scope, "source_ref": hit.source_ref,
                          "created_at": hit.created_at.isoformat(),
                          "confidence": hit.confidence,
                          **({"via": hit.raw["via"]} if hit.via is not None else {}),
                          **({"superseded_by": hit.invalidated_by,
                              "valid_until": hit.raw["valid_until"]}
                             if hit.invalidated_by is not None else {}),
                          **({"contested": hit.raw["contested"]}
                             if hit.contested is not None else {}),
                          **({"corrects": hit.raw["corrects"]} if hit.corrects else {}),
                          **({"explain": hit.raw["explain"]} if explain else {})}
                         for hit in found.hits],
                "namespace_holds_records": found.namespace_holds_records}

    @server.tool()
    async def related(
        start: Annotated[str, Field(description=(
            "a record id (from `recall`), or entity: and a name (entity:Billing service)"))],
        ctx: Context,
        depth: Annotated[int, Field(ge=1, le=3, description="hops out")] = 1,
    ) -> dict[str, Any]:
        """What memory links to a memory or a name: the memories it relates to or that
        relate to it, the pages its wiki-links name, the names (services, people, projects)
        it mentions and the other memories that mention them, a few hops out. Use it to
        follow a subject from an anchor memory (a project's page) to what belongs with it."""
        async with memory(ctx) as client:
            around = await client.neighbours(start, depth=depth)
        return {"nodes": [node.raw for node in around.nodes], "edges": around.raw["edges"],
                "truncated": around.truncated}

    @server.tool()
    async def remember(
        text: Annotated[str, Field(min_length=1, description=(
            "the memory itself, self-contained: what, why, and when it applies"))],
        ctx: Context,
        memory_type: Annotated[MemoryType | None, Field(description=(
            "lesson (learnt from a failure or a success), decision (and why), pattern (how "
            "things are done here), fact, preference (of the user or team), handoff, "
            "commitment, relationship"))] = None,
        title: Annotated[str | None, Field(description="a short title")] = None,
        tags: Annotated[Tags | None, Field(description="a few words to filter by")] = None,
        scope: Annotated[WriteScope, Field(description=(
            "shared or team: the whole team may read it; personal or user: only you (your "
            "key's agent); project: the team, within `repo`"))] = "shared",
        related_ids: Annotated[RelatedIds | None, Field(description=(
            "record ids of memories this one builds on, corrects or belongs with"))] = None,
        source_ref: Annotated[str | None, Field(description=(
            "where it comes from: a URL, a file, a ticket, a commit"))] = None,
        links: Annotated[Links | None, Field(description=(
            "titles (or record ids) of memories this one links to, such as a project's "
            "anchor memory 'Project: Billing': written as [[wiki links]], which the graph "
            "and the browser follow"))] = None,
        repo: Annotated[Repo | None, Field(description=(
            "the repository it belongs to (required for scope project); none: it holds "
            "for every repository"))] = None,
    ) -> dict[str, Any]:
        """Keep a memory for later tasks, yours and the team's. Worth remembering: a
        decision and its reason, a lesson from a failure (what broke, why, what fixed it),
        how things are done in this project, a fact that took effort to find, a preference
        the user stated, a commitment made. Not worth it: what is in the code or the docs
        already, the steps of the current task, guesses, secrets (they are redacted). One
        memory per call, written so that it makes sense to someone who has not seen this
        conversation. Answers what memory did with it, once decided (it waits a few
        seconds): `stored` under `record_id`; `restated` when a memory already said it
        (`record_id` is that memory, which now holds this too: no new one was made);
        `refused` with `reason` when it holds no fact worth keeping (filler, too short, only
        a secret): nothing is stored; `dead_lettered` with `reason` and `detail` (a related
        id that names no memory); or `pending`: not decided yet, read it later with
        `write_outcome`. Only a `record_id` in the answer names a memory."""
        async with memory(ctx) as client:
            written = await client.write_memory(text, title=title, memory_type=memory_type,
                                                tags=tags, scope=scope, related_ids=related_ids,
                                                source_ref=source_ref, links=links or (),
                                                repo=repo)
        return outcome_view(written)

    @server.tool()
    async def context(
        task: Annotated[str, Field(description="the task you are about to do")],
        ctx: Context,
        budget_tokens: Annotated[int | None, Field(
            ge=1, description="the most tokens the pack may take")] = None,
        profile: Annotated[Profile | None, Field(description="as `recall`'s")] = None,
        error: Annotated[str | None, Field(description=(
            "an error message you met: the fixes that worked for it before come first"))]
            = None,
        repo: Annotated[Repo | None, Field(description="as `recall`'s")] = None,
        planning_ref: Annotated[str | None, Field(description=(
            "the Beads work item you are on (an id such as bd-a1b2, with `repo`): the pack "
            "starts with it, what blocks it and the items ready beside it"))] = None,
    ) -> dict[str, Any]:
        """The context pack for a task, within a token budget: your core blocks first (fields
        that did not fit are named), what fixed the errors met before (history), then the
        long-term memories most relevant to the task. Call it once at the start of a task,
        before planning. `notes` names the memories that a newer one contests, pending review:
        they may be out of date."""
        async with memory(ctx) as client:
            pack = await client.context(task, budget_tokens=budget_tokens, profile=profile,
                                        error=error, repo=repo, planning_ref=planning_ref)
        return pack.raw

    @server.tool()
    async def summarize(
        query: Annotated[str, Field(description="the topic or question, in plain words")],
        ctx: Context,
        budget_tokens: Annotated[int, Field(ge=32, le=4000, description=(
            "the most tokens the brief may take"))] = 400,
        profile: Annotated[Profile | None, Field(description="as `recall`'s")] = None,
        limit: Annotated[int, Field(ge=1, le=50, description=(
            "summarize at most this many memories"))] = 5,
        min_score: Annotated[float | None, Field(
            ge=0, le=1, description="the least relevance a memory must reach (0.5)")] = None,
    ) -> dict[str, Any]:
        """A short brief of what memory knows on a topic, each memory cited by its
        record_id, within a token budget: the most relevant memories condensed to their
        sentences about the query. Use it when you (a sub-agent, or an agent short of
        context) need the gist of what memory holds before you act, without spending your
        context on whole records; use `recall` when you need the memories themselves, and
        `get_memories` to read a cited one whole. A memory a newer one contests, pending
        review, is marked so (and listed under `contested`): it may be out of date."""
        async with memory(ctx) as client:
            brief = await client.summary(query, budget_tokens=budget_tokens, profile=profile,
                                         limit=limit, min_score=min_score)
        return {"summary": brief.summary, "memory_ids": brief.memory_ids,
                "rewritten": brief.rewritten,
                "namespace_holds_records": brief.namespace_holds_records,
                **({"contested": brief.raw["contested"]} if brief.contested else {})}

    @server.tool()
    async def get_memories(
        record_ids: Annotated[RecordIds, Field(description="the record ids to read")],
        ctx: Context,
    ) -> dict[str, Any]:
        """Read records whole by their ids (from `recall`, `context` or a related id): text,
        type, tags, related ids, version (which `update_memory` needs), provenance. Ids that
        name no record you may read are listed under `not_found`."""
        async with memory(ctx) as client:
            found = await client.records(record_ids)
        return {"records": [record.raw for record in found.records],
                "not_found": found.not_found}

    @server.tool()
    async def list_memories(
        ctx: Context,
        personal: Annotated[bool, Field(description=(
            "only your personal memories (your working memory with tier active), not the "
            "team's shared ones"))] = False,
        tier: Annotated[list[Tier] | None, Field(description=(
            "only these tiers: active (working memory), short_term, long_term"))] = None,
        memory_type: Annotated[list[MemoryType] | None, Field(
            description="only memories of these types")] = None,
        cursor: Annotated[str | None, Field(description=(
            "the `next` of the page before, to go on"))] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LISTED, description="at most this many")]
            = 20,
    ) -> dict[str, Any]:
        """List memories newest first, each its record_id, title and a one-line
        description: an overview of what you hold (with `personal` and tier active, your
        working memory) before you decide to update one or write a new one. Read the ones that
        matter whole with `get_memories`; `next`, when not null, gives the next page."""
        async with memory(ctx) as client:
            listed = await client.list_records(
                kind="memory", scope="personal" if personal else None, tier=tier,
                memory_type=memory_type, cursor=cursor, limit=limit)
        return {"memories": [{"record_id": item.record_id, "title": item.title,
                              "description": item.description, "memory_type": item.memory_type,
                              "tier": item.tier, "scope": item.scope,
                              "created_at": item.created_at.isoformat()}
                             for item in listed.records],
                "next": listed.next}

    @server.tool()
    async def update_memory(
        record_id: str,
        expected_version: Annotated[int, Field(ge=1, description=(
            "the version you read (`get_memories`): the update is refused if it changed"))],
        ctx: Context,
        text: Annotated[str | None, Field(min_length=1)] = None,
        title: str | None = None,
        memory_type: MemoryType | None = None,
        tags: Tags | None = None,
        related_ids: RelatedIds | None = None,
    ) -> dict[str, Any]:
        """Correct or complete a memory you read, rather than writing a second one that
        contradicts it: the fields given replace the record's. Answers, once decided (it
        waits a few seconds): `updated` (its new `version`); `proposed` when the record is
        protected: the change waits for a reviewer as the pending diff `diff_id`;
        `unchanged`; `dead_lettered` with `reason` (`stale_version`: it changed since you
        read it, read it again); or `pending`, to read later with `write_outcome`."""
        async with memory(ctx) as client:
            changed = await client.update_memory(
                record_id, expected_version=expected_version, text=text, title=title,
                memory_type=memory_type, tags=tags, related_ids=related_ids)
        return outcome_view(changed)

    @server.tool()
    async def core_block(
        label: Annotated[str, Field(description="the block: persona, user, project, …")],
        ctx: Context,
        set: Annotated[dict[str, str | list[str]] | None, Field(description=(
            "fields to replace"))] = None,
        append: Annotated[dict[str, list[str]] | None, Field(description=(
            "items to add to list fields"))] = None,
    ) -> dict[str, Any]:
        """Your core memory block `label`: the few notes you always keep at hand (who you are
        working with, what they prefer, the project's state). Without `set` or `append` it is
        read; with them it is edited, and the answer says how, once decided: `updated` (the
        block's new `version`), `proposed` when the block is protected (the pending diff
        `diff_id` waits for a reviewer), `dead_lettered` with `reason`, or `pending`. Keep
        blocks short; put the rest in `remember`."""
        async with memory(ctx) as client:
            if set is None and append is None:
                return (await client.block(label)).raw
            edited = await client.edit_block(label, set=set, append=append)
        return {"agent_id": edited.agent_id, "label": edited.label, **outcome_view(edited)}

    @server.tool()
    async def wake(
        ctx: Context,
        task: Annotated[str, Field(max_length=4000, description=(
            "what this session is for: the context pack is searched for it"))] = "",
        budget_tokens: Annotated[int | None, Field(
            ge=1, description="the most tokens the context pack may take")] = None,
    ) -> dict[str, Any]:
        """Start a work session: answers its session_id (for `checkpoint` and `sleep`), the
        handoff your last session left (its summary and next steps: where you stopped) and
        the context pack for the task, your core blocks first. Call it first, once per
        session."""
        async with memory(ctx) as client:
            return (await client.wake(task, budget_tokens=budget_tokens)).raw

    @server.tool()
    async def checkpoint(
        session_id: Annotated[str, Field(description="the session_id `wake` answered")],
        memories: Annotated[SessionMemories, Field(description=(
            "what to keep now, each self-contained (personal to you unless scope is "
            "shared)"))],
        ctx: Context,
    ) -> dict[str, Any]:
        """Keep what this session learnt so far, mid-session, before it may be lost: the same
        kind of memories as `remember` (decisions, lessons, facts, preferences), up to 20 in
        one call. Answers, in `writes`, what became of each memory, in the order given, as
        `remember` answers it (stored, restated, refused, dead-lettered or pending); and in
        `record_ids` the memories that hold those kept."""
        async with memory(ctx) as client:
            accepted = await client.checkpoint(
                session_id, [item.model_dump(exclude_none=True) for item in memories])
        return {"session_id": accepted.session_id, "record_ids": accepted.record_ids,
                "writes": [outcome_view(write) for write in accepted.writes]}

    @server.tool()
    async def sleep(
        session_id: Annotated[str, Field(description="the session_id `wake` answered")],
        summary: Annotated[str, Field(min_length=1, max_length=8000, description=(
            "what was done and where things stand"))],
        ctx: Context,
        next_steps: Annotated[NextSteps | None, Field(description=(
            "what the next session should do first"))] = None,
    ) -> dict[str, Any]:
        """End the session: the summary and next steps become your handoff, which your next
        `wake` answers. Call it last, when the work stops (done or not). Answers what became
        of the handoff, as `remember` answers a write (`handoff`), and the memory that holds
        it (`handoff_record_id`, null until memory keeps it)."""
        async with memory(ctx) as client:
            accepted = await client.sleep(session_id, summary, next_steps=next_steps)
        return {"session_id": accepted.session_id,
                "handoff_record_id": accepted.handoff_record_id,
                "handoff": None if not accepted.writes else outcome_view(accepted.writes[0])}

    @server.tool()
    async def write_outcome(
        event_id: Annotated[str, Field(min_length=1, max_length=200, description=(
            "the event_id a writing tool answered with `pending`"))],
        ctx: Context,
        wait_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S, description=(
            "wait up to this many seconds for it to be decided"))] = DEFAULT_WAIT_S,
    ) -> dict[str, Any]:
        """What became of a write that a tool (`remember`, `update_memory`, `core_block`,
        `checkpoint`, `sleep`) answered `pending`: read it by its event_id. Answers as that
        tool would have once decided (`stored` or `restated` with the `record_id` that holds
        it, `updated`, `proposed` with its `diff_id`, `refused` or `dead_lettered` with
        `reason`), or still `pending`."""
        async with memory(ctx) as client:
            found = await client.write_outcome(event_id, wait_s=wait_s)
        return outcome_view(found)

    @server.tool()
    async def rate_memories(
        ratings: Annotated[Ratings, Field(description=(
            "each memory you were given and used or set aside: its record_id as memory_id, "
            "and useful true if it helped with the task, false if it did not"))],
        ctx: Context,
        gap: Annotated[str | None, Field(min_length=1, max_length=2000, description=(
            "what you needed and memory did not hold, in plain words"))] = None,
        gap_query: Annotated[str | None, Field(min_length=1, max_length=1000, description=(
            "what you searched for when you met the gap"))] = None,
    ) -> dict[str, Any]:
        """Tell memory which of the memories it gave you (`recall`, `context`, `wake`)
        helped and which did not, once you have used them: the helpful ones come first in
        your later recalls, the unhelpful ones sink a little (never out of reach). Judge each
        plainly (it helped with the task or it did not); rate only memories you were given.
        When you needed something memory did not hold, say so in `gap` (and `gap_query`,
        what you searched for): it shows the team what to write down. A memory id that does
        not exist or that you may not read is refused as not found, and nothing is rated."""
        async with memory(ctx) as client:
            accepted = await client.rate_memories(
                [rating.model_dump() for rating in ratings], gap=gap, gap_query=gap_query)
        return {"event_id": accepted.event_id, "rated": accepted.rated}

    @server.resource("memstream://blocks/{label}", mime_type="application/json",
                     description="your core memory block `label`, as `core_block` reads it")
    async def block_resource(label: str, ctx: Context) -> dict[str, Any]:
        try:
            return (await callers.client(ctx.headers).block(label)).raw
        except MemstreamError as failure:
            raise ResourceError(refusal(failure)) from None

    @server.resource("memstream://records/{record_id}", mime_type="application/json",
                     description="one record, its versions and its lineage")
    async def record_resource(record_id: str, ctx: Context) -> dict[str, Any]:
        try:
            return (await callers.client(ctx.headers).record(record_id)).raw
        except MemstreamError as failure:
            raise ResourceError(refusal(failure)) from None

    return server


def outcome_view(outcome: WriteOutcome) -> dict[str, Any]:
    """A write's outcome as a model reads it: its event id, and once decided the record it
    made, restated or changed, the version it made, the pending diff it became, why it was
    refused or dead-lettered; what that means (`note`). While it is pending no record is
    named, not even the one an update is for: none holds the write yet."""
    view: dict[str, Any] = {"outcome": outcome.outcome, "event_id": outcome.event_id}
    if outcome.decided:
        view.update((name, value) for name, value in (
            ("record_id", outcome.record_id), ("version", outcome.version),
            ("diff_id", outcome.diff_id), ("reason", outcome.reason),
            ("detail", outcome.detail)) if value is not None)
    said_more = note(outcome, CHECK_LATER)
    return view if said_more is None else {**view, "note": said_more}


def refusal(failure: MemstreamError) -> str:
    """What the model is told of a failed call: what was refused, and whether to try
    again."""
    said = f"{failure.status} " if failure.status else ""
    reason = f" ({failure.reason})" if failure.reason else ""
    advice = "try again later" if failure.retriable else "do not retry as is"
    return f"{said}{failure.detail}{reason}; {advice}"
