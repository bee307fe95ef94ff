"""The page frame: a request's parameters are checked before its view runs, and no value of
a request, even one the rules let through, is answered 500 when a store refuses it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from asyncpg.exceptions import CharacterNotInRepertoireError
from multidict import MultiDict

from memstream_client.answers.planning import PlanningSyncAccepted
from memstream_client.answers.records import Stats
from memstream_client.answers.runs import RunEventAccepted
from processors.api.openapi import OneOf, Route
from processors.api.parameters import IDENTIFIER
from streams.api.pages import observed_view
from streams.api.params import READER_PARAMS, Param
from streams.plumbing.metrics import Metrics

PARAMS = {**READER_PARAMS, "record_id": Param(IDENTIFIER)}
ROUTE = Route("/v1/records/{record_id}", ("GET",), (), {"GET": RunEventAccepted})


@dataclass
class Answer:
    body: Any
    status: int


class Web:
    def json(self, body: Any, status: int = 200, headers: Any = None) -> Answer:
        return Answer(body, status)

    def bytes(self, body: bytes, content_type: str, status: int = 200,
              headers: Any = None) -> Answer:
        assert content_type == "application/json"
        return Answer(json.loads(body), status)


@dataclass
class Request:
    query: MultiDict[str]
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "GET"


async def answer(handler: Any, record_id: str, *pairs: tuple[str, str],
                 route: Route = ROUTE) -> Answer:
    view = observed_view(route, handler, Metrics(), None, PARAMS)
    # The fakes stand for faust's View and Request, and its Response for theirs.
    return cast(Answer, await view(Web(), Request(MultiDict(pairs)), record_id=record_id))


async def test_a_view_runs_only_for_parameters_its_route_takes() -> None:
    seen: list[str] = []

    async def handler(web: Web, request: Request, record_id: str) -> Answer:
        seen.append(record_id)
        return web.json({"record_id": record_id})

    assert (await answer(handler, "mem_1", ("namespace", "team-a"))).status == 200
    refused = [await answer(handler, "mem_\x00", ("namespace", "team-a")),
               await answer(handler, "mem_1", ("namespace", "team a")),
               await answer(handler, "mem_1", ("namespace", "team-a"), ("type", "fact"))]
    assert [(a.status, a.body["error"].split(":")[0]) for a in refused] == [
        (400, "record_id"), (400, "namespace"), (400, "unknown parameter 'type'; this route "
                                                     "takes agent_id, namespace")]
    assert seen == ["mem_1"]


async def test_data_a_store_refuses_is_the_requests_fault_and_anything_else_a_failure() -> None:
    async def refused(web: Web, request: Request, record_id: str) -> Answer:
        raise CharacterNotInRepertoireError('invalid byte sequence for encoding "UTF8": 0x00')

    async def broken(web: Web, request: Request, record_id: str) -> Answer:
        raise RuntimeError("a bug")

    answered = await answer(refused, "mem_1", ("namespace", "team-a"))
    assert (answered.status, answered.body["reason"]) == (400, "refused_by_store")
    assert "0x00" in answered.body["error"]
    with pytest.raises(RuntimeError):
        await answer(broken, "mem_1", ("namespace", "team-a"))


async def test_a_view_answers_the_model_its_route_declares_and_no_other() -> None:
    async def declared(web: Web, request: Request, record_id: str) -> RunEventAccepted:
        return RunEventAccepted(event_id="e1", run_id=record_id)

    async def other(web: Web, request: Request, record_id: str) -> PlanningSyncAccepted:
        return PlanningSyncAccepted(repo="memstream", event_id="e1")

    answered = await answer(declared, "mem_1", ("namespace", "team-a"))
    assert (answered.status, answered.body) == (200, {"event_id": "e1", "run_id": "mem_1"})
    with pytest.raises(TypeError, match="answered a PlanningSyncAccepted; it declares"):
        await answer(other, "mem_1", ("namespace", "team-a"))


async def test_a_view_of_one_model_or_another_answers_either() -> None:
    either = Route(ROUTE.path, ("GET",), (),
                   {"GET": OneOf((RunEventAccepted, PlanningSyncAccepted))})

    async def written(web: Web, request: Request, record_id: str) -> PlanningSyncAccepted:
        return PlanningSyncAccepted(repo=record_id, event_id="e1")

    async def other(web: Web, request: Request, record_id: str) -> Stats:
        return Stats(namespace="team-a", records={}, index_points=0)

    answered = await answer(written, "mem_1", ("namespace", "team-a"), route=either)
    assert answered.body == {"repo": "mem_1", "event_id": "e1"}
    with pytest.raises(TypeError, match="answered a Stats; it declares"):
        await answer(other, "mem_1", ("namespace", "team-a"), route=either)
