"""The documents plane on the real stack (docs/documents.md): a directory synced with the
CLI (over the SDK) is chunked, embedded and searchable by kind, and packed in the context
pack's documents section; a changed section re-embeds its chunks only (the counts asserted on
the document's versions and the metric); a deleted document leaves search while Postgres keeps
it and its history; a replayed event changes nothing; bad input is refused (400, 403, 413)
or dead-lettered with its reason while the next event is applied."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from harness.kafka_io import TopicReader, produce, wait_caught_up
from harness.stack import Stack, Worker
from memstream_client.events import MAX_DOCUMENT_CHARS
from tests.integration.conftest import event
from tests.integration.test_cli import memstream
from tests.integration.test_lifecycle import changes_of
from tests.integration.test_mcp import call, hit_ids, over_stdio
from tests.integration.test_write_endpoints import client, posted

pytestmark = pytest.mark.integration

INSTALL = """# Install

Install the client with pip, in a virtual environment of its own.

## From source

Clone the repository, then build the wheel with the bundled script.

```bash
# a comment, not a heading
./scripts/build --release
```

## Troubleshooting

A proxy that rewrites TLS certificates breaks the download: set REQUESTS_CA_BUNDLE.
"""
FAQ = """Frequently asked
================

Why does the zebra cache expire at midnight? The cache keys carry the calendar date.
"""
NOTES = "Release notes are kept per quarter.\n\nThe quarterly release goes out on a Tuesday.\n"


async def applied(http: httpx.AsyncClient, namespace: str, doc_id: str,
                  version: int) -> dict[str, Any]:
    """The document once its `version` is applied."""
    for _ in range(300):
        answer = await http.get(f"/v1/documents/{doc_id.replace('/', '%2F')}",
                                params={"namespace": namespace})
        if answer.status_code == 200 and answer.json()["document"]["version"] >= version:
            found: dict[str, Any] = answer.json()
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"{doc_id} never reached version {version}: {answer.text}")


async def chunk_counts(http: httpx.AsyncClient) -> dict[str, float]:
    text = (await http.get("/metrics")).text
    return {outcome: float(value) for outcome, value in re.findall(
        r'^memstream_doc_chunks_total\{outcome="(\w+)"\} (\S+)$', text, re.MULTILINE)}


async def doc_hits(http: httpx.AsyncClient, namespace: str, query: str,
                   **params: str) -> list[dict[str, Any]]:
    answer = await http.get("/v1/search", params={"namespace": namespace, "query": query,
                                                  "min_score": "-1", **params})
    assert answer.status_code == 200, answer.text
    hits: list[dict[str, Any]] = answer.json()["hits"]
    return hits


async def test_documents_synced_changed_deleted_and_packed(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, tmp_path: Path,
) -> None:
    key = stack.make_key("--namespace", namespace, "--perm", "read,write")
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "install.md").write_text(INSTALL)
    (docs / "faq.md").write_text(FAQ)
    (docs / "notes.txt").write_text(NOTES)
    (docs / "image.png").write_bytes(b"\x89PNG")

    def sync() -> list[str]:
        ran = memstream("docs", "sync", str(docs), "--repo", "acme/app", "-n", namespace,
                        url=worker.base_url, key=key, home=tmp_path)
        assert ran.code == 0, ran.err
        return [" ".join(line.split()[:2]) for line in ran.out.splitlines()]

    async with client(worker, key) as http:
        before = await chunk_counts(http)
        assert sync() == ["upsert faq.md", "upsert guide/install.md", "upsert notes.txt"]
        install = await applied(http, namespace, "guide/install.md", 1)
        faq = await applied(http, namespace, "faq.md", 1)
        notes = await applied(http, namespace, "notes.txt", 1)
        assert [c["heading_path"] for c in install["chunks"]] == [
            ["Install"], ["Install", "From source"], ["Install", "Troubleshooting"]]
        assert "./scripts/build --release" in install["chunks"][1]["text"]
        assert all(0 < c["token_count"] <= 240 for c in install["chunks"])
        assert faq["chunks"][0]["heading_path"] == ["Frequently asked"]
        assert [c["heading_path"] for c in notes["chunks"]] == [[]]
        assert (install["document"]["repo"], install["document"]["title"]) == \
            ("acme/app", "Install")
        listed = (await http.get("/v1/documents", params={"namespace": namespace})).json()
        assert [(d["doc_id"], d["chunks"], d["version"]) for d in listed["documents"]] == [
            ("faq.md", 1, 1), ("guide/install.md", 3, 1), ("notes.txt", 1, 1)]
        first = await chunk_counts(http)
        assert first["embedded"] - before.get("embedded", 0) == 5

        # Searchable by kind; not among what a search recalls by default.
        source = install["chunks"][1]["record_id"]
        found = await doc_hits(http, namespace, "build the wheel from source", kind="doc_chunk")
        assert found[0]["record_id"] == source
        assert (found[0]["kind"], found[0]["source_ref"]) == ("doc_chunk", "guide/install.md")
        assert not await doc_hits(http, namespace, "build the wheel from source")
        # A chunk carries its document's repo: a search narrowed to another repo misses it.
        assert not await doc_hits(http, namespace, "build the wheel from source",
                                  kind="doc_chunk", repo="acme/other")
        pack = (await http.get("/v1/context", params={
            "namespace": namespace, "query": "how do I build the wheel from source?"})).json()
        assert pack["degraded"] == []
        packed = pack["sections"]["documents"]
        assert packed[0]["record_id"] == source
        assert packed[0]["source"] == "guide/install.md > Install > From source"
        # An agent over MCP: recall searches the documents when asked to.
        async with over_stdio(worker, key, namespace, tmp_path) as agent:
            recalled = await call(agent, "recall", query="build the wheel from source",
                                  documents=True)
            assert (recalled["hits"][0]["record_id"], recalled["hits"][0]["source_ref"]) == \
                (source, "guide/install.md")
            assert source not in hit_ids(await call(
                agent, "recall", query="build the wheel from source", min_score=0, limit=20))

        # One section changes: one chunk embedded, two kept, one removed.
        (docs / "guide" / "install.md").write_text(INSTALL.replace(
            "set REQUESTS_CA_BUNDLE", "set SSL_CERT_FILE to the proxy's certificate"))
        assert sync() == ["upsert guide/install.md"]
        changed = await applied(http, namespace, "guide/install.md", 2)
        assert [c["record_id"] for c in changed["chunks"][:2]] == \
            [c["record_id"] for c in install["chunks"][:2]]
        assert changed["chunks"][2]["record_id"] != install["chunks"][2]["record_id"]
        assert [(v["version"], v["added"], v["kept"], v["removed"])
                for v in changed["versions"]] == [(1, 3, 0, 0), (2, 1, 2, 1)]
        await updates.wait_for(lambda m: changes_of(m, install["chunks"][2]["record_id"]) == [
            ("created", 1), ("expired", 2)])
        second = await chunk_counts(http)
        assert {o: second[o] - first.get(o, 0) for o in ("embedded", "unchanged", "removed")} \
            == {"embedded": 1, "unchanged": 2, "removed": 1}
        best = (await doc_hits(http, namespace, "proxy certificate", kind="doc_chunk"))[0]
        assert best["record_id"] == changed["chunks"][2]["record_id"]

        # A document gone from the directory is deleted: out of search, kept in Postgres.
        (docs / "faq.md").unlink()
        assert sync() == ["delete faq.md"]
        gone = await applied(http, namespace, "faq.md", 2)
        assert gone["document"]["deleted"] is not None and gone["chunks"] == []
        faq_chunk = faq["chunks"][0]["record_id"]
        assert faq_chunk not in [h["record_id"] for h in await doc_hits(
            http, namespace, "zebra cache midnight", kind="doc_chunk")]
        assert [d["doc_id"] for d in (await http.get("/v1/documents", params={
            "namespace": namespace})).json()["documents"]] == ["guide/install.md", "notes.txt"]
        assert sync() == []

    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        row = await connection.fetchrow(
            "SELECT version, deleted_at FROM documents WHERE namespace = $1 AND doc_id = $2",
            namespace, "faq.md")
        assert row["version"] == 2 and row["deleted_at"] is not None
        assert [r["change"] for r in await connection.fetch(
            "SELECT change FROM document_versions WHERE namespace = $1 AND doc_id = $2"
            " ORDER BY version", namespace, "faq.md")] == ["upserted", "deleted"]
        chunk = await connection.fetchrow(
            "SELECT c.removed_version, r.expired_at, r.text FROM document_chunks c"
            " JOIN records r USING (record_id) WHERE c.record_id = $1", faq_chunk)
        assert chunk["removed_version"] == 2 and chunk["expired_at"] is not None
        assert "zebra cache" in chunk["text"]
    finally:
        await connection.close()


async def test_bad_documents_are_refused_or_dead_lettered_and_replays_change_nothing(
    stack: Stack, worker: Worker, namespace: str,
) -> None:
    writer = stack.make_key("--namespace", namespace, "--perm", "read,write")
    reader = stack.make_key("--namespace", namespace, "--perm", "read")
    good = {"namespace": namespace, "doc_id": "a/b.md", "text": "# A\n\nbody text"}
    async with client(worker, writer) as http, client(worker, reader) as read_only:
        for body, reason in (({**good, "doc_id": "/abs.md"}, "invalid_event"),
                             ({**good, "doc_id": "a/../b.md"}, "invalid_event"),
                             ({**good, "content_type": "pdf"}, "invalid_event"),
                             ({**good, "text": "x" * (MAX_DOCUMENT_CHARS + 1)},
                              "invalid_event")):
            answer = await http.post("/v1/documents", content=json.dumps(body).encode())
            assert (answer.status_code, answer.json()["reason"]) == (400, reason), body
        huge = await http.post("/v1/documents", content=json.dumps(
            {**good, "text": "x" * 70_000}).encode())
        assert (huge.status_code, huge.json()["reason"]) == (413, "oversized")
        denied = await read_only.post("/v1/documents", content=json.dumps(good).encode())
        assert denied.status_code == 403
        missing = await http.get("/v1/documents/no%2Fsuch.md", params={"namespace": namespace})
        assert missing.status_code == 404

    upsert = event("doc.upsert", namespace, {"doc_id": "kept.md", "text": "# K\n\nkept"})
    cases = {
        "bad doc id": ("invalid_event", event("doc.upsert", namespace, {
            "doc_id": "a//b.md", "text": "x"})),
        "unknown document": ("invalid_event", event("doc.delete", namespace, {
            "doc_id": "never-indexed.md"})),
        "unknown type": ("unknown_type", event("doc.rename", namespace, {"doc_id": "x.md"})),
        "too long": ("invalid_event", event("doc.upsert", namespace, {
            "doc_id": "long.md", "text": "y" * (MAX_DOCUMENT_CHARS + 1)})),
    }
    keys = {name: f"bad-{uuid.uuid4().hex[:8]}".encode() for name in cases}
    async with TopicReader(stack.broker.bootstrap, "documents.events.dlq") as dlq:
        await produce(stack.broker.bootstrap, "documents.events", [
            *((keys[name], value) for name, (_, value) in cases.items()),
            (namespace.encode(), upsert), (namespace.encode(), upsert)])
        await dlq.wait_for(lambda m: set(keys.values()) <= {x.key for x in m})
        for name, (reason, value) in cases.items():
            (letter,) = [m for m in dlq.messages if m.key == keys[name]]
            assert (letter.headers["dlq.reason"].decode(), letter.value) == (reason, value), \
                name
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["documents.events"])
    async with client(worker, writer) as http:
        kept = await applied(http, namespace, "kept.md", 1)
        # The same event twice is one version.
        assert [v["version"] for v in kept["versions"]] == [1]
        assert (await posted(http, "/v1/documents/delete", {
            "namespace": namespace, "doc_id": "kept.md"}))["doc_id"] == "kept.md"
        assert (await applied(http, namespace, "kept.md", 2))["chunks"] == []
