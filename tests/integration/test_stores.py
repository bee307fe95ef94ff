"""The stores against real components: an embedded Postgres, qdrant-client's local mode and
the qdrant-edge engine (both in temporary directories). Vectors are random unit vectors."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import numpy as np
import pytest
from numpy.typing import NDArray

from memstream_client.events import Provenance
from processors.events.errors import IndexRefused
from processors.text.lexical import (
    NO_TERMS,
    SparseVector,
    document_vector,
    query_term_ids,
    query_vector,
    term_presence,
)
from schemas.records import Record
from stores.index.factory import open_index
from stores.index.payload import index_payload
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import DIM, IndexPoint, SearchScope, VectorIndex, point_id
from stores.index.qdrant_edge import EdgeIndex
from stores.index.reindex import connect_with_vectors, reindex
from stores.postgres.local_server import LocalPostgres, throwaway_postgres
from stores.postgres.migrate import MIGRATIONS_DIR, MigrationError, apply_migrations
from streams.stages.neighbours import NAMESPACE_NEAREST, partition_nearest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(20261121)


def unit_vectors(n: int) -> NDArray[np.float32]:
    vectors = RNG.standard_normal((n, DIM)).astype(np.float32)
    normed: NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normed


def near(vector: NDArray[np.float32], cosine: float) -> NDArray[np.float32]:
    """A unit vector whose cosine similarity with unit `vector` is exactly `cosine`."""
    other = unit_vectors(1)[0]
    orthogonal = other - float(other @ vector) * vector
    orthogonal /= np.linalg.norm(orthogonal)
    result: NDArray[np.float32] = cosine * vector + np.sqrt(1 - cosine**2) * orthogonal
    return result


def payload(namespace: str, **fields: Any) -> dict[str, Any]:
    """A point's payload as stores.index.payload makes it from a record."""
    base: dict[str, Any] = {"record_id": "r", "namespace": namespace, "record_kind": "memory",
                            "tags": [], "related_ids": [], "created_at": 1.0,
                            "scope": "shared", "agent_id": None, "expires_at": None,
                            "review_state": "approved", "trust_class": "raw",
                            "tier": "active", "memory_type": "fact"}
    return index_payload(base | fields)


def with_database(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with throwaway_postgres() as dsn:
        yield dsn


@pytest.fixture
async def fresh_dsn(pg_dsn: str) -> str:
    """A new, empty database on the module's server."""
    return await _new_database(pg_dsn)


async def _new_database(pg_dsn: str) -> str:
    name = f"t_{uuid.uuid4().hex[:12]}"
    connection = await asyncpg.connect(pg_dsn)
    try:
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    return with_database(pg_dsn, name)


@pytest.fixture
async def migrated_dsn(fresh_dsn: str) -> str:
    await apply_migrations(fresh_dsn)
    return fresh_dsn


@pytest.fixture(params=["local", "edge", "pg"])
async def index(request: pytest.FixtureRequest, tmp_path: Path,
                pg_dsn: str) -> AsyncIterator[VectorIndex]:
    """Each backend, empty: qdrant-client's local mode, the edge engine, and pgvector in a
    database of its own."""
    urls = {"local": f"local://{tmp_path / 'local'}", "edge": f"edge://{tmp_path}",
            "pg": await _new_database(pg_dsn)}
    opened = open_index(urls[request.param])
    await opened.ensure_collection()
    yield opened
    await opened.close()


# --- Postgres -------------------------------------------------------------------------------


def test_local_postgres_start_is_idempotent_and_restart_keeps_data(tmp_path: Path) -> None:
    server = LocalPostgres(tmp_path / "pg", durable=False)
    try:
        dsn = server.start()
        assert server.start() == dsn
        assert server.is_running()
        asyncio.run(_execute(dsn, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)"))
        assert server.stop() is True
        assert server.stop() is False
        assert not server.is_running()
        server.start()
        assert asyncio.run(_fetchval(dsn, "SELECT x FROM kept")) == 7
    finally:
        server.stop()


async def _execute(dsn: str, sql: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def _fetchval(dsn: str, sql: str) -> Any:
    connection = await asyncpg.connect(dsn)
    try:
        return await connection.fetchval(sql)
    finally:
        await connection.close()


async def test_migrations_apply_once_even_when_started_together(fresh_dsn: str) -> None:
    every = [path.stem for path in sorted(MIGRATIONS_DIR.glob("*.sql"))]
    assert every[:3] == ["0001_init", "0002_run_history", "0003_consolidation"]
    results = await asyncio.gather(*(apply_migrations(fresh_dsn) for _ in range(3)))
    assert sorted(results) == [[], [], every]
    assert await apply_migrations(fresh_dsn) == []
    connection = await asyncpg.connect(fresh_dsn)
    try:
        assert await connection.fetchval("SELECT count(*) FROM schema_migrations") == len(every)
        tables = {r["tablename"] for r in await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        assert {"run_events", "records", "record_versions", "schema_migrations",
                "maintenance_reports", "memory_window_counts",
                "consolidation_requests"} <= tables
    finally:
        await connection.close()


async def test_edited_migration_is_refused(fresh_dsn: str, tmp_path: Path) -> None:
    original = (MIGRATIONS_DIR / "0001_init.sql").read_text()
    (tmp_path / "0001_init.sql").write_text(original)
    assert await apply_migrations(fresh_dsn, tmp_path) == ["0001_init"]
    (tmp_path / "0001_init.sql").write_text(original + "\n-- edited\n")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        await apply_migrations(fresh_dsn, tmp_path)


async def test_the_run_history_migration_fills_runs_from_the_ledger(
    fresh_dsn: str, tmp_path: Path
) -> None:
    (tmp_path / "0001_init.sql").write_text((MIGRATIONS_DIR / "0001_init.sql").read_text())
    assert await apply_migrations(fresh_dsn, tmp_path) == ["0001_init"]
    connection = await asyncpg.connect(fresh_dsn)
    try:
        await connection.executemany(
            "INSERT INTO run_events (event_id, namespace, run_id, type, occurred_at, producer,"
            " payload, source_topic, source_partition, source_offset)"
            " VALUES ($1, 'ns', $2, $3, $4::text::timestamptz, 'p', $5::text::jsonb, 't', 0, 0)",
            [
                ("a1", "run-a", "run.started", "2026-11-01T10:00:00Z",
                 '{"task_key": "T-1", "repo": "acme/web"}'),
                ("a2", "run-a", "run.finished", "2026-11-01T10:05:00Z", '{"status": "failed"}'),
                ("b1", "run-b", "run.started", "2026-11-01T11:00:00Z", "{}"),
            ],
        )
        (tmp_path / "0002_run_history.sql").write_text(
            (MIGRATIONS_DIR / "0002_run_history.sql").read_text())
        assert await apply_migrations(fresh_dsn, tmp_path) == ["0002_run_history"]
        rows = await connection.fetch(
            "SELECT run_id, task_key, repo, status, finished_at IS NOT NULL AS finished"
            " FROM runs ORDER BY run_id")
    finally:
        await connection.close()
    assert [tuple(row) for row in rows] == [
        ("run-a", "T-1", "acme/web", "failed", True),
        ("run-b", None, None, None, False),
    ]


async def test_failed_migration_leaves_nothing_behind(fresh_dsn: str, tmp_path: Path) -> None:
    (tmp_path / "0001_broken.sql").write_text("CREATE TABLE half (x int);\nSELECT nonsense;")
    with pytest.raises(MigrationError, match="0001_broken failed"):
        await apply_migrations(fresh_dsn, tmp_path)
    assert await _fetchval(fresh_dsn, "SELECT to_regclass('half') IS NULL") is True


# --- index ----------------------------------------------------------------------------------


async def test_upserting_a_record_twice_keeps_one_point(index: VectorIndex) -> None:
    first, second = unit_vectors(2)
    await index.upsert([IndexPoint("rec-1", first, payload("ns-a", tags=["v1"]))])
    await index.upsert([IndexPoint("rec-1", second, payload("ns-a", tags=["v2"]))])
    assert await index.count() == 1
    [hit] = await index.search(second, SearchScope("ns-a", limit=5, min_score=0.9))
    # A search hit carries its record id alone; the nearest points carry their payloads.
    assert (hit.record_id, hit.payload) == ("rec-1", {"record_id": "rec-1"})
    assert hit.score == pytest.approx(1.0, abs=1e-4)
    [point] = await index.nearest(second, "ns-a", 5, 0.9)
    assert (point.payload["record_id"], point.payload["tags"]) == ("rec-1", ["v2"])


async def test_namespaces_never_mix(index: VectorIndex) -> None:
    [vector] = unit_vectors(1)
    await index.upsert([
        IndexPoint("a-1", vector, payload("ns-a")),
        IndexPoint("b-1", vector, payload("ns-b")),
        IndexPoint("b-2", near(vector, 0.8), payload("ns-b")),
    ])
    hits = await index.search(vector, SearchScope("ns-a", limit=10, min_score=-1.0))
    assert [h.record_id for h in hits] == ["a-1"]
    hits = await index.search(vector, SearchScope("ns-b", limit=10, min_score=-1.0))
    assert [h.record_id for h in hits] == ["b-1", "b-2"]
    assert await index.search(vector, SearchScope("ns-c", limit=10, min_score=-1.0)) == []
    assert (await index.count("ns-a"), await index.count("ns-b"), await index.count()) == (1, 2, 3)
    with pytest.raises(ValueError, match="namespace"):
        await index.search(vector, SearchScope("", limit=10, min_score=0.0))
    with pytest.raises(IndexRefused, match="namespace"):
        await index.upsert([IndexPoint("x", vector, {"record_kind": "memory"})])


async def test_min_score_and_filters(index: VectorIndex) -> None:
    [query] = unit_vectors(1)
    await index.upsert([
        IndexPoint("close-memory", near(query, 0.9), payload("ns", related_ids=["err-1"])),
        IndexPoint("mid-digest", near(query, 0.7),
                   payload("ns", record_kind="run_digest", related_ids=["err-1", "err-2"])),
        IndexPoint("far-fix", near(query, 0.3), payload("ns", record_kind="fix_pattern")),
    ])
    hits = await index.search(query, SearchScope("ns", limit=10, min_score=-1.0))
    assert [h.record_id for h in hits] == ["close-memory", "mid-digest", "far-fix"]
    assert [round(h.score, 3) for h in hits] == [0.9, 0.7, 0.3]

    hits = await index.search(query, SearchScope("ns", limit=10, min_score=0.5))
    assert [h.record_id for h in hits] == ["close-memory", "mid-digest"]
    hits = await index.search(query, SearchScope("ns", limit=1, min_score=0.5))
    assert [h.record_id for h in hits] == ["close-memory"]

    hits = await index.search(query, SearchScope(
        "ns", limit=10, min_score=-1.0, record_kinds=("run_digest", "fix_pattern")))
    assert [h.record_id for h in hits] == ["mid-digest", "far-fix"]
    hits = await index.search(query, SearchScope(
        "ns", limit=10, min_score=-1.0, related_ids=("err-2",)))
    assert [h.record_id for h in hits] == ["mid-digest"]
    hits = await index.search(query, SearchScope(
        "ns", limit=10, min_score=-1.0, record_kinds=("memory",), related_ids=("err-1",)))
    assert [h.record_id for h in hits] == ["close-memory"]


async def test_personal_records_reach_their_owner_only_and_expired_ones_nobody(
    index: VectorIndex,
) -> None:
    [query] = unit_vectors(1)
    past = datetime.now(UTC).timestamp() - 60
    future = datetime.now(UTC).timestamp() + 3600
    await index.upsert([
        IndexPoint("shared", near(query, 0.9), payload("ns")),
        IndexPoint("ann-private", near(query, 0.8),
                   payload("ns", scope="personal", agent_id="ann")),
        IndexPoint("bob-private", near(query, 0.7),
                   payload("ns", scope="personal", agent_id="bob")),
        IndexPoint("expired", near(query, 0.95), payload("ns", expires_at=past)),
        IndexPoint("expiring-later", near(query, 0.6), payload("ns", expires_at=future)),
    ])

    async def visible(agent_id: str | None) -> list[str]:
        hits = await index.search(query, SearchScope(
            "ns", limit=10, min_score=0.0, agent_id=agent_id))
        return [hit.record_id for hit in hits]

    assert await visible(None) == ["shared", "expiring-later"]
    assert await visible("ann") == ["shared", "ann-private", "expiring-later"]
    assert await visible("bob") == ["shared", "bob-private", "expiring-later"]
    assert await index.count("ns") == 5, "hidden is not deleted"


async def test_the_namespaces_nearest_judged_on_their_payloads_are_the_scopes_search(
    index: VectorIndex,
) -> None:
    """`nearest` reads the namespace alone and `SearchScope.admits_point` judges each point
    (streams/stages/neighbours.py): together they answer what each scope's filtered search
    answers, in every backend."""
    [query] = unit_vectors(1)
    now = datetime.now(UTC).timestamp()
    kinds = ("memory", "run_digest", "fix_pattern")
    states = ("approved", "draft", "rejected")
    points = [
        IndexPoint(f"p{n}", near(query, 0.95 - n * 0.02), payload(
            "ns", record_id=f"p{n}", record_kind=kinds[n % 3], review_state=states[n % 4 % 3],
            scope="personal" if n % 5 == 0 else "shared",
            agent_id=("ann", "bob")[n % 2] if n % 5 == 0 else None,
            memory_type=("fact", "preference")[n % 2], tags=["ops"] if n % 3 == 1 else [],
            related_ids=["err-1"] if n % 4 == 0 else [], tier=("active", "long_term")[n % 2],
            created_at=1000.0 + n, repo="acme/api" if n % 6 == 0 else None,
            security_scope="internal" if n % 7 == 0 else None,
            expires_at=now - 60 if n % 11 == 3 else None))
        for n in range(30)]
    await index.upsert([*points, IndexPoint("elsewhere", query, payload("other"))])
    scopes = [
        SearchScope("ns", limit=5, min_score=0.5),
        SearchScope("ns", limit=4, min_score=0.3, record_kinds=("memory",), agent_id="ann",
                    memory_types=("fact",), review_states=("approved", "draft")),
        SearchScope("ns", limit=10, min_score=0.0, agent_id="bob", tags=("ops",),
                    review_states=("approved", "draft", "rejected")),
        SearchScope("ns", limit=10, min_score=0.0, tiers=("active",),
                    related_ids=("err-1",), review_states=states),
        SearchScope("ns", limit=10, min_score=0.0, since=1005.0, until=1020.0,
                    repos=("acme/api",), review_states=states),
        SearchScope("ns", limit=10, min_score=0.0, security_scopes=("internal",),
                    review_states=states),
    ]
    for scope in scopes:
        nearest = await index.nearest(query, "ns", 100, scope.min_score)
        judged = [hit.record_id for hit in nearest if scope.admits_point(hit.payload, now)]
        searched = [hit.record_id for hit in await index.search(query, scope)]
        assert judged[:scope.limit] == searched, scope
        assert searched, scope
    assert "elsewhere" not in [hit.record_id for hit in await index.nearest(query, "ns", 100,
                                                                             -1.0)]


async def test_a_partitions_nearest_behind_a_crowd_of_others_are_found(
    index: VectorIndex,
) -> None:
    """When the namespace's nearest points are all outside the memory's partition (another
    agent's personal memories), the partition's own search finds its neighbours."""
    [query] = unit_vectors(1)
    crowd = [IndexPoint(f"bob-{n}", near(query, 0.99 - n * 0.001),
                        payload("ns", record_id=f"bob-{n}", scope="personal", agent_id="bob"))
             for n in range(NAMESPACE_NEAREST + 4)]
    await index.upsert([*crowd, IndexPoint("shared", near(query, 0.9), payload("ns")),
                        IndexPoint("ann-draft", near(query, 0.85),
                                   payload("ns", scope="personal", agent_id="ann",
                                           review_state="draft"))])
    ann = Record(record_id="new", namespace="ns", record_kind="memory", text="x",
                 memory_type="fact", scope="personal", agent_id="ann",
                 provenance=Provenance(source_event_id="e", source_topic="memory.events",
                                       source_partition=0, source_offset=0, producer="tests"),
                 created_at=datetime.now(UTC))
    found = await partition_nearest(index, ann, query, 0.8)
    assert [hit.record_id for hit in found] == ["shared", "ann-draft"]
    bob = ann.model_copy(update={"agent_id": "bob"})
    found = await partition_nearest(index, bob, query, 0.8)
    assert [hit.record_id for hit in found] == ["bob-0", "bob-1", "bob-2", "bob-3"]


async def test_postgres_fallback_search_keeps_the_index_rules(migrated_dsn: str) -> None:
    [query] = unit_vectors(1)
    now = datetime.now(UTC)
    await _insert_records(migrated_dsn, [
        _record("close", "ns", near(query, 0.9), related_ids=["x"]),
        _record("digest", "ns", near(query, 0.8), record_kind="run_digest"),
        _record("ann-private", "ns", near(query, 0.85), scope="personal", agent_id="ann"),
        _record("expired", "ns", near(query, 0.95), expires_at=now - timedelta(minutes=1)),
        _record("draft", "ns", near(query, 0.97), review_state="draft"),
        _record("far", "ns", near(query, 0.2)),
        _record("elsewhere", "other", near(query, 0.99)),
    ])
    fallback = await RecordsSearch.connect(migrated_dsn)
    try:
        async def found(**scope: Any) -> list[str]:
            hits = await fallback.search(query, SearchScope("ns", limit=10, min_score=0.5,
                                                            **scope))
            return [hit.record_id for hit in hits]

        assert await found() == ["close", "digest"]
        hits = await fallback.search(query, SearchScope("ns", limit=10, min_score=0.5))
        assert [round(hit.score, 3) for hit in hits] == [0.9, 0.8]
        assert await found(agent_id="ann") == ["close", "ann-private", "digest"]
        assert await found(record_kinds=("run_digest",)) == ["digest"]
        assert await found(related_ids=("x",)) == ["close"]
        assert await found(review_states=("approved", "draft")) == ["draft", "close", "digest"]
    finally:
        await fallback.close()


async def test_delete(index: VectorIndex) -> None:
    vectors = unit_vectors(3)
    await index.upsert([IndexPoint(f"r{i}", v, payload("ns")) for i, v in enumerate(vectors)])
    await index.delete(["r1", "never-indexed"])
    assert await index.count("ns") == 2
    assert await index.search(vectors[1], SearchScope("ns", limit=10, min_score=0.99)) == []
    ids = {i async for batch in index.iter_record_ids("ns", batch_size=1) for i in batch}
    assert ids == {"r0", "r2"}


async def test_edge_reopen_keeps_data(tmp_path: Path) -> None:
    vectors = unit_vectors(20)
    first = EdgeIndex(tmp_path)
    await first.ensure_collection()
    await first.upsert([IndexPoint(f"r{i}", v, payload(f"ns{i % 2}"))
                        for i, v in enumerate(vectors)])
    await first.delete(["r0"])
    await first.close()

    again = EdgeIndex(tmp_path)
    await again.ensure_collection()
    try:
        assert (await again.count(), await again.count("ns1")) == (19, 10)
        [hit] = await again.search(vectors[3], SearchScope("ns1", limit=1, min_score=0.99))
        assert hit.record_id == "r3"
    finally:
        await again.close()


async def test_edge_search_names_points_another_opener_wrote(tmp_path: Path) -> None:
    """Searches read point ids alone and name their records from what the index met before
    (qdrant_edge_index.RecordIds): it reads the stored points' record ids at open as far as
    it keeps them (5 here), names the others from their payloads, and forgets the oldest."""
    vectors = unit_vectors(20)
    texts = [f"note {i} about {'paint' if i % 2 else 'hiking'}" for i in range(20)]
    first = EdgeIndex(tmp_path)
    await first.ensure_collection()
    await first.upsert([IndexPoint(f"r{i}", v, payload("ns"), document_vector(texts[i]))
                        for i, v in enumerate(vectors)])
    await first.close()

    again = EdgeIndex(tmp_path, record_ids_kept=5)
    await again.ensure_collection()
    try:
        for _ in range(2):
            for i, vector in enumerate(vectors):
                [hit] = await again.search(vector, SearchScope("ns", limit=1, min_score=0.99))
                assert (hit.record_id, hit.payload) == (f"r{i}", {"record_id": f"r{i}"})
            every = await again.search(vectors[0], SearchScope("ns", limit=20, min_score=-1))
            assert {hit.record_id for hit in every} == {f"r{i}" for i in range(20)}
            paint = query_term_ids("paint")
            counts = await again.term_counts("ns", paint)
            found = await again.search_lexical(
                query_vector(paint, counts.frequencies, counts.documents),
                SearchScope("ns", limit=20, min_score=0.0))
            assert {hit.record_id for hit in found} == {f"r{i}" for i in range(1, 20, 2)}
    finally:
        await again.close()


def test_edge_survives_a_kill_without_flush_or_close(tmp_path: Path) -> None:
    # The write-ahead log is replayed on open: a killed worker loses no indexed point.
    script = (
        "import asyncio, os, numpy as np\n"
        "from stores.index.qdrant_edge import EdgeIndex\n"
        "from stores.index.protocol import IndexPoint\n"
        "async def main():\n"
        f"    index = EdgeIndex({str(tmp_path)!r})\n"
        "    await index.ensure_collection()\n"
        "    v = np.ones(384, dtype=np.float32)\n"
        "    await index.upsert([IndexPoint(f'r{i}', v, {'namespace': 'ns'}) for i in range(5)])\n"
        "    os._exit(0)\n"
        "asyncio.run(main())\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, check=True)
    assert asyncio.run(_edge_count(tmp_path)) == 5


async def _edge_count(path: Path) -> int:
    index = EdgeIndex(path)
    await index.ensure_collection()
    try:
        return await index.count("ns")
    finally:
        await index.close()


async def test_edge_refuses_a_second_opener(tmp_path: Path) -> None:
    first = EdgeIndex(tmp_path)
    await first.ensure_collection()
    try:
        with pytest.raises(RuntimeError, match="another process"):
            await EdgeIndex(tmp_path).ensure_collection()
    finally:
        await first.close()


async def test_a_point_the_index_cannot_score_is_refused(index: VectorIndex) -> None:
    with pytest.raises(IndexRefused, match="dimension"):
        await index.upsert([IndexPoint("r", [1.0, 0.0], payload("ns"))])
    with pytest.raises(IndexRefused, match="zero vector"):
        await index.upsert([IndexPoint("r", np.zeros(DIM), payload("ns"))])
    with pytest.raises(IndexRefused, match="NaN"):
        await index.upsert([IndexPoint("r", np.full(DIM, np.nan), payload("ns"))])


def test_point_ids_are_stable() -> None:
    assert point_id("rec-1") == point_id("rec-1") != point_id("rec-2")
    assert str(point_id("rec-1")) == "5a3b4052-8b99-59ea-a9c0-731dea1360e0"


# --- rebuild from Postgres ------------------------------------------------------------------


async def _insert_records(dsn: str, rows: list[dict[str, Any]]) -> None:
    connection = await connect_with_vectors(dsn)
    try:
        for row in rows:
            columns = list(row)
            placeholders = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
            await connection.execute(
                f"INSERT INTO records ({', '.join(columns)}) VALUES ({placeholders})",
                *row.values(),
            )
    finally:
        await connection.close()


def _record(record_id: str, namespace: str, vector: NDArray[np.float32] | None,
            **fields: Any) -> dict[str, Any]:
    created = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    return {"record_id": record_id, "namespace": namespace, "record_kind": "memory",
            "text": f"text of {record_id}", "source_event_id": f"ev-{record_id}",
            "created_at": created, "embedding": vector} | fields


async def test_reindex_rebuilds_an_emptied_index(migrated_dsn: str, index: VectorIndex) -> None:
    vectors = unit_vectors(6)
    await _insert_records(migrated_dsn, [
        _record("m-1", "ns-a", vectors[0], tags=["x"], related_ids=["m-2"], run_ref="run-9",
                expires_at=datetime(2027, 1, 1, tzinfo=UTC)),
        _record("m-2", "ns-a", vectors[1], record_kind="run_digest"),
        _record("m-3", "ns-b", vectors[2], scope="personal", agent_id="zed"),
        _record("old", "ns-a", vectors[3]),
        _record("gone", "ns-a", vectors[4], expired_at=datetime(2026, 11, 2, tzinfo=UTC)),
        _record("no-vector", "ns-a", None, title="Title"),
    ])
    await _execute(migrated_dsn, "UPDATE records SET superseded_by = 'm-1' WHERE record_id = 'old'")
    # The index is empty but for a point whose record has since been superseded.
    await index.upsert([IndexPoint("old", vectors[3], payload("ns-a"))])

    report = await reindex(migrated_dsn, index, batch_size=2)

    assert (report.indexed, report.missing_embedding, report.embedded, report.pruned) == (
        3, 1, 0, 1)
    # Every live record's entities are read again, and its confidence and term presence
    # computed (the rows were stored without them).
    assert (report.entities_indexed, report.confidence_filled, report.presence_filled) == (
        4, 4, 4)
    connection = await connect_with_vectors(migrated_dsn)
    try:
        kept = await connection.fetchval(
            "SELECT term_presence FROM records WHERE record_id = 'm-1'")
    finally:
        await connection.close()
    assert kept == SparseVector.of(term_presence(
        "text of m-1", occurred_at=datetime(2026, 11, 1, 12, 0, tzinfo=UTC)))
    assert (await index.count("ns-a"), await index.count("ns-b")) == (2, 1)
    [personal] = await index.search(vectors[2], SearchScope(
        "ns-b", limit=1, min_score=0.99, agent_id="zed"))
    assert personal.record_id == "m-3"
    [hit] = await index.search(vectors[0], SearchScope("ns-a", limit=1, min_score=0.99))
    assert hit.record_id == "m-1"
    # The payloads rebuilt, as the nearest points carry them (a search hit carries its id).
    [personal] = await index.nearest(vectors[2], "ns-b", 1, 0.99)
    assert (personal.record_id, personal.payload["agent_id"]) == ("m-3", "zed")
    [hit] = await index.nearest(vectors[0], "ns-a", 1, 0.99)
    assert hit.record_id == "m-1"
    assert hit.payload == {
        "record_id": "m-1", "namespace": "ns-a", "record_kind": "memory", "scope": "shared",
        "agent_id": None, "review_state": "approved", "trust_class": "raw", "tier": "active",
        "tags": ["x"],
        "related_ids": ["m-2"], "created_at": datetime(2026, 11, 1, 12, 0, tzinfo=UTC).timestamp(),
        "expires_at": datetime(2027, 1, 1, tzinfo=UTC).timestamp(), "run_ref": "run-9",
        "memory_type": None, "readers": ["shared"],
        "live_until": datetime(2027, 1, 1, tzinfo=UTC).timestamp(),
        # No repo: the namespace's (stores/index_payload.NAMESPACE_WIDE).
        "repo": "*", "security_scope": None,
    }

    embedded_texts: list[str] = []

    def embed(texts: list[str]) -> NDArray[np.float32]:
        embedded_texts.extend(texts)
        return np.stack([vectors[5]] * len(texts))

    report = await reindex(migrated_dsn, index, namespace="ns-a", embed=embed)
    assert (report.indexed, report.embedded, report.missing_embedding) == (3, 1, 0)
    assert embedded_texts == ["Title\ntext of no-vector"]
    [hit] = await index.search(vectors[5], SearchScope("ns-a", limit=1, min_score=0.99))
    assert hit.record_id == "no-vector"
    # Written back: the next rebuild needs no model, and has no presence to fill.
    report = await reindex(migrated_dsn, index, namespace="ns-a")
    assert (report.indexed, report.missing_embedding, report.presence_filled) == (3, 0, 0)


async def test_reindex_gives_a_record_restated_before_the_words_of_its_restatements(
        migrated_dsn: str, index: VectorIndex) -> None:
    # Stored as a worker before issue 37 stored it: the twin's words alone.
    [vector] = unit_vectors(1)
    created = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    text, again = "Deploys to staging need the office VPN.", "Staging rollouts require a tunnel."
    alone = document_vector(text, occurred_at=created)
    await _insert_records(migrated_dsn, [_record(
        "twin", "ns", vector, text=text, body={"restatements": [{"text": again}]},
        lexical=alone, lexical_terms=list(alone.indices),
        term_presence=SparseVector.of(term_presence(text, occurred_at=created)))])
    tunnel = query_term_ids("tunnel rollouts")

    async def found() -> list[str]:
        counts = await index.term_counts("ns", tunnel)
        return [hit.record_id for hit in await index.search_lexical(
            query_vector(tunnel, counts.frequencies, counts.documents),
            SearchScope("ns", limit=5, min_score=0.0))]

    report = await reindex(migrated_dsn, index, prune=False)
    assert report.restated_refreshed == 1
    assert await found() == ["twin"]
    connection = await connect_with_vectors(migrated_dsn)
    try:
        held = await connection.fetchval(
            "SELECT term_presence FROM records WHERE record_id = 'twin'")
    finally:
        await connection.close()
    assert held == SparseVector.of(term_presence(text, occurred_at=created,
                                                 restatements=[again]))
    # Written back: the next rebuild has nothing to refresh.
    assert (await reindex(migrated_dsn, index, prune=False)).restated_refreshed == 0


async def test_payload_is_the_same_from_a_row_and_from_a_model_dump(migrated_dsn: str) -> None:
    record = _record("p-1", "ns", unit_vectors(1)[0], tags=["a", "b"], related_ids=["q"],
                     expires_at=datetime(2027, 1, 1, tzinfo=UTC))
    await _insert_records(migrated_dsn, [record])
    connection = await connect_with_vectors(migrated_dsn)
    try:
        row = await connection.fetchrow("SELECT * FROM records WHERE record_id = 'p-1'")
    finally:
        await connection.close()
    dumped = record | {"scope": "shared", "tier": "active", "review_state": "approved",
                       "trust_class": "raw", "tags": ("a", "b"), "related_ids": ("q",),
                       "run_ref": None}
    assert index_payload(row) == index_payload(dumped)
    assert index_payload(dumped | {"created_at": dumped["created_at"].replace(tzinfo=None)}) == (
        index_payload(dumped))
    with pytest.raises(ValueError, match="namespace"):
        index_payload({k: v for k, v in dumped.items() if k != "namespace"})
    assert index_payload(dumped | {"created_at": dumped["created_at"] + timedelta(seconds=1)})[
        "created_at"] == index_payload(dumped)["created_at"] + 1


async def test_a_records_term_presence_is_kept_and_a_token_count_only_for_its_text(
    migrated_dsn: str,
) -> None:
    from memstream_client.events import Provenance
    from schemas.records import Record
    from stores.postgres.stores import PostgresStores

    record = Record(record_id="t1", namespace="ns", record_kind="memory",
                    text="Deploys need the VPN.", created_at=datetime.now(UTC),
                    provenance=Provenance(source_event_id="e-t1", source_topic="memory.events",
                                          source_partition=0, source_offset=0,
                                          producer="tests"))
    stores = await PostgresStores.connect(migrated_dsn)
    try:
        await stores.records.insert_records([(record, unit_vectors(1)[0])])
        found = (await stores.records.records_by_id("ns", ["t1"]))["t1"]
        assert found.text_tokens is None
        # Kept by the store at the write, as search would read it from the texts.
        assert found.held_terms == term_presence(record.text, occurred_at=record.created_at)

        # Counted from a text the record no longer holds (changed since): nothing is kept.
        await stores.records.store_text_tokens([("t1", "Deploys needed the VPN.", 9)])
        assert (await stores.records.records_by_id("ns", ["t1"]))["t1"].text_tokens is None

        await stores.records.store_text_tokens([("t1", record.text, 6), ("absent", "x", 1)])
        assert (await stores.records.records_by_id("ns", ["t1"]))["t1"].text_tokens == 6
    finally:
        await stores.close()


async def test_a_consolidation_is_one_transaction_that_runs_once(migrated_dsn: str) -> None:
    from memstream_client.events import Provenance
    from schemas.records import Record
    from stores.consolidations import NewReport
    from stores.postgres.stores import PostgresStores

    def memory(record_id: str) -> Record:
        return Record(record_id=record_id, namespace="ns", record_kind="memory",
                      text=f"memory {record_id}", created_at=datetime.now(UTC),
                      provenance=Provenance(source_event_id=f"e-{record_id}",
                                            source_topic="memory.events", source_partition=0,
                                            source_offset=0, producer="tests"))

    members = [memory("m1"), memory("m2"), memory("m3")]
    vectors = unit_vectors(4)
    stores = await PostgresStores.connect(migrated_dsn)
    records, consolidations = stores.records, stores.consolidations
    try:
        stored = list(zip(members, vectors[:3], strict=True))
        await records.insert_records(stored)
        await records.insert_records(stored)  # a replay: stored and counted once
        counts = await consolidations.counts("ns")
        assert [w.memories for w in counts.windows] == [3]
        facts = await consolidations.facts("ns")
        assert (facts.reports_today, facts.new_since_report, facts.last_report_id) == (0, 3, None)

        merged = memory("merged")
        report = NewReport(report_id="cns_1", namespace="ns", reason="manual",
                           started_at=datetime.now(UTC), memories=3,
                           clusters=[{"new_id": "merged", "members": ["m1", "m2"]}],
                           merged_ids=["m1", "m2"], new_ids=["merged"], timings={"load": 0.1})
        superseded = {"m1": "merged", "m2": "merged"}
        assert await consolidations.apply(
            report, [(merged, vectors[3])], superseded) == {"m1": 2, "m2": 2}
        assert await consolidations.apply(
            report, [(merged, vectors[3])], superseded) is None, "the same request again"

        lineage = await records.record_lineage("ns", "merged")
        assert lineage is not None
        assert [m.record_id for m in lineage.supersedes] == ["m1", "m2"]
        old = await records.record_lineage("ns", "m1")
        assert old is not None and old.superseded_by == "merged"
        assert [v.version for v in old.versions] == [1, 2]
        assert old.versions[1].body["superseded_by"] == "merged"
        live = [record.record_id for record, _ in await consolidations.live_memories("ns")]
        assert live == ["m3", "merged"]
        facts = await consolidations.facts("ns")
        assert (facts.reports_today, facts.new_since_report, facts.last_report_id) == (
            1, 0, "cns_1"), "the replacement is not a new memory"
        assert await consolidations.claim_request("ns", "day:x", "cns_2", 10)
        await consolidations.mark_request_sent("ns", "day:x")
        assert not await consolidations.claim_request("ns", "day:x", "cns_2", 12)
    finally:
        await stores.close()


async def test_scoring_changes_are_versions_made_once_each_in_turn(migrated_dsn: str) -> None:
    from processors.recall.scoring_changes import RefusedScoringChange
    from stores.postgres.rows import create_pool
    from stores.recall.scoring_configs import PostgresScoringConfigs, ScoringChange

    now = [0.0]
    pool = await create_pool(migrated_dsn, max_size=8)
    # Three workers' views of the same table, each with its own cache, on the same clock:
    # two apply changes, the third only reads.
    mine = PostgresScoringConfigs(pool, clock=lambda: now[0])
    theirs = PostgresScoringConfigs(pool, clock=lambda: now[0])
    reader = PostgresScoringConfigs(pool, clock=lambda: now[0])

    def change(event_id: str, expected_version: int | None = None,
               **changes: float) -> ScoringChange:
        return ScoringChange(event_id, "ns", changes or {"blend_boost_factor": 0.2}, "ana",
                             datetime.now(UTC), expected_version)

    try:
        assert (await reader.current("ns")).version == 0
        # Changes applied at once, by either worker, each read the version the last wrote.
        applied = await asyncio.gather(*(
            (mine if n % 2 else theirs).apply_change(change(f"e{n}", recency_floor=n / 10))
            for n in range(8)))
        assert sorted(v.version for v in applied if v is not None) == list(range(1, 9))
        assert await mine.apply_change(change("e3", expected_version=0)) is None, "a replay"
        with pytest.raises(RefusedScoringChange) as stale:
            await mine.apply_change(change("e9", expected_version=7))
        assert stale.value.reason == "stale_version"
        with pytest.raises(RefusedScoringChange) as invalid:
            await mine.apply_change(change("e10", blend_usefulness_weight=0.9, boost=1))
        assert invalid.value.problems == (
            "boost is not a scoring parameter",
            "blend_usefulness_weight + blend_recency_weight + blend_frequency_weight must sum "
            "to 1 (got 1.2999999999999998)")
        history = await theirs.history("ns", 3)
        assert [v.version for v in history] == [8, 7, 6]
        newest = await mine.newest("ns")
        assert (newest.version, newest.config.recency_floor, newest.changed_by) == (
            8, history[0].config.recency_floor, "ana")

        # The reader's view is what it read, until that is 2 s old; a worker's own change
        # drops its view at once.
        assert (await reader.current("ns")).version == 0
        await mine.apply_change(change("e11", expected_version=8))
        assert (await mine.current("ns")).version == 9
        now[0] += 1.9
        assert (await reader.current("ns")).version == 0
        now[0] += 0.2
        assert (await reader.current("ns")).version == 9
        assert (await reader.current("other")).version == 0
    finally:
        await pool.close()


# --- lexical ------------------------------------------------------------------------------

LEXICAL_TEXTS = {
    "paint": "Melanie painted a sunrise over the lake last summer.",
    "paints": "Caroline paints landscapes; painting calms her down.",
    "support": "Caroline went to an LGBTQ support group yesterday.",
    "vpn": "The staging database only accepts connections over the VPN.",
}


async def test_lexical_search_and_term_counts_agree_in_every_backend_and_in_postgres(
    index: VectorIndex, migrated_dsn: str,
) -> None:
    vectors = unit_vectors(len(LEXICAL_TEXTS))
    created = datetime(2026, 11, 1, tzinfo=UTC)
    await index.upsert([
        IndexPoint(record_id, vector, payload("ns", created_at=created.timestamp()),
                   document_vector(text, occurred_at=created))
        for (record_id, text), vector in zip(LEXICAL_TEXTS.items(), vectors, strict=True)])
    await _insert_records(migrated_dsn, [
        _record(record_id, "ns", vector, text=text, created_at=created,
                lexical=document_vector(text, occurred_at=created),
                lexical_terms=list(document_vector(text, occurred_at=created).indices))
        for (record_id, text), vector in zip(LEXICAL_TEXTS.items(), vectors, strict=True)])
    fallback = await RecordsSearch.connect(migrated_dsn)
    try:
        for query in ("who paints?", "support group", "VPN staging", "sunrise in November 2026"):
            term_ids = query_term_ids(query)
            counted, exact = (await index.term_counts("ns", term_ids),
                              await fallback.term_counts("ns", term_ids))
            assert counted == exact, query
            vector = query_vector(term_ids, exact.frequencies, exact.documents)
            scope = SearchScope("ns", limit=10, min_score=0.0)
            # Backends order equal scores their own way: compare by score, then id. Each hit
            # carries its record id alone (SearchIndex.search_lexical).
            live = sorted(((h.record_id, round(h.score, 4), h.payload)
                           for h in await index.search_lexical(vector, scope)),
                          key=lambda hit: (-hit[1], hit[0]))
            degraded = sorted(((h.record_id, round(h.score, 4), h.payload)
                               for h in await fallback.search_lexical(vector, scope)),
                              key=lambda hit: (-hit[1], hit[0]))
            assert live == degraded, query
            assert live, query
        paints = query_term_ids("who paints?")
        counts = await index.term_counts("ns", paints)
        found = [h.record_id for h in await index.search_lexical(
            query_vector(paints, counts.frequencies, counts.documents),
            SearchScope("ns", limit=10, min_score=0.0))]
        assert set(found) == {"paint", "paints"}, "stems meet: paints, painted, painting"
        assert await index.search_lexical(NO_TERMS, SearchScope("ns", 10, 0.0)) == []
    finally:
        await fallback.close()
