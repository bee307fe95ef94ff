"""The context pack of seed 002's read path (its RetrievalGateway), typed in
(`ContextQuery`), typed out (`ContextPack`).

Sections, in order: core (the core blocks of the agent the pack is read as; none without an
agent), planning (with MEMORY_PLANNING=beads and a `planning_ref`: the Beads work item of the
one repo given, its blockers, its ready siblings, read fresh from the repository's file:
streams/reads/planning.py), history (for the error given, or those the run met, the fix
patterns of its signature, most successful first, then similar ones; run digests like the
query), then long-term memories, then documents (the chunks of indexed documents most like
the query, docs/documents.md). Each retrieved section is searched hybrid, like a search, and
everything is packed into the token budget, core first within its share
(processors/recall/context_pack.py). Fail-open per section: a section whose store is down
(or, for planning, whose file is missing or corrupt) contributes nothing and is named in
`degraded` (`index` when the index failed and Postgres answered). Flags: MEMORY_ENABLED,
MEMORY_HISTORY, MEMORY_LONG_TERM, MEMORY_DOCUMENTS, MEMORY_FAIL_OPEN,
MEMORY_CONTEXT_BUDGET_TOKENS, MEMORY_CONTEXT_SHARES, MEMORY_PLANNING.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from memstream_client.ids import fix_pattern_record_id
from processors.memory.blocks import field_lines
from processors.recall.context_pack import Candidate, CoreBlock, CoreField, Pack, pack
from processors.recall.ranking import PROFILES, Fused, Profile, age_in_days
from processors.runs.fix_patterns import error_signature, fix_pattern_title
from stores.core_blocks import CoreBlocks
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex, SearchScope
from stores.records import FoundRecord
from streams.plumbing.config import MemoryFlags
from streams.plumbing.runtime import Runtime
from streams.reads.planning import planning_candidates
from streams.reads.search import (
    NOW,
    Found,
    Hit,
    Viewpoint,
    holds_records,
    hybrid_search,
    with_corrections,
    with_links,
)

log = logging.getLogger(__name__)

# Candidates searched per part; the budget decides how many are kept.
DIGESTS = 5

FIX_PATTERNS = 5

MEMORIES = 30

DOC_CHUNKS = 10

# The sections searched in memory: their items are records (the planning section's are work
# items of a repository's file).
RETRIEVED = ("history", "long_term", "documents")



@dataclass(frozen=True)
class ContextQuery:
    """What a pack is for: its query (empty: the core blocks alone, for a session woken
    without a task) and scope, its profile and budget, the run and error it is for, whether
    each item says how its score was made, each section's share of the budget the core blocks
    leave, the Beads work item of the one repo the scope narrows to, the memory it looks at,
    and the hops the long-term section follows from its best memories along their links.
    `narrowed`: as for a search (streams/reads/search.py `SearchQuery`)."""

    query: str
    scope: SearchScope
    profile: Profile
    budget_tokens: int
    run_id: str | None = None
    error: str | None = None
    explain: bool = False
    shares: Mapping[str, float] = field(default_factory=dict)
    planning_ref: str | None = None
    viewpoint: Viewpoint = NOW
    expand: int = 0
    narrowed: bool = False


def task_query(namespace: str, agent_id: str, task: str, budget_tokens: int,
               min_score: float) -> ContextQuery:
    """The pack a session woken on `task` starts with: the agent's core blocks, and memory
    for its task at the default profile."""
    profile = PROFILES["default"]
    return ContextQuery(task, SearchScope(namespace, MEMORIES, min_score, profile.record_kinds,
                                          agent_id=agent_id,
                                          memory_types=profile.memory_types),
                        profile, budget_tokens, expand=profile.expand_hops)


@dataclass
class Gathered:
    core: list[CoreBlock]
    candidates: list[Candidate]
    degraded: set[str]
    # The hit each searched candidate came from, by record id: how its score was made.
    hits: dict[str, Hit] = field(default_factory=dict)


@dataclass(frozen=True)
class ContextPack:
    """A pack as built: its query, what was packed (and dropped) within the budget, the
    sections that failed (`index`: the index failed and Postgres answered), the hits its
    searched items came from, whether the namespace holds any record, and the sections
    searched in memory."""

    query: ContextQuery
    packed: Pack
    degraded: frozenset[str]
    hits: Mapping[str, Hit]
    holds_records: bool
    searched: frozenset[str]

    @property
    def retrieved_ids(self) -> list[str]:
        """The records of the sections searched in memory, in the order they are packed."""
        return [item.record_id for name in RETRIEVED for item in self.packed.items
                if item.section == name]

    @property
    def found(self) -> int:
        """What the searched sections found, packed or dropped for the budget."""
        return len(self.retrieved_ids) + sum(self.packed.dropped.values())

    @property
    def says_what_memory_holds(self) -> bool:
        """Whether its history or long-term memories were searched, and did not fail."""
        memory = {"history", "long_term"}
        return bool(memory & self.searched) and not memory & self.degraded


async def build_context(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                        flags: MemoryFlags, query: ContextQuery) -> ContextPack:
    """The context pack for `query` (see the module docstring); an empty query packs the
    core blocks alone (a session woken without a task)."""
    gathered = Gathered([], [], set())
    agent = query.scope.agent_id
    if agent is not None:
        try:
            gathered.core = await core_blocks(runtime, query.scope.namespace, agent)
        except Exception:
            if not flags.fail_open:
                raise
            log.exception("context: the core section failed; left out")
            gathered.degraded.add("core")
    # The sections are read at once: each waits on its own store, and packing puts them in
    # order whatever order they arrive in.
    parts = []
    if flags.planning and query.planning_ref is not None:
        (repo,) = query.scope.repos
        parts.append(plan(runtime, flags, query.scope.namespace, repo, query.planning_ref,
                          gathered))
    if query.query:
        parts.append(retrieve(runtime, index, fallback, flags, query, gathered))
    await asyncio.gather(*parts)
    packed = pack(gathered.candidates, query.budget_tokens, gathered.core,
                  duplicate_similarity=runtime.calibration.pack_duplicate,
                  shares=query.shares or flags.context_shares)
    # Planning items are a repository's, not records of the namespace.
    holds = any(candidate.section in RETRIEVED for candidate in gathered.candidates) or \
        await holds_records(runtime, query.scope.namespace)
    for part in sorted(gathered.degraded):
        runtime.metrics.context_degraded.labels(part).inc()
    runtime.metrics.context_items.observe(len(packed.items))
    searched = frozenset(name for name, on in (("history", flags.history),
                                               ("long_term", flags.long_term),
                                               ("documents", flags.documents))
                         if on and query.query)
    return ContextPack(query, packed, frozenset(gathered.degraded), gathered.hits, holds,
                       searched)


async def plan(runtime: Runtime, flags: MemoryFlags, namespace: str, repo: str, ref: str,
               gathered: Gathered) -> None:
    """The planning section: Beads failing (no file, a corrupt one, bd, an item it does not
    hold) leaves it out, named in `degraded`, and never fails the pack."""
    try:
        gathered.candidates += await planning_candidates(runtime, namespace, repo, ref)
    except Exception:
        if not flags.fail_open:
            raise
        log.warning("context: the planning section of %s#%s failed; left out", repo, ref,
                    exc_info=True)
        gathered.degraded.add("planning")



async def retrieve(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                   flags: MemoryFlags, query: ContextQuery, gathered: Gathered) -> None:
    """The candidates of the retrieved sections: history, long-term memories, documents."""
    # The fix patterns of an error are searched by its pattern's title: both texts are
    # embedded in one call, side by side on the model's lanes.
    patterns_like = fix_pattern_title(error_signature(query.error)) \
        if query.error is not None and flags.history else query.query
    texts = [query.query] if patterns_like == query.query else [query.query, patterns_like]
    vector, *like_error = await runtime.embed(texts, role="query")

    async def section(name: str, part: Callable[[], Awaitable[list[Hit]]]) -> None:
        try:
            hits = await part()
        except Exception:
            if not flags.fail_open:
                raise
            log.exception("context: the %s section failed; left out", name)
            gathered.degraded.add(name)
            return
        gathered.candidates += await candidates(runtime, name, hits)
        gathered.hits.update((hit.record.record_id, hit) for hit in hits)

    async def searched(found: Awaitable[Found]) -> list[Hit]:
        result = await found
        if result.degraded:
            gathered.degraded.add("index")
        return result.hits

    sections = []
    if flags.history:
        sections.append(section("history", lambda: history(
            runtime, index, fallback, query, vector,
            (patterns_like, like_error[0] if like_error else vector), searched)))
    if flags.long_term:
        memories = replace(query.scope, record_kinds=("memory",), limit=MEMORIES)
        sections.append(section("long_term", lambda: searched(linked_memories(
            runtime, index, fallback, query, memories, vector))))
    if flags.documents:
        chunks = replace(query.scope, record_kinds=("doc_chunk",), memory_types=(),
                         limit=DOC_CHUNKS)
        sections.append(section("documents", lambda: searched(hybrid_search(
            runtime, index, fallback, query.query, chunks, query.profile, vector,
            query.viewpoint))))
    await asyncio.gather(*sections)



async def linked_memories(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                          query: ContextQuery, memories: SearchScope, vector: Any) -> Found:
    """The long-term section's memories, with those their links reach when asked, each
    contested one below its correction."""
    found = await hybrid_search(runtime, index, fallback, query.query, memories,
                                query.profile, vector, query.viewpoint)
    linked = await with_links(runtime, found, memories, query.expand, query.viewpoint)
    return await with_corrections(runtime, linked, memories, query.viewpoint)



async def core_blocks(runtime: Runtime, namespace: str, agent: str) -> list[CoreBlock]:
    """The agent's core blocks, by label, each field's line with its cost in the model's
    tokens."""
    store: CoreBlocks = runtime.stores.blocks
    found = [block for label in await store.labels(namespace, agent)
             if (block := await store.block(namespace, agent, label)) is not None]
    lines = [field_lines(block.fields) for block in found]
    costs = iter(await asyncio.to_thread(runtime.embedder.token_costs,
                                         [line for each in lines for _, line in each]))
    return [CoreBlock(block.label, block.version,
                      tuple(CoreField(name, line, next(costs)) for name, line in each))
            for block, each in zip(found, lines, strict=True)]



async def history(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                  query: ContextQuery, vector: Any, patterns_like: tuple[str, Any],
                  searched: Callable[[Awaitable[Found]], Awaitable[list[Hit]]]) -> list[Hit]:
    """Fix patterns of the error (given, or met by the run), most successful first, then the
    fix patterns and run digests most like the query. The fix patterns are searched by
    `patterns_like`: the error's pattern title when an error is given, else the query, with
    its embedding."""
    namespace = query.scope.namespace
    if query.error is not None:
        signatures = [error_signature(query.error).signature_id]
    elif query.run_id is not None:
        signatures = await runtime.stores.fix_patterns.run_signatures(namespace, query.run_id)
    else:
        signatures = []
    exact_ids = [fix_pattern_record_id(namespace, s) for s in signatures]
    as_of = query.viewpoint.as_of
    exact = await (runtime.stores.records.records_by_id(namespace, exact_ids) if as_of is None
                   else runtime.stores.records.records_as_of(namespace, exact_ids, as_of))
    hits = sorted(
        (Hit(record, Fused(record.record_id, 1.0, None, None), 1.0, 1.0, 1.0)
         for record in exact.values() if record.review_state in query.scope.review_states),
        key=lambda hit: (-int(hit.record.body.get("success_count", 0)), hit.record.record_id))
    similar, digests = await asyncio.gather(
        searched(hybrid_search(
            runtime, index, fallback, patterns_like[0],
            replace(query.scope, record_kinds=("fix_pattern",), limit=FIX_PATTERNS),
            PROFILES["incident"], patterns_like[1], query.viewpoint)),
        searched(hybrid_search(
            runtime, index, fallback, query.query,
            replace(query.scope, record_kinds=("run_digest",), limit=DIGESTS),
            query.profile, vector, query.viewpoint)))
    seen = {hit.record.record_id for hit in hits}
    return hits + [hit for hit in [*similar, *digests] if hit.record.record_id not in seen]



async def candidates(runtime: Runtime, section: str, hits: Sequence[Hit]) -> list[Candidate]:
    """Hits as pack candidates, each with its cost in the model's tokens: as the record sink
    counted it, or counted here for a record it has not (stored before counts were kept, or
    read as of an earlier version); a contested one's with its note's."""
    # Packing compares vectors: search leaves records without one out, and a fix pattern is
    # always stored with one.
    kept = [(hit, vector) for hit in hits if (vector := hit.record.embedding) is not None]
    now = datetime.now(UTC)
    made = [
        Candidate(
            section=section, record_id=hit.record.record_id, kind=hit.record.record_kind,
            text=hit.record.text, source=source_of(hit.record),
            trust_class=hit.record.trust_class, provenance=hit.record.provenance,
            created_at=hit.record.created_at,
            age_days=age_in_days(hit.record.created_at, now), score=hit.score,
            token_cost=hit.record.text_tokens or 0, vector=vector,
            contested=hit.record.contested, corrects=hit.corrects)
        for hit, vector in kept
    ]
    # What is counted here, in one call: each text not counted yet, and each note.
    counting = [*((at, hit.record.text) for at, (hit, _) in enumerate(kept)
                  if hit.record.text_tokens is None),
                *((at, candidate.note) for at, candidate in enumerate(made)
                  if candidate.note is not None)]
    if not counting:
        return made
    counted = await asyncio.to_thread(runtime.embedder.token_costs,
                                      [text for _, text in counting])
    costs = [candidate.token_cost for candidate in made]
    for (at, _), cost in zip(counting, counted, strict=True):
        costs[at] += cost
    return [replace(candidate, token_cost=cost)
            for candidate, cost in zip(made, costs, strict=True)]


def source_of(record: FoundRecord) -> str:
    """Where an item comes from, for a reader: a document's chunk its document and heading
    path; else its source ref, else its run, else itself."""
    if record.record_kind == "doc_chunk":
        return " > ".join([str(record.body.get("doc_id")), *record.body.get("heading_path", [])])
    if record.source_ref:
        return record.source_ref
    if record.run_ref:
        return f"run:{record.run_ref}"
    return f"record:{record.record_id}"
