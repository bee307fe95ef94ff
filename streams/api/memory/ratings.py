"""Ratings over HTTP (seed 003's rate_memories; docs/http-api.md#ratings).

    POST /v1/ratings        {namespace, ratings: [{memory_id, useful}], gap?, gap_query?,
                             agent_id?, event_id?}
    GET  /v1/memory-scores?namespace=&memory_id=[&agent_id=]

The POST publishes a `memory.rate` to `memory.events`, checked as the worker's intake will
check it (400 with the reason its dead letter would carry); the rating stage applies it
(streams/stages/memory/ratings.py). The rater is the key's agent; a key bound to no agent
names one with `agent_id`, and only an admin key may (it rates as that agent, as it reads as
it). Before publishing, the route checks what the stage will: each memory exists and the
rater may read it; one that is not is answered 404, as a memory that does not exist, so that
the agent learns at once what the stage would only dead-letter.

The GET answers one memory's score inputs, its adaptive score now (with the namespace's
config) and the latest ratings, for the reading agent; an admin key bound to no agent that
names none reads every agent's.
"""

from __future__ import annotations

from datetime import UTC, datetime

from faust.web import Request, Response, View

from memstream_client.answers.scoring import AgentMemoryUse, MemoryScores, RatingAccepted, Valuation
from memstream_client.answers.scoring import MemoryUse as UseAnswer
from memstream_client.events import MemoryRate
from processors.api.access import Caller
from processors.api.openapi import payload_body
from processors.api.parameters import IDENTIFIER
from processors.events.intake import json_object
from processors.recall.adaptive_scoring import MemoryUse
from processors.recall.ratings import Owner, not_rateable, unrateable, visible_to
from stores.recall.scoring_configs import CurrentScoring
from streams.api.auth import granted_namespace, reader_of
from streams.api.pages import Pages, no_record
from streams.api.params import NO_PARAMS, READER_PARAMS, Param, Params, required
from streams.api.publishing import (
    POST,
    EventGate,
    answering,
    envelope_of,
    payload_fields,
    permitted,
)
from streams.api.rendering import adaptive_answer
from streams.plumbing.runtime import Runtime
from streams.reads.search import blend_of

SCORE_PARAMS: Params = {**READER_PARAMS, "memory_id": Param(IDENTIFIER)}
# The latest ratings a score read shows.
VALUATIONS_SHOWN = 20
# The agents an overseer's read of one memory shows, the latest users first.
AGENTS_SHOWN = 50


class RatingViews:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._gate = EventGate(runtime.producer, runtime.max_event_bytes)

    async def rate(self, web: View, request: Request,
                   caller: Caller) -> Response | RatingAccepted:
        """Rate memories an agent was given, and name a gap (a memory.rate)."""
        body = json_object(await request.read(), self._runtime.max_event_bytes)
        permitted(caller, body, "write")
        payload = {**payload_fields(body), "agent_id": caller.reader_of(body.get("agent_id"))}
        raw, checked = self._gate.checked(envelope_of("memory.rate", body, payload, caller),
                                          {"memory.rate": MemoryRate})
        event = checked.event
        rater, namespace = event.payload.agent_id, event.namespace
        memory_ids = [rating.memory_id for rating in event.payload.ratings]
        found = await self._runtime.stores.records.records_by_id(namespace, memory_ids)
        missing = unrateable(rater, memory_ids, {
            record_id: Owner(record.scope, record.agent_id)
            for record_id, record in found.items()})
        if missing:
            return web.json({"error": not_rateable(rater, namespace, missing),
                             "reason": "broken_reference", "not_found": missing}, status=404)
        published = await self._gate.publish(raw, event)
        return RatingAccepted(event_id=published.event_id, agent_id=rater,
                              rated=len(memory_ids))

    async def scores(self, web: View, request: Request,
                     caller: Caller) -> Response | MemoryScores:
        """One memory's score inputs and latest ratings, for the reading agent."""
        namespace = granted_namespace(caller, request.query)
        memory_id = required(request.query, "memory_id", IDENTIFIER)
        agent = reader_of(caller, request.query)
        if agent is None and not caller.oversees_agents:
            return web.json({"error": "scores are an agent's: use a key bound to the agent, "
                                      "or name agent_id with an admin key"}, status=400)
        record = (await self._runtime.stores.records.records_by_id(
            namespace, [memory_id])).get(memory_id)
        if record is None or (agent is not None
                              and not visible_to(agent, Owner(record.scope, record.agent_id))):
            return no_record(web, memory_id, namespace)
        ratings = self._runtime.stores.ratings
        current = await self._runtime.stores.scoring_configs.current(namespace)
        now = datetime.now(UTC)
        if agent is None:
            users = await ratings.users_of(namespace, memory_id, AGENTS_SHOWN)
            return MemoryScores(namespace=namespace, memory_id=memory_id, agents=[
                AgentMemoryUse(agent_id=user, **dict(use_view(use, current, now)))
                for user, use in users.items()])
        # A memory the agent never rated nor read has no row: no use yet.
        inputs = (await ratings.score_inputs(namespace, agent, [memory_id])).get(
            memory_id, MemoryUse())
        valuations = await ratings.valuations(namespace, agent, memory_id, VALUATIONS_SHOWN)
        return MemoryScores(
            namespace=namespace, agent_id=agent, memory_id=memory_id,
            **dict(use_view(inputs, current, now)),
            valuations=[Valuation(event_id=v.event_id, useful=v.useful, valued_at=v.valued_at)
                        for v in valuations])


def use_view(use: MemoryUse, current: CurrentScoring, now: datetime) -> UseAnswer:
    """An agent's use of a memory: the adaptive score's inputs, and the score they make now
    with its parts and the blend factor a recall multiplies by."""
    blend = blend_of(use, current, now)
    return UseAnswer(
        valuation_count=use.valuation_count, useful_count=use.useful_count,
        last_valuation_at=use.last_valued_at, access_count=use.access_count,
        last_access_at=use.last_accessed_at, adaptive=adaptive_answer(blend),
        blend_factor=round(blend.factor, 4))


def wire_ratings(pages: Pages, runtime: Runtime) -> None:
    views = RatingViews(runtime)
    pages.page("/v1/ratings", params=NO_PARAMS, methods=POST, answer=RatingAccepted,
               body=payload_body(MemoryRate, optional={"agent_id"}))(answering(views.rate))
    pages.page("/v1/memory-scores", params=SCORE_PARAMS, answer=MemoryScores)(views.scores)
