"""Renderings several views share: a record as a hit shows it and how its score was made, a
search, the context pack (search, context, fix patterns, sessions, ratings), and a pending diff
and a merge's member (records, the review queue)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memstream_client.answers.recall import (
    AdaptivePart,
    ContextItem,
    ContextPack,
    CoreSection,
    Explanation,
    ListPlace,
    PackedCoreBlock,
    Ranks,
    Recency,
    SearchAnswer,
    SearchHit,
    SectionTokens,
    Via,
)
from memstream_client.answers.recall import Contest as ContestAnswer
from memstream_client.answers.records import MergeMember as MemberAnswer
from memstream_client.answers.review import AgentBlock
from memstream_client.answers.review import PendingDiff as PendingDiffAnswer
from processors.knowledge.graph import Reached
from processors.memory.blocks import BlockDiff
from processors.memory.lifecycle import PendingDiff
from processors.recall.contested import Contest
from processors.recall.context_pack import SECTIONS, Candidate, CorePack, Pack
from stores.record_versions import MergeMember
from stores.records import FoundRecord, RelatedRecord
from streams.reads import context
from streams.reads.recalls import Exhausted
from streams.reads.search import Blend, Hit, Searched


def hit_answer(hit: Hit, explain: bool = False) -> SearchHit:
    """A record as search answers show it, with how it was reached from a better hit (if it
    was); with `explain`, how its score was made."""
    found = record_hit(hit.record, score=round(hit.score, 4),
                       similarity=round(hit.similarity, 4),
                       relevance=round(hit.relevance, 4),
                       ranks=Ranks(dense=hit.fused.dense_rank, lexical=hit.fused.lexical_rank))
    how: dict[str, object] = {"via": None if hit.via is None else via_answer(hit.via)}
    if explain:
        how["explain"] = explanation(hit)
    if hit.corrects:
        how["corrects"] = [contest_answer(contest) for contest in hit.corrects]
    return found.model_copy(update=how)


def related_hit(found: RelatedRecord, related_ids: Sequence[str]) -> SearchHit:
    """A record found by related ids, as search answers show it: its score and relevance the
    share of the ids asked that it lists; no similarity, no ranks (no query was embedded)."""
    share = round(found.shared / len(related_ids), 4)
    record = found.record
    return record_hit(record, score=share, similarity=None, relevance=share,
                      ranks=Ranks(dense=None, lexical=None)).model_copy(update={
        "shared_related_ids": [i for i in related_ids if i in record.related_ids]})


def record_hit(record: FoundRecord, *, score: float, similarity: float | None,
               relevance: float, ranks: Ranks) -> SearchHit:
    """What every hit shows of its record, with its score and ranks, and its contest when a
    correction of it waits for a reviewer (absent otherwise)."""
    hit = SearchHit(
        record_id=record.record_id, kind=record.record_kind, title=record.title,
        text=record.text, score=score, similarity=similarity, relevance=relevance,
        ranks=ranks, created_at=record.created_at, source_ref=record.source_ref,
        # A merge's members' source refs (from its body); empty for any other record.
        member_source_refs=list(record.body.get("member_source_refs", ())),
        scope=record.scope, memory_type=record.memory_type, tags=list(record.tags),
        related_ids=list(record.related_ids), tier=record.tier,
        review_state=record.review_state, trust_class=record.trust_class, repo=record.repo,
        security_scope=record.security_scope, confidence=round(record.confidence, 4),
        # When the fact held, and when memory learned it (processors/recall/as_of.py).
        valid_from=record.created_at, valid_until=record.valid_until,
        invalidated_by=record.invalidated_by, recorded_at=record.recorded_at)
    if record.contested is None:
        return hit
    return hit.model_copy(update={"contested": contest_answer(record.contested)})


def contest_answer(contest: Contest) -> ContestAnswer:
    """A correction awaiting review (processors/recall/contested.py)."""
    return ContestAnswer(older=contest.older, newer=contest.newer, diff_id=contest.diff_id)


def via_answer(way: Reached) -> Via:
    """How a record reached from a hit's links was reached: from which hit, how many hops,
    by what link last, and how strongly."""
    return Via.model_validate({"from": way.origin, "hops": way.hops, "last": way.via,
                               "relation": way.relation, "strength": round(way.strength, 4)})


def adaptive_answer(blend: Blend) -> AdaptivePart:
    """An adaptive score, its three parts, and the config version that made it."""
    return AdaptivePart(score=round(blend.adaptive.score, 4),
                        usefulness=round(blend.adaptive.usefulness, 4),
                        recency=round(blend.adaptive.recency, 4),
                        frequency=round(blend.adaptive.frequency, 4),
                        config_version=blend.config_version)


def explanation(hit: Hit) -> Explanation:
    """Why a hit ranks where it does: each list's score (dense: the cosine the index gave;
    lexical: BM25) and its share scaled over the list, the fused score, the profile's
    weight, the agent's adaptive score with its parts and the blend it made, and the
    relevance `min_score` is a floor on."""
    fused, blend = hit.fused, hit.blend

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return Explanation(
        dense=ListPlace(rank=fused.dense_rank, score=rounded(fused.dense_score),
                        scaled=round(fused.dense_scaled, 4)),
        lexical=ListPlace(rank=fused.lexical_rank, score=rounded(fused.lexical_score),
                          scaled=round(fused.lexical_scaled, 4)),
        fused=round(fused.score, 4),
        profile_weight=round(hit.weight, 4),
        adaptive=None if blend is None else adaptive_answer(blend),
        blend_factor=1.0 if blend is None else round(blend.factor, 4),
        score=round(hit.score, 4),
        support=round(hit.support, 4),
        relevance=round(hit.relevance, 4),
    )


def search_answer(searched: Searched) -> SearchAnswer:
    """A search as /v1/search answers it."""
    query = searched.query
    hits = [hit_answer(hit, query.explain) for hit in searched.found.hits] \
        if searched.found is not None else \
        [related_hit(found, query.scope.related_ids) for found in searched.related]
    return SearchAnswer(namespace=query.scope.namespace,
                        namespace_holds_records=searched.holds_records,
                        query=query.query or None, profile=query.profile.name,
                        degraded=searched.degraded, hits=hits, budget_exhausted=False)


def context_answer(pack: context.ContextPack) -> ContextPack:
    """A context pack as /v1/context (and a session's wake) answers it."""
    query, packed = pack.query, pack.packed
    answer = ContextPack(
        namespace=query.scope.namespace,
        namespace_holds_records=pack.holds_records,
        query=query.query,
        profile=query.profile.name,
        budget_tokens=query.budget_tokens,
        tokens=packed.tokens,
        degraded=sorted(pack.degraded),
        dropped=dict(packed.dropped),
        core=core_answer(query.scope.agent_id, packed.core, "core" in pack.degraded),
        sections=sections_answer(packed, pack.hits if query.explain else None),
        # What each section was given of the budget, and what its items cost.
        section_tokens={name: SectionTokens(share_tokens=use.share_tokens, tokens=use.tokens,
                                            items=use.items)
                        for name, use in packed.sections.items()},
        enabled=True,
        budget_exhausted=False,
    )
    if not packed.notes:
        return answer
    return answer.model_copy(update={"notes": packed.notes})


def exhausted_pack(exhausted: Exhausted) -> ContextPack:
    """The pack of a recall the run's search budget refused: empty."""
    return ContextPack(namespace=exhausted.namespace, run_id=exhausted.run_id,
                       budget_exhausted=True,
                       max_searches_per_run=exhausted.max_searches_per_run, sections={},
                       tokens=0, degraded=[])


def sections_answer(packed: Pack, hits: Mapping[str, Hit] | None
                    ) -> dict[str, list[ContextItem]]:
    """The packed items by section; with `hits`, each searched one with how its score was
    made (a planning item is read from its file, not searched)."""
    def answer(item: Candidate) -> ContextItem:
        if hits is None or item.record_id not in hits:
            return item_answer(item)
        return item_answer(item, explanation(hits[item.record_id]))

    return {name: [answer(item) for item in packed.items if item.section == name]
            for name in SECTIONS}


def core_answer(agent: str | None, core: CorePack, failed: bool) -> CoreSection:
    """The core section: every block of the agent, what of it fits, and what was left out
    and why; `absent` says why there are no blocks at all."""
    absent = ("no agent: a key bound to an agent, or an admin key that names one, reads its "
              "core blocks") if agent is None else \
        "its store failed (see degraded)" if failed else \
        "the agent has no core blocks" if not core.blocks else None
    return CoreSection(
        agent_id=agent, absent=absent, tokens=core.tokens, share_tokens=core.share_tokens,
        truncated=core.truncated,
        blocks=[PackedCoreBlock(label=block.label, version=block.version, text=block.text,
                                token_cost=block.token_cost,
                                fields_left_out=list(block.left_out))
                for block in core.blocks])


def item_answer(item: Candidate, explain: Explanation | None = None) -> ContextItem:
    """A packed item; with `explain`, how its score was made; its contests when it has any
    (absent otherwise)."""
    answer = ContextItem(
        record_id=item.record_id, kind=item.kind, text=item.text, source=item.source,
        trust_class=item.trust_class, provenance=dict(item.provenance),
        recency=Recency(created_at=item.created_at, age_days=round(item.age_days, 2)),
        score=round(item.score, 4), token_cost=item.token_cost)
    more: dict[str, object] = {}
    if explain is not None:
        more["explain"] = explain
    if item.contested is not None:
        more["contested"] = contest_answer(item.contested)
    if item.corrects:
        more["corrects"] = [contest_answer(contest) for contest in item.corrects]
    return answer.model_copy(update=more) if more else answer


def block_diff_answer(diff: BlockDiff) -> PendingDiffAnswer:
    return PendingDiffAnswer(
        diff_id=diff.diff_id, target="block",
        block=AgentBlock(agent_id=diff.agent_id, label=diff.label),
        base_version=diff.base_version,
        proposed=diff.payload.model_dump(mode="json", exclude_defaults=True,
                                         exclude={"agent_id", "label"}),
        proposer=diff.proposer, proposed_at=diff.proposed_at, state=diff.state)


def diff_answer(diff: PendingDiff) -> PendingDiffAnswer:
    return PendingDiffAnswer(
        diff_id=diff.diff_id, target="record", record_id=diff.record_id,
        base_version=diff.base_version, proposed=dict(diff.proposed),
        proposer=diff.proposer, proposed_at=diff.proposed_at, state=diff.state)


def member_answer(member: MergeMember) -> MemberAnswer:
    """A record a merge replaces, as it is now."""
    return MemberAnswer(record_id=member.record_id, version=member.version, title=member.title,
                        excerpt=member.excerpt, review_state=member.review_state,
                        superseded_by=member.superseded_by)
