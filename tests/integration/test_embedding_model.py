"""One embedding model per store: a worker of another model refuses to start, and
`streams.commands.reembed` moves the store to another model whole, resuming where it
stopped (stores/embedding_model.py, docs/operating.md#changing-the-embedding-model).

On a stack of its own: the model is the whole store's, and this test changes it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from embedder.model import Embedder
from embedder.models import MINILM, model_dir
from harness.stack import MODEL, Stack, Worker
from processors.text.embedding import embedding_text
from stores.embedding_model import (
    StoreModel,
    begin_reembedding,
    store_model,
    store_record_vectors,
)
from stores.index.reindex import connect_with_vectors
from streams.plumbing.config import REPO_ROOT

TEXTS = ("Deploys to staging need the office VPN.",
         "The billing service is owned by the payments team.",
         "Postgres backups run every night at 02:00 UTC.")
OTHER = MINILM.name
assert MODEL.name != OTHER, "the test moves the store from the default model to another"


@pytest.fixture(scope="module")
def model_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(tmp_path_factory.mktemp("model-stack")) as running:
        yield running


def worker_env(stack: Stack, worker: Worker, model: str) -> dict[str, str]:
    return {**os.environ, "MEMSTREAM_KAFKA_BOOTSTRAP": stack.broker.bootstrap,
            "MEMSTREAM_PG_DSN": stack.pg_dsn, "MEMSTREAM_INDEX_URL": worker.index_url,
            "MEMSTREAM_APP_ID": worker.app_id, "MEMSTREAM_WEB_PORT": str(worker.web_port),
            "MEMSTREAM_DATA_DIR": str(stack.root / "refused"), "MEMSTREAM_MODEL": model}


def refused_start(stack: Stack, worker: Worker, model: str) -> str:
    """A worker of `model` on the stack's store: it must stop at once, saying why."""
    started = subprocess.run([sys.executable, "-m", "streams.worker"], cwd=REPO_ROOT,
                             env=worker_env(stack, worker, model), capture_output=True,
                             text=True, timeout=120, check=False)
    assert started.returncode != 0, started.stdout[-2000:]
    return started.stderr


async def write(worker: Worker, namespace: str, text: str) -> str:
    async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                 timeout=30) as http:
        answer = await http.post("/v1/memories", json={"namespace": namespace, "text": text},
                                 headers={"Prefer": "wait=20"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["outcome"] == "stored"
    record_id: str = answer.json()["record_id"]
    return record_id


async def stored_vectors(stack: Stack) -> dict[str, tuple[str, np.ndarray]]:
    connection = await connect_with_vectors(stack.pg_dsn)
    try:
        rows = await connection.fetch(
            "SELECT record_id, title, text, embedding FROM records ORDER BY record_id")
    finally:
        await connection.close()
    return {row["record_id"]: (embedding_text(row["title"], row["text"]), row["embedding"])
            for row in rows}


async def test_a_store_keeps_its_model_and_moves_to_another_whole(
        model_stack: Stack, tmp_path: Path) -> None:
    namespace = f"ns-{uuid.uuid4().hex[:10]}"
    first = model_stack.worker("first")
    first.start()
    ids = [await write(first, namespace, text) for text in TEXTS]
    first.stop()
    connection = await connect_with_vectors(model_stack.pg_dsn)
    try:
        assert (await store_model(connection)).model == MODEL.name

        # Another model's worker would mix vectors: it stops before it embeds anything.
        said = refused_start(model_stack, first, OTHER)
        assert f"holds the vectors of {MODEL.name}" in said
        assert f"python -m streams.commands.reembed --model {OTHER}" in said

        # A move stopped after its first page: no worker of either model starts meanwhile.
        with Embedder.load(model_dir(OTHER), threads=1) as other:
            vectors = await stored_vectors(model_stack)
            done = sorted(vectors)[0]
            assert await begin_reembedding(connection, OTHER) == ""
            await store_record_vectors(connection, OTHER, [
                (done, other.embed([vectors[done][0]], role="passage")[0])])
            assert "being re-embedded" in refused_start(model_stack, first, MODEL.name)
            assert "being re-embedded" in refused_start(model_stack, first, OTHER)

            moved = subprocess.run(
                [sys.executable, "-m", "streams.commands.reembed", "--model", OTHER,
                 "--batch", "2"],
                cwd=REPO_ROOT, env=worker_env(model_stack, first, MODEL.name),
                capture_output=True, text=True, timeout=300, check=False)
            assert moved.returncode == 0, moved.stderr
            assert f"resuming after {done}" in moved.stdout
            assert f"re-embedding {len(vectors) - 1} records into {OTHER}" in moved.stdout
            assert "index rebuilt" in moved.stdout

            # Every record holds the new model's vector of its text, none is left behind.
            after = await stored_vectors(model_stack)
            assert set(after) == set(vectors)
            for text, vector in after.values():
                np.testing.assert_allclose(
                    vector, other.embed([text], role="passage")[0], atol=1e-6)
        assert await store_model(connection) == StoreModel(OTHER)
    finally:
        await connection.close()

    # Run again, it has nothing to do; the new model's worker starts and finds the memories.
    again = subprocess.run([sys.executable, "-m", "streams.commands.reembed", "--model", OTHER],
                           cwd=REPO_ROOT, env=worker_env(model_stack, first, OTHER),
                           capture_output=True, text=True, timeout=120, check=False)
    assert "nothing to do" in again.stdout, again.stderr
    moved_worker = model_stack.worker("moved", index_url=first.index_url,
                                      MEMSTREAM_MODEL=OTHER)
    moved_worker.start()
    try:
        async with httpx.AsyncClient(base_url=moved_worker.base_url,
                                     headers=moved_worker.headers, timeout=30) as http:
            found = (await http.get("/v1/search", params={
                "namespace": namespace, "query": "when do the nightly database backups run",
                "limit": 1})).json()
        assert [hit["record_id"] for hit in found["hits"]] == [ids[2]]
    finally:
        moved_worker.stop()
