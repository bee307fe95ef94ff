"""The worker's own metrics on the real stack: consumer lag per partition, HTTP latency by
route and status, build info."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.kafka_io import produce, wait_caught_up
from harness.stack import Stack, Worker
from schemas.topics import DEAD_LETTER_TOPICS
from tests.integration.conftest import event

pytestmark = pytest.mark.integration


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == name}


async def drained_lag(base_url: str, topics: set[str]) -> dict[tuple[tuple[str, str], ...],
                                                                 float]:
    """The process's lag series once they cover `topics` and are all 0."""
    deadline = time.monotonic() + 30
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        while True:
            lag = samples((await client.get("/metrics")).text, "memstream_consumer_lag")
            if {dict(labels)["topic"] for labels in lag} == topics and \
                    all(value == 0 for value in lag.values()):
                return lag
            assert time.monotonic() < deadline, f"lag never drained: {lag}"
            await asyncio.sleep(0.5)


async def test_consumer_lag_is_reported_per_partition_and_drains_to_zero(
    stack: Stack, worker: Worker, consolidator: Worker, namespace: str,
) -> None:
    await produce(stack.broker.bootstrap, "memory.events", [
        (namespace.encode(), event("memory.write", namespace, {"text": f"Lag probe {n}."}))
        for n in range(20)])
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    # The dead-letter topics too, which the worker reads back (streams/stages/dead_letter_log.py).
    lag = await drained_lag(worker.base_url, {"memory.events", "runs.events",
                                              "sessions.events", "documents.events",
                                              "planning.events", *DEAD_LETTER_TOPICS})
    partitions = {dict(labels)["partition"] for labels in lag}
    assert partitions == {"0", "1", "2", "3"}, "one series per partition the worker owns"
    # The consolidator is a process and a consumer group of its own.
    lag = await drained_lag(consolidator.base_url, {"memory.consolidate"})
    assert {dict(labels)["partition"] for labels in lag} == {"0", "1", "2", "3"}


async def test_http_latency_is_observed_by_route_template_and_status(
    worker: Worker, http: httpx.AsyncClient, namespace: str,
) -> None:
    await http.get("/v1/stats", params={"namespace": namespace})
    await http.get("/v1/stats")
    await http.get("/v1/records/mem_nothing", params={"namespace": namespace})
    text = (await http.get("/metrics")).text
    counts = samples(text, "memstream_http_request_seconds_count")
    routes = {tuple(dict(labels)[key] for key in ("route", "status")) for labels in counts}
    assert {("/v1/stats", "200"), ("/v1/stats", "400"),
            ("/v1/records/{record_id}", "404")} <= routes
    assert "mem_nothing" not in text and namespace not in text, "labels stay bounded"
    (build,) = samples(text, "memstream_build_info")
    assert dict(build)["version"] == "0.1.0"
    assert re.fullmatch(r"3\.11\.\d+", dict(build)["python"])
