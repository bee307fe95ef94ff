"""`GET /v1/context`: the context pack of seed 002's read path (its RetrievalGateway).

    namespace, query, run_id?, error?, budget_tokens?, profile?, agent_id?, min_score?,
    planning_ref? (with one repo)

Sections, in order: core (the core blocks of the agent the pack is read as: the key's, or the
one an admin key names; none without an agent), planning (with MEMORY_PLANNING=beads and a
`planning_ref`: the Beads work item of the `repo` given, its blockers, its ready siblings,
read fresh from the repository's file: streams/api/operations/planning.py), history (for the error
given, or those the run met, the fix patterns of its signature, most successful first, then
similar ones; run digests like the query), then long-term memories, then documents (the
chunks of indexed documents most like the query, docs/documents.md). Each retrieved section
is searched hybrid, like /v1/search, and everything is packed into the token budget, core
first within its share (processors/recall/context_pack.py). Fail-open per section: a section whose
store is down (or, for planning, whose file is missing or corrupt) contributes nothing and
is named in `degraded` (`index` when the index failed and Postgres answered). Flags:
MEMORY_ENABLED, MEMORY_HISTORY, MEMORY_LONG_TERM, MEMORY_DOCUMENTS, MEMORY_FAIL_OPEN,
MEMORY_CONTEXT_BUDGET_TOKENS, MEMORY_CONTEXT_SHARES, MEMORY_PLANNING.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from faust.web import Request, Response, View

from processors.api.access import Caller
from processors.api.parameters import (
    BOOLEAN,
    IDENTIFIER,
    NAMESPACE,
    PLANNING_ITEM,
    REPO,
    InvalidValue,
    Rule,
    integer,
)
from processors.events.ids import fix_pattern_record_id
from processors.memory.blocks import field_lines
from processors.recall.context_pack import (
    SECTIONS,
    Candidate,
    CoreBlock,
    CoreField,
    CorePack,
    Pack,
    pack,
    shares_of,
)
from processors.recall.gaps import unanswered
from processors.recall.ranking import PROFILES, Fused, Profile, age_in_days
from processors.runs.fix_patterns import error_signature, fix_pattern_title
from stores.core_blocks import CoreBlocks
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex, SearchScope
from stores.records import FoundRecord
from streams.api.auth import granted_namespace, reader_of
from streams.api.operations.planning import planning_candidates
from streams.api.pages import Pages
from streams.api.params import BadQuery, Param, Params, optional, repeated, required, value
from streams.api.recall.fix_patterns import ERROR
from streams.api.recall.search import (
    DEFAULT_MIN_SCORE,
    MIN_SCORE,
    NOW,
    SEARCH_FILTERS,
    Found,
    Hit,
    Viewpoint,
    budget_exhausted,
    expand_of,
    explanation,
    holds_records,
    hybrid_search,
    profile_of,
    scope_of,
    spend_search,
    with_links,
)
from streams.plumbing.config import MemoryFlags
from streams.plumbing.runtime import Runtime
from streams.reads.retrieval_log import RetrievalLog

log = logging.getLogger(__name__)

MAX_BUDGET_TOKENS = 32_000
# Candidates searched per part; the budget decides how many are kept.
DIGESTS = 5
FIX_PATTERNS = 5
MEMORIES = 30
DOC_CHUNKS = 10
# The sections searched in memory: their items are records (the planning section's are work
# items of a repository's file).
RETRIEVED = ("history", "long_term", "documents")

BUDGET_TOKENS = integer(0, MAX_BUDGET_TOKENS)


def _shares(value: str) -> Mapping[str, float]:
    try:
        return shares_of(value)
    except ValueError as exc:
        raise InvalidValue(str(exc)) from None


SHARES = Rule(_shares, {"type": "string", "description": (
    "each section's share of the budget the core blocks leave, as section=share pairs "
    f"separated by commas (sections: {', '.join(SECTIONS)}; shares in [0, 1], scaled to sum "
    "to 1; a section not named keeps its default)")})
CONTEXT_PARAMS: Params = {**SEARCH_FILTERS, "budget_tokens": Param(BUDGET_TOKENS),
                          "error": Param(ERROR), "shares": Param(SHARES),
                          "planning_ref": Param(PLANNING_ITEM)}


def wire_context(pages: Pages, runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                 flags: MemoryFlags, max_searches_per_run: int,
                 retrievals: RetrievalLog) -> None:
    @pages.page("/v1/context", params=CONTEXT_PARAMS)
    async def context_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        query = ContextQuery.from_params(request.query, flags, reader_of(caller, request.query))
        if not flags.enabled:
            return web.json({"namespace": namespace, "enabled": False, "sections": {},
                             "tokens": 0, "degraded": []})
        if not await spend_search(runtime, namespace, query.run_id, max_searches_per_run):
            return web.json({**budget_exhausted(runtime, "/v1/context", namespace,
                                                query.run_id, max_searches_per_run),
                             "sections": {}, "tokens": 0, "degraded": []})
        pack = await build_context(runtime, index, fallback, flags, query)
        retrievals.surfaced(namespace=namespace, query=query.query, route="/v1/context",
                            record_ids=[item["record_id"] for name in RETRIEVED
                                        for item in pack["sections"][name]],
                            agent_id=query.scope.agent_id, run_id=query.run_id)
        note_gap(retrievals, flags, query, pack, request.query.keys())
        return web.json({**pack, "enabled": True, "budget_exhausted": False})


@dataclass(frozen=True)
class ContextQuery:
    query: str
    scope: SearchScope
    profile: Profile
    budget_tokens: int
    run_id: str | None
    error: str | None
    # Whether each item says how its score was made.
    explain: bool = False
    # Each section's share of the budget the core blocks leave.
    shares: Mapping[str, float] = field(default_factory=dict)
    # The Beads work item the pack is for, of the one repo the query narrows to.
    planning_ref: str | None = None
    # Memory as it stood at a moment, and the confidence its records need.
    viewpoint: Viewpoint = NOW
    # Hops the long-term section follows from its best memories along their links.
    expand: int = 0

    @classmethod
    def from_params(cls, params: Any, flags: MemoryFlags, agent_id: str | None,
                    query_required: bool = True) -> ContextQuery:
        """`query_required=False`: an empty query asks for the core blocks alone."""
        namespace = required(params, "namespace", NAMESPACE)
        query = params.get("query", params.get("q", "")).strip()
        if not query and query_required:
            raise BadQuery("query is required")
        min_score = value(params, "min_score", MIN_SCORE, DEFAULT_MIN_SCORE)
        budget = value(params, "budget_tokens", BUDGET_TOKENS, flags.context_budget_tokens)
        error = (optional(params, "error", ERROR) or "").strip() or None
        profile = profile_of(params)
        planning_ref = optional(params, "planning_ref", PLANNING_ITEM)
        if planning_ref is not None and len(repeated(params, "repo", REPO)) != 1:
            raise BadQuery("planning_ref needs one repo: the repository whose planning holds it")
        return cls(query, scope_of(params, namespace, MEMORIES, min_score, profile,
                                       agent_id), profile,
                   budget, optional(params, "run_id", IDENTIFIER), error,
                   value(params, "explain", BOOLEAN, False),
                   value(params, "shares", SHARES, flags.context_shares), planning_ref,
                   Viewpoint.from_params(params), expand_of(params, profile))


@dataclass
class Gathered:
    core: list[CoreBlock]
    candidates: list[Candidate]
    degraded: set[str]
    # How each candidate's score was made, by record id (search.explanation).
    explained: dict[str, dict[str, Any]] = field(default_factory=dict)


async def build_context(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                        flags: MemoryFlags, query: ContextQuery) -> dict[str, Any]:
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
                  shares=query.shares or flags.context_shares)
    # Planning items are a repository's, not records of the namespace.
    holds = any(candidate.section in RETRIEVED for candidate in gathered.candidates) or \
        await holds_records(runtime, query.scope.namespace)
    for part in sorted(gathered.degraded):
        runtime.metrics.context_degraded.labels(part).inc()
    runtime.metrics.context_items.observe(len(packed.items))
    return {
        "namespace": query.scope.namespace,
        "namespace_holds_records": holds,
        "query": query.query,
        "profile": query.profile.name,
        "budget_tokens": query.budget_tokens,
        "tokens": packed.tokens,
        "degraded": sorted(gathered.degraded),
        "dropped": packed.dropped,
        "core": core_view(agent, packed.core, "core" in gathered.degraded),
        "sections": sections_view(packed, gathered.explained if query.explain else None),
        # What each section was given of the budget, and what its items cost.
        "section_tokens": {name: {"share_tokens": use.share_tokens, "tokens": use.tokens,
                                  "items": use.items}
                           for name, use in packed.sections.items()},
    }


def sections_view(packed: Pack, explained: Mapping[str, dict[str, Any]] | None
                  ) -> dict[str, list[dict[str, Any]]]:
    """The packed items by section; with `explained`, each searched one with how its score
    was made (a planning item is read from its file, not searched)."""
    def view(item: Candidate) -> dict[str, Any]:
        if explained is None or item.record_id not in explained:
            return item_view(item)
        return {**item_view(item), "explain": explained[item.record_id]}

    return {name: [view(item) for item in packed.items if item.section == name]
            for name in SECTIONS}


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
    vector, *like_error = await runtime.embed(texts)

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
        gathered.explained.update((hit.record.record_id, explanation(hit)) for hit in hits)

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
    """The long-term section's memories, with those their links reach when asked."""
    found = await hybrid_search(runtime, index, fallback, query.query, memories,
                                query.profile, vector, query.viewpoint)
    return await with_links(runtime, found, memories, query.expand, query.viewpoint)


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


def core_view(agent: str | None, core: CorePack, failed: bool) -> dict[str, Any]:
    """The core section: every block of the agent, what of it fits, and what was left out
    and why; `absent` says why there are no blocks at all."""
    absent = ("no agent: a key bound to an agent, or an admin key that names one, reads its "
              "core blocks") if agent is None else \
        "its store failed (see degraded)" if failed else \
        "the agent has no core blocks" if not core.blocks else None
    return {
        "agent_id": agent,
        "absent": absent,
        "tokens": core.tokens,
        "share_tokens": core.share_tokens,
        "truncated": core.truncated,
        "blocks": [{"label": block.label, "version": block.version, "text": block.text,
                    "token_cost": block.token_cost, "fields_left_out": list(block.left_out)}
                   for block in core.blocks],
    }


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
    read as of an earlier version)."""
    if not hits:
        return []
    uncounted = [hit.record.text for hit in hits if hit.record.text_tokens is None]
    counted = iter(await asyncio.to_thread(runtime.embedder.token_costs, uncounted)
                   if uncounted else ())
    costs = [hit.record.text_tokens if hit.record.text_tokens is not None else next(counted)
             for hit in hits]
    now = datetime.now(UTC)
    return [
        Candidate(
            section=section, record_id=hit.record.record_id, kind=hit.record.record_kind,
            text=hit.record.text, source=source_of(hit.record),
            trust_class=hit.record.trust_class, provenance=hit.record.provenance,
            created_at=hit.record.created_at.isoformat(),
            age_days=age_in_days(hit.record.created_at, now), score=hit.score,
            token_cost=cost, vector=hit.record.embedding)
        # Packing compares vectors: search leaves records without one out, and a fix pattern
        # is always stored with one.
        for hit, cost in zip(hits, costs, strict=True) if hit.record.embedding is not None
    ]


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


def item_view(item: Candidate) -> dict[str, Any]:
    return {
        "record_id": item.record_id,
        "kind": item.kind,
        "text": item.text,
        "source": item.source,
        "trust_class": item.trust_class,
        "provenance": dict(item.provenance),
        "recency": {"created_at": item.created_at, "age_days": round(item.age_days, 2)},
        "score": round(item.score, 4),
        "token_cost": item.token_cost,
    }


def note_gap(retrievals: RetrievalLog, flags: MemoryFlags, query: ContextQuery,
             pack: Mapping[str, Any], given: Iterable[str]) -> None:
    """Queue the pack's question as a gap if its retrieved sections found nothing, packed
    or left out, and the parameters `given` did not narrow them (processors/recall/gaps.py). A pack
    that searched no section (both turned off), or whose section failed, does not say what
    memory holds."""
    searched = (flags.history or flags.long_term) and \
        not {"history", "long_term"} & set(pack["degraded"])
    found = sum(len(pack["sections"][name]) for name in RETRIEVED) + \
        sum(pack["dropped"].values())
    if searched and unanswered(query.query, query.scope.min_score, found, DEFAULT_MIN_SCORE,
                               given):
        retrievals.missed(namespace=query.scope.namespace, query=query.query,
                          agent_id=query.scope.agent_id)
