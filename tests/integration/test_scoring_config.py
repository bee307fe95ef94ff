"""The adaptive scoring's config on the real stack, with two workers in one consumer group
(docs/retrieval.md#adaptive-scores-seed-003): a change PUT through one worker's HTTP is in
effect on both within seconds; the history says who changed what and when; a change the rules
refuse is answered 400 with every reason and never published, a stale one too; only an admin
key changes it, any key of the namespace reads it; a replayed event adds no version; the SDK
and the CLI do the same.

On the stack of two workers that this and test_two_workers.py share (conftest's
`worker_pair`): they share the pgvector index in the records' Postgres (the embedded engine
admits one process).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.stack import Stack, Worker
from memstream_client.sdk import AsyncMemoryClient
from publisher.kafka_publisher import Publisher
from tests.integration.test_cli import memstream

pytestmark = pytest.mark.integration

# How long a change may take to be in effect on every worker: Kafka, the stage, then each
# worker's cache (2 s).
IN_EFFECT_WITHIN_S = 15.0
POLL_S = 0.1


@pytest.fixture
def namespace() -> str:
    return f"scoring-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def clients(worker_pair: tuple[Worker, Worker], pair_stack: Stack, namespace: str
                  ) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """An admin key of the namespace on each worker, and a reader's and a writer's on the
    first."""
    admin = pair_stack.make_key("--namespace", namespace, "--perm", "admin")
    reader = pair_stack.make_key("--namespace", namespace, "--perm", "read,write,review")
    first, second = worker_pair
    made = {"a": (first, admin), "b": (second, admin), "reader": (first, reader)}
    opened = {name: httpx.AsyncClient(base_url=worker.base_url, timeout=20,
                                      headers={"Authorization": f"Bearer {key}"})
              for name, (worker, key) in made.items()}
    try:
        yield opened
    finally:
        for client in opened.values():
            await client.aclose()


def key_id_of(client: httpx.AsyncClient) -> str:
    return client.headers["Authorization"].split("_")[1]


async def config_of(http: httpx.AsyncClient, namespace: str) -> dict[str, Any]:
    answer = await http.get("/v1/memory-scoring/config", params={"namespace": namespace})
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def in_effect(http: httpx.AsyncClient, namespace: str, version: int) -> float:
    """Seconds until the worker answers `version` (or a later one) as in effect."""
    started = time.monotonic()
    while time.monotonic() - started < IN_EFFECT_WITHIN_S:
        if (await config_of(http, namespace))["version"] >= version:
            return time.monotonic() - started
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"version {version} not in effect within {IN_EFFECT_WITHIN_S}s on "
                         f"{http.base_url}: {await config_of(http, namespace)}")


async def put(http: httpx.AsyncClient, body: dict[str, Any],
              status: int = 202) -> dict[str, Any]:
    answer = await http.put("/v1/memory-scoring/config", json=body)
    assert answer.status_code == status, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def history_of(http: httpx.AsyncClient, namespace: str) -> list[dict[str, Any]]:
    answer = await http.get("/v1/memory-scoring/config/history",
                            params={"namespace": namespace})
    assert answer.status_code == 200, answer.text
    versions: list[dict[str, Any]] = answer.json()["versions"]
    return versions


async def test_a_change_put_on_one_worker_is_in_effect_on_both_within_seconds(
    clients: dict[str, httpx.AsyncClient], namespace: str,
) -> None:
    a, b = clients["a"], clients["b"]
    for http in (a, b):
        never = await config_of(http, namespace)
        assert (never["version"], never["changed_by"], never["changed_at"]) == (0, None, None)
        assert never["config"]["blend_boost_factor"] == 0.30
    parameters = {p["name"]: p for p in never["parameters"]}
    assert parameters["blend_base_factor"] | {"description": ""} == {
        "name": "blend_base_factor", "value": 0.70, "default": 0.70, "type": "number",
        "minimum": 0, "exclusive_minimum": True, "maximum": 1, "valid": "(0, 1]",
        "description": ""}
    assert parameters["min_valuations_for_signal"]["type"] == "integer"

    changes = {"blend_boost_factor": 0.2, "blend_usefulness_weight": 0.5,
               "blend_recency_weight": 0.35}
    accepted = await put(a, {"namespace": namespace, "changes": changes,
                             "expected_version": 0})
    assert accepted["checked_on_version"] == 0
    waited = await asyncio.gather(in_effect(a, namespace, 1), in_effect(b, namespace, 1))
    print(f"\nversion 1 in effect after {waited[0]:.2f}s on a, {waited[1]:.2f}s on b")
    admin = f"key:{key_id_of(a)}"
    for http in (a, b):
        now = await config_of(http, namespace)
        assert now["version"] == 1 and now["changed_by"] == admin and now["changed_at"]
        assert {name: now["config"][name] for name in changes} == changes
        assert now["config"]["blend_frequency_weight"] == 0.15, "the others kept"
        shown = {p["name"]: p for p in now["parameters"]}
        assert (shown["blend_boost_factor"]["value"],
                shown["blend_boost_factor"]["default"]) == (0.2, 0.30)

    # The next change, through the other worker, on the version it saw.
    await put(b, {"namespace": namespace, "changes": {"min_valuations_for_signal": 5},
                  "expected_version": 1})
    await asyncio.gather(in_effect(a, namespace, 2), in_effect(b, namespace, 2))
    versions = await history_of(clients["reader"], namespace)
    assert [(v["version"], v["changes"], v["changed_by"]) for v in versions] == [
        (2, {"min_valuations_for_signal": 5}, admin), (1, changes, admin)]
    assert versions[1]["event_id"] == accepted["event_id"]
    assert versions[0]["config"]["min_valuations_for_signal"] == 5
    assert versions[0]["config"]["blend_boost_factor"] == 0.2
    assert versions[0]["changed_at"] >= versions[1]["changed_at"]


async def test_a_refused_change_is_answered_with_every_reason_and_never_published(
    clients: dict[str, httpx.AsyncClient], namespace: str,
) -> None:
    a, reader = clients["a"], clients["reader"]
    refused = await put(a, {"namespace": namespace, "changes": {
        "boost": 1, "recency_floor": 1.5, "blend_usefulness_weight": 0.9}}, status=400)
    assert refused["reason"] == "invalid_event" and refused["version"] == 0
    assert refused["problems"] == [
        "boost is not a scoring parameter", "recency_floor must be in [0, 1] (got 1.5)",
        "blend_usefulness_weight + blend_recency_weight + blend_frequency_weight must sum "
        "to 1 (got 1.2999999999999998)"]
    assert refused["error"] == "; ".join(refused["problems"])
    # Values that are not numbers are refused as the worker's intake refuses them.
    typed = await put(a, {"namespace": namespace, "changes": {
        "blend_boost_factor": "0.2", "recency_floor": True}}, status=400)
    assert typed["reason"] == "invalid_event"
    assert "changes.blend_boost_factor: Value error, must be a number (got str)" in \
        typed["error"] and "must be a number (got bool)" in typed["error"]
    stale = await put(a, {"namespace": namespace, "changes": {"blend_boost_factor": 0.2},
                          "expected_version": 4}, status=400)
    assert (stale["reason"], stale["problems"], stale["version"]) == (
        "stale_version", ["the change was made on version 4; the config is at version 0"], 0)

    # Only an admin changes it; any key of the namespace reads it.
    forbidden = await reader.put("/v1/memory-scoring/config", json={
        "namespace": namespace, "changes": {"blend_boost_factor": 0.2}})
    assert forbidden.status_code == 403, forbidden.text
    other = await a.put("/v1/memory-scoring/config", json={
        "namespace": f"{namespace}-other", "changes": {"blend_boost_factor": 0.2}})
    assert other.status_code == 403, other.text
    assert (await config_of(reader, namespace))["version"] == 0
    assert (await reader.get("/v1/memory-scoring/config", params={
        "namespace": f"{namespace}-other"})).status_code == 403

    # Nothing was published: a valid change made on version 0 is version 1.
    await put(a, {"namespace": namespace, "changes": {"blend_boost_factor": 0.25},
                  "expected_version": 0})
    await in_effect(a, namespace, 1)
    assert [v["version"] for v in await history_of(a, namespace)] == [1]


async def test_a_replayed_change_adds_no_version(
    pair_stack: Stack, clients: dict[str, httpx.AsyncClient], namespace: str,
) -> None:
    a, b = clients["a"], clients["b"]
    accepted = await put(a, {"namespace": namespace,
                             "changes": {"adaptive_score_floor": 0.4}})
    await in_effect(b, namespace, 1)
    async with Publisher(pair_stack.broker.bootstrap, producer="replay") as publisher:
        # The same event again, from Kafka: its id is applied, so nothing changes (it is not
        # judged again, though made on version 0 it would be stale now).
        await publisher.change_scoring(namespace, {"adaptive_score_floor": 0.4},
                                       f"key:{key_id_of(a)}", expected_version=0,
                                       event_id=accepted["event_id"])
        # Over HTTP too, with the same event id.
        await put(b, {"namespace": namespace, "event_id": accepted["event_id"],
                      "changes": {"adaptive_score_floor": 0.4}})
        # Then a change behind both in the partition: once it is in effect, both replays
        # were consumed before it.
        await publisher.change_scoring(namespace, {"adaptive_score_floor": 0.45}, "replayer")
    await asyncio.gather(in_effect(a, namespace, 2), in_effect(b, namespace, 2))
    versions = await history_of(b, namespace)
    assert [(v["version"], v["changes"], v["changed_by"]) for v in versions] == [
        (2, {"adaptive_score_floor": 0.45}, "replayer"),
        (1, {"adaptive_score_floor": 0.4}, f"key:{key_id_of(a)}")]
    assert (await config_of(a, namespace))["config"]["adaptive_score_floor"] == 0.45


async def test_the_sdk_and_the_cli_show_and_change_it(
    pair_stack: Stack, worker_pair: tuple[Worker, Worker], namespace: str, tmp_path: Path,
) -> None:
    first, second = worker_pair
    admin = pair_stack.make_key("--namespace", namespace, "--perm", "admin")
    ran = memstream("-n", namespace, "scoring", "set", "recency_half_life_days=14",
                    "frequency_log_cap=20", "--expected-version", "0", url=first.base_url,
                    key=admin, home=tmp_path)
    assert ran.code == 0, ran.err
    assert ran.out.startswith("change of recency_half_life_days, frequency_log_cap sent")
    async with AsyncMemoryClient(second.base_url, key=admin, namespace=namespace,
                                 env={}) as client:
        for _ in range(int(IN_EFFECT_WITHIN_S / POLL_S)):
            settings = await client.scoring_config()
            if settings.version == 1:
                break
            await asyncio.sleep(POLL_S)
        assert settings.version == 1
        assert (settings.config["recency_half_life_days"],
                settings.config["frequency_log_cap"]) == (14, 20)
        accepted = await client.set_scoring_config({"blend_boost_factor": 0.0},
                                                   expected_version=1)
        assert accepted.checked_on_version == 1
        history = await client.scoring_config_history(limit=5)
    refused = memstream("-n", namespace, "scoring", "set", "recency_floor=3",
                        url=first.base_url, key=admin, home=tmp_path)
    assert refused.code != 0
    assert "recency_floor must be in [0, 1] (got 3)" in refused.err
    assert [v.version for v in history.versions][-1] == 1
    shown = memstream("-n", namespace, "scoring", "show", url=second.base_url, key=admin,
                      home=tmp_path)
    assert shown.code == 0, shown.err
    assert "recency_half_life_days" in shown.out and "an integer ≥ 1" in shown.out
    listed = memstream("-n", namespace, "scoring", "history", url=second.base_url,
                       key=admin, home=tmp_path)
    assert "frequency_log_cap=20, recency_half_life_days=14" in listed.out, listed.out
