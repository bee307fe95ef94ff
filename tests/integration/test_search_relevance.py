"""Search with its defaults finds what the namespace holds, and says when it holds nothing:
`min_score` is a floor on relevance, which a memory's words feed as well as its embedding."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from harness.kafka_io import TopicReader
from harness.stack import MODEL, Stack, Worker
from processors.recall.ranking import PROFILES
from processors.text.calibration import calibration_of
from publisher.kafka_publisher import Publisher
from stores.index.protocol import SearchScope
from streams.reads.search import DEFAULT_MIN_SCORE, SearchQuery
from tests.integration.conftest import updated_ids
from tests.integration.test_pipeline import searched_from_postgres

pytestmark = pytest.mark.integration

MEMORIES = (
    "Deploys need the VPN from the office network before anything else.",
    "IT installs the VPN client on every new laptop on day one.",
    "The payments service retries card captures three times with backoff.",
    "Standups are at 9:30 in the small meeting room.",
    "Our staging cluster restarts every Sunday night at 02:00 UTC.",
)
# A long memory whose one rare word comes at its very end: far from the query in embedding
# space (its vector is about everything else it says), found by its words.
LONG_MEMORY = " ".join(
    [f"Release step {n}: check the dashboards, read the changelog, confirm the rollout "
     "plan with the on-call engineer and note the outcome in the release log." for n in
     range(1, 44)] + ["If the primary registry is down, images come from quetzalmirror."])


async def test_defaults_find_keyword_matches_and_the_long_memory_and_nothing_elsewhere(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str
) -> None:
    assert len(LONG_MEMORY) > 6500
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        ids = [await publisher.write_memory(namespace, text)
               for text in (*MEMORIES, LONG_MEMORY)]
    await updates.wait_for(lambda messages: set(ids) <= set(updated_ids(messages, namespace)))

    async def found(query: str, in_namespace: str = namespace) -> dict[str, Any]:
        answer = await http.get("/v1/search", params={"namespace": in_namespace,
                                                      "query": query})
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    vpn = await found("VPN")
    assert {hit["record_id"] for hit in vpn["hits"]} == set(ids[:2])
    assert all(hit["relevance"] >= DEFAULT_MIN_SCORE
               for hit in vpn["hits"])

    mirror = await found("quetzalmirror")
    assert [hit["record_id"] for hit in mirror["hits"]] == [ids[-1]]
    # Its embedding does not say it is about the query (its cosine is under the model's
    # "same subject"): its words found it.
    assert mirror["hits"][0]["similarity"] < calibration_of(MODEL.name).dense_same_subject

    # A question about something this namespace never held: nothing, and the namespace is
    # known to hold records.
    unrelated = await found("Which painter did Caroline admire at the museum in Oslo?")
    assert unrelated["hits"] == []
    assert unrelated["namespace_holds_records"] is True

    misspelled = await found("VPN", f"{namespace}-typo")
    assert misspelled["hits"] == []
    assert misspelled["namespace_holds_records"] is False
    pack = (await http.get("/v1/context", params={"namespace": f"{namespace}-typo",
                                                  "query": "VPN"})).json()
    assert pack["namespace_holds_records"] is False
    assert (await http.get("/v1/context", params={"namespace": namespace, "query": "VPN"})
            ).json()["namespace_holds_records"] is True

    # Postgres, answering when the index is down, shows the same hits.
    async with searched_from_postgres(stack) as searched:
        for query, expected in (("VPN", set(ids[:2])), ("quetzalmirror", {ids[-1]}),
                                ("Which painter did Caroline admire in Oslo?", set())):
            answer = await searched(SearchQuery(
                query, SearchScope(namespace, limit=5, min_score=DEFAULT_MIN_SCORE),
                PROFILES["default"]))
            assert answer["degraded"] is True
            assert {hit["record_id"] for hit in answer["hits"]} == expected, query
