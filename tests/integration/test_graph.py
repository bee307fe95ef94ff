"""GET /v1/graph on the real stack: live memories as nodes, links resolved by title or id,
personal memories only for the keys that may read them, and the limit."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from harness.kafka_io import TopicReader
from harness.stack import Stack, Worker
from publisher.kafka_publisher import Publisher
from tests.integration.test_lifecycle import announced

pytestmark = pytest.mark.integration


async def graph(worker: Worker, token: str | None, namespace: str,
                **params: str) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=worker.base_url, headers=headers,
                                 timeout=10) as client:
        return await client.get("/v1/graph", params={"namespace": namespace, **params})


def drawn(answer: dict[str, Any]) -> tuple[set[str], set[tuple[str, str, str]]]:
    return ({node["record_id"] for node in answer["nodes"]},
            {(edge["source"], edge["target"], edge["relation"]) for edge in answer["edges"]})


async def test_the_graph_shows_what_the_key_may_read_linked_by_title_and_related_id(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        alpha = await publisher.write_memory(namespace, "Alpha links [[beta]].", title="Alpha",
                                             memory_type="lesson")
        beta = await publisher.write_memory(namespace, "Beta stands alone.", title="Beta")
        gone = await publisher.write_memory(namespace, "Gamma was wrong.", title="Gamma")
        for record_id in (alpha, beta, gone):
            await announced(updates, record_id, [("created", 1)])
        await publisher.deprecate_memory(namespace, gone, reason="wrong")
        await announced(updates, gone, [("created", 1), ("deprecated", 2)])
        gamma_reader = await publisher.write_memory(
            namespace, "Read [[Gamma]] and [[Nobody]].", title="Reader", related_ids=[beta],
            memory_type="decision")
        finn = await publisher.write_memory(namespace, f"Finn's note on [[{alpha}]].",
                                            title="Finn", scope="personal", agent_id="finn",
                                            related_ids=[alpha])
        await announced(updates, gamma_reader, [("created", 1)])
        await announced(updates, finn, [("created", 1)])

    shared_reader = stack.make_key("--namespace", namespace, "--perm", "read")
    finn_key = stack.make_key("--namespace", namespace, "--perm", "read", "--agent", "finn")

    answer = (await graph(worker, shared_reader, namespace)).json()
    assert drawn(answer) == ({alpha, beta, gamma_reader}, {
        (alpha, beta, "wiki_link"), (gamma_reader, beta, "related")})
    assert (answer["unresolved_links"], answer["related_outside"]) == (2, 0), \
        "a deprecated memory is no link target; neither is a title nobody wrote"
    assert answer["truncated"] is False
    assert {node["record_id"]: (node["title"], node["memory_type"], node["kind"],
                                node["review_state"]) for node in answer["nodes"]}[alpha] \
        == ("Alpha", "lesson", "memory", "approved")

    with_finn = ({alpha, beta, gamma_reader, finn}, {
        (alpha, beta, "wiki_link"), (gamma_reader, beta, "related"),
        (finn, alpha, "related"), (finn, alpha, "wiki_link")})
    assert drawn((await graph(worker, finn_key, namespace)).json()) == with_finn
    # The operator's key oversees every agent's vault, or the one agent it names.
    assert drawn((await graph(worker, stack.operator_key, namespace)).json()) == with_finn
    assert drawn((await graph(worker, stack.operator_key, namespace, agent_id="ana")).json()) \
        == drawn(answer)
    assert (await graph(worker, shared_reader, namespace, agent_id="finn")).status_code == 403

    newest = (await graph(worker, shared_reader, namespace, limit="2")).json()
    assert [node["record_id"] for node in newest["nodes"]] == [gamma_reader, beta]
    assert newest["truncated"] is True

    assert (await graph(worker, shared_reader, namespace, limit="0")).status_code == 400
    assert (await graph(worker, shared_reader, f"{namespace}-other")).status_code == 403
    assert (await graph(worker, None, namespace)).status_code == 401
