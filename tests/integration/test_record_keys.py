"""Seed 002's keys on the real stack (docs/lifecycle.md#scopes-and-keys): a memory's `repo` and
`security_scope` are stored on its record and in its index payload; a search or pack narrowed
to a repo reads that repo's records and the namespace-wide ones, never another repo's; one
narrowed to security scopes reads only records labelled with one; the Postgres fallback
narrows alike; the scopes `project`, `team` and `user` map onto shared and personal; a run's
digest carries its run's repo; and a write that breaks the rules is refused with its
reason."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import MultiDict

from harness.kafka_io import TopicReader
from harness.stack import Stack, Worker
from memstream_client.ids import digest_record_id
from processors.recall.ranking import PROFILES
from publisher.kafka_publisher import Publisher
from streams.api.queries import scope_of
from streams.reads.search import SearchQuery
from tests.integration.conftest import updated_ids
from tests.integration.test_pipeline import searched_from_postgres
from tests.integration.test_write_endpoints import client, stored

pytestmark = pytest.mark.integration

WAIT_S = 60.0
QUESTION = "How do we deploy the service to production?"
# (scope, repo, security_scope, text): every one answers the question.
MEMORIES: tuple[tuple[str, str | None, str | None, str], ...] = (
    ("project", "billing", "internal",
     "Billing deploys to production with `make release` from the main branch."),
    ("project", "search", "internal",
     "Search deploys to production by tagging a release; CI ships the tag."),
    ("team", None, "public",
     "Every service deploys to production only after the staging smoke tests pass."),
    ("user", None, None,
     "I deploy to production on Tuesdays, never on Fridays."),
)


def hit_ids(answer: dict[str, Any]) -> set[str]:
    return {hit["record_id"] for hit in answer["hits"]}


async def test_repo_and_security_scope_narrow_search_pack_and_fallback(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str,
) -> None:
    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")
    async with client(worker, ann) as http:
        written = [(await stored(http, {
            "namespace": namespace, "text": text, "scope": scope, "memory_type": "pattern",
            **({"repo": repo} if repo else {}),
            **({"security_scope": label} if label else {})}))
            for scope, repo, label, text in MEMORIES]
        billing, search_repo, team, own = written
        for refused, reason in (
                ({"scope": "project"}, "a project memory needs repo"),
                ({"repo": "*"}, "repo"),
                ({"security_scope": "Top Secret"}, "security_scope")):
            answer = await http.post("/v1/memories", json={
                "namespace": namespace, "text": "Refused.", **refused})
            assert answer.status_code == 400, answer.text
            assert answer.json()["reason"] == "invalid_event", answer.json()
            assert reason in answer.json()["error"], answer.json()
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        run = f"run-{namespace}"
        await publisher.run_started(namespace, run_id=run, intent="deploy billing",
                                    repo="billing")
        await publisher.run_finished(namespace, run_id=run, status="succeeded",
                                     summary="Deployed billing to production.")
    digest = digest_record_id(namespace, run)
    await updates.wait_for(
        lambda m: {*written, digest} <= set(updated_ids(m, namespace)), WAIT_S)

    async with client(worker, ann) as http:
        async def searched(**narrowed: Any) -> dict[str, Any]:
            answer = await http.get("/v1/search", params={
                "namespace": namespace, "query": QUESTION, "limit": 10, "min_score": 0.0,
                **narrowed})
            assert answer.status_code == 200, answer.text
            found: dict[str, Any] = answer.json()
            return found

        everything = await searched()
        assert {*written, digest} <= hit_ids(everything)
        shown = {hit["record_id"]: hit for hit in everything["hits"]}
        assert (shown[billing]["repo"], shown[billing]["security_scope"]) == \
            ("billing", "internal")
        # project and team are shared, user is the writer's vault.
        assert [shown[i]["scope"] for i in written] == ["shared", "shared", "shared",
                                                          "personal"]
        assert shown[digest]["repo"] == "billing"

        in_billing = hit_ids(await searched(repo="billing"))
        assert {billing, team, own, digest} <= in_billing
        assert search_repo not in in_billing
        assert hit_ids(await searched(security_scope="public")) == {team}
        assert hit_ids(await searched(security_scope=["public", "internal"],
                                      repo="search")) == {search_repo, team}

        pack = await http.get("/v1/context", params={
            "namespace": namespace, "query": QUESTION, "repo": "billing", "min_score": 0.0})
        assert pack.status_code == 200, pack.text
        packed = {item["record_id"] for items in pack.json()["sections"].values()
                  for item in items}
        assert billing in packed and search_repo not in packed
        bad = await http.get("/v1/search", params={
            "namespace": namespace, "query": QUESTION, "repo": "no spaces allowed"})
        assert bad.status_code == 400 and "repo" in bad.text

    # The fallback narrows as the index does.
    async with searched_from_postgres(stack) as from_postgres:
        params = MultiDict([("repo", "billing"), ("security_scope", "internal"),
                            ("security_scope", "public")])
        scope = scope_of(params, namespace, 10, 0.0, PROFILES["default"], "ann")
        answer = await from_postgres(SearchQuery(QUESTION, scope, PROFILES["default"]))
        assert answer["degraded"]
        assert hit_ids(answer) == {billing, team}
