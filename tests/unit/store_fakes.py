"""In-memory fakes of the stores' Protocols (stores/*.py), for running stream stages without
Postgres. Each keeps what a test asserts on in plain attributes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from processors.knowledge.entities import RecordEntities
from processors.text.embedding import Vector
from schemas.records import Record
from stores.consolidations import (
    ConsolidationCounts,
    ConsolidationFacts,
    CountedRequest,
    CountWindow,
    MaintenanceReport,
    NewReport,
    ReportLease,
)
from stores.recall.gaps import GapSighting
from stores.recall.retrievals import RetrievalRow
from stores.records import FoundRecord, RecordLineage, StoredRecord


class WordCounter:
    """The embedder's tokenizer as the record sink uses it, one token a word."""

    def token_costs(self, texts: Sequence[str]) -> list[int]:
        return [len(text.split()) for text in texts]


class InMemoryRecords:
    def __init__(self) -> None:
        self.records: dict[str, tuple[Record, datetime]] = {}
        self.vectors: dict[str, Vector] = {}
        self.versions: dict[str, int] = {}
        self.superseded_by: dict[str, str] = {}
        self.announced: set[str] = set()
        self.refused: dict[str, tuple[str, datetime]] = {}
        self.refusals_announced: set[str] = set()
        self.text_tokens: dict[str, int] = {}

    async def insert_records(self, rows: Sequence[tuple[Record, Vector]]) -> dict[str, datetime]:
        before = {r.record_id: self.records[r.record_id][1] for r, _ in rows
                  if r.record_id in self.records}
        for record, vector in rows:
            if record.record_id not in self.records:
                self.records[record.record_id] = (record, datetime.now(UTC))
                self.vectors[record.record_id] = vector
                self.versions[record.record_id] = 1
        return before

    async def mark_announced(self, record_ids: Sequence[str]) -> None:
        self.announced.update(record_ids)

    async def existing_record_ids(self, namespace: str, record_ids: Iterable[str]) -> set[str]:
        return {i for i in record_ids
                if i in self.records and self.records[i][0].namespace == namespace}

    async def announced_record_ids(self, record_ids: Iterable[str]) -> set[str]:
        return set(record_ids) & self.announced

    async def last_in_threads(self, namespace: str, threads: Iterable[str]) -> dict[str, Record]:
        raise NotImplementedError

    async def records_by_id(self, namespace: str,
                            record_ids: Sequence[str]) -> dict[str, FoundRecord]:
        raise NotImplementedError

    async def stored_records(self, namespace: str,
                             record_ids: Sequence[str]) -> list[StoredRecord]:
        return [StoredRecord(self.records[i][0], self.vectors.get(i), self.versions[i],
                             self.superseded_by.get(i))
                for i in sorted(record_ids)
                if i in self.records and self.records[i][0].namespace == namespace]

    async def task_digests(self, namespace: str, run_ids: Sequence[str],
                           per_task: int) -> list[dict[str, Any]]:
        digests = [record for record, _ in self.records.values()
                   if record.namespace == namespace and record.record_kind == "run_digest"]
        tasks = {d.body.get("task_key") for d in digests if d.run_ref in run_ids} - {None}
        latest = sorted((d for d in digests if d.body.get("task_key") in tasks),
                        key=lambda d: (d.created_at, d.record_id), reverse=True)
        return [d.body for task in sorted(tasks)
                for d in [d for d in latest if d.body["task_key"] == task][:per_task]]

    async def store_vectors(self, vectors: Sequence[tuple[str, Vector]]) -> None:
        self.vectors.update(vectors)

    async def store_text_tokens(self, counts: Sequence[tuple[str, str, int]]) -> None:
        self.text_tokens.update((record_id, tokens) for record_id, text, tokens in counts
                                if record_id in self.records
                                and self.records[record_id][0].text == text)

    async def record_counts(self, namespace: str) -> dict[str, int]:
        raise NotImplementedError

    async def record_lineage(self, namespace: str, record_id: str) -> RecordLineage | None:
        raise NotImplementedError

    async def insert_refused_writes(self, refused: Sequence[tuple[Record, str]]
                                    ) -> dict[str, datetime]:
        before = {r.record_id: self.refused[r.record_id][1] for r, _ in refused
                  if r.record_id in self.refused}
        for record, reason in refused:
            self.refused.setdefault(record.record_id, (reason, datetime.now(UTC)))
        return before

    async def announced_refusal_ids(self, record_ids: Iterable[str]) -> set[str]:
        return set(record_ids) & self.refusals_announced

    async def mark_refusals_announced(self, record_ids: Sequence[str]) -> None:
        self.refusals_announced.update(record_ids)


class InMemoryConsolidations:
    """Facts are set by the test (`new_since_report`, `reports_today`, `windows`); requests
    and reports are kept as Postgres keeps them."""

    def __init__(self) -> None:
        self.new_since_report: dict[str, int] = {}
        self.reports_today: dict[str, int] = {}
        self.windows: dict[str, list[CountWindow]] = {}
        self.requests: dict[tuple[str, str], CountedRequest] = {}
        self.stored_reports: dict[str, MaintenanceReport] = {}
        self.leased_until: dict[str, datetime] = {}
        self.publish_started: dict[str, datetime] = {}
        self.fact_reads = 0

    async def facts(self, namespace: str) -> ConsolidationFacts:
        self.fact_reads += 1
        mine = sorted((r for r in self.stored_reports.values() if r.namespace == namespace),
                      key=lambda r: r.finished_at)
        return ConsolidationFacts(self.reports_today.get(namespace, 0),
                                  self.new_since_report.get(namespace, 0),
                                  mine[-1].report_id if mine else None)

    async def counts(self, namespace: str) -> ConsolidationCounts:
        claimed = sorted((r for (ns, _), r in self.requests.items() if ns == namespace),
                         key=lambda r: r.claimed_at)
        return ConsolidationCounts(sorted(self.windows.get(namespace, []),
                                          key=lambda w: w.window_start, reverse=True),
                                   claimed[-1] if claimed else None)

    async def claim_request(self, namespace: str, basis: str, request_id: str,
                            new_memories: int) -> bool:
        claimed = self.requests.setdefault(
            (namespace, basis),
            CountedRequest(request_id, basis, new_memories, datetime.now(UTC), None))
        return claimed.sent_at is None

    async def mark_request_sent(self, namespace: str, basis: str) -> None:
        claimed = self.requests[(namespace, basis)]
        if claimed.sent_at is None:
            self.requests[(namespace, basis)] = CountedRequest(
                claimed.request_id, basis, claimed.new_memories, claimed.claimed_at,
                datetime.now(UTC))

    async def live_memories(self, namespace: str) -> list[tuple[Record, Vector | None]]:
        raise NotImplementedError

    async def rejected_merges(self, namespace: str) -> set[str]:
        raise NotImplementedError

    async def apply(self, report: NewReport, merges: Sequence[tuple[Record, Vector]],
                    superseded: Mapping[str, str]) -> dict[str, int] | None:
        raise NotImplementedError

    async def report(self, report_id: str) -> MaintenanceReport | None:
        return self.stored_reports.get(report_id)

    async def reports(self, namespace: str, limit: int) -> list[MaintenanceReport]:
        raise NotImplementedError

    async def add_report_timings(self, report_id: str, timings: Mapping[str, float]) -> None:
        raise NotImplementedError

    async def unannounced_reports(self, limit: int) -> list[str]:
        waiting = sorted((r for r in self.stored_reports.values() if r.announced_at is None),
                         key=lambda r: r.finished_at)
        return [r.report_id for r in waiting[:limit]]

    async def lease_report(self, report_id: str, lease: timedelta) -> ReportLease | None:
        now = datetime.now(UTC)
        report = self.stored_reports[report_id]
        if report.announced_at is not None or self.leased_until.get(report_id, now) > now:
            return None
        self.leased_until[report_id] = now + lease
        tried_since = self.publish_started.get(report_id)
        self.publish_started.setdefault(report_id, now)
        return ReportLease(report_id, report.namespace, tuple(report.new_ids),
                           tuple(report.merged_ids), tried_since)

    async def mark_report_announced(self, report_id: str, timings: Mapping[str, float]) -> None:
        report = self.stored_reports[report_id]
        self.stored_reports[report_id] = MaintenanceReport(
            **{**vars(report), "timings": {**report.timings, **timings},
               "announced_at": datetime.now(UTC)})


class InMemoryRetrievals:
    def __init__(self, *, down: bool = False) -> None:
        self.logged: list[RetrievalRow] = []
        self.writes = 0
        self.searches: dict[tuple[str, str], int] = {}
        # While down, every write fails as Postgres away would.
        self.down = down

    async def spend_search(self, namespace: str, run_id: str) -> int:
        self.searches[(namespace, run_id)] = self.searches.get((namespace, run_id), 0) + 1
        return self.searches[(namespace, run_id)]

    async def log_retrievals(self, rows: Sequence[RetrievalRow]) -> None:
        if self.down:
            raise ConnectionRefusedError("postgres is away")
        self.writes += 1
        self.logged.extend(rows)


class InMemoryGaps:
    """The sightings of gaps, as the retrieval log writes them."""

    def __init__(self, *, down: bool = False) -> None:
        self.sightings: list[GapSighting] = []
        # While down, every write fails as Postgres away would.
        self.down = down

    async def count_sightings(self, sightings: Sequence[GapSighting]) -> None:
        if self.down:
            raise ConnectionRefusedError("postgres is away")
        self.sightings.extend(sightings)


class InMemoryEntities:
    """The entity index as the indexer sees it: records due (each with its version), and the
    latest reading of each record indexed."""

    def __init__(self) -> None:
        self.records: dict[str, tuple[Record, int]] = {}
        self.indexed: dict[str, RecordEntities] = {}

    async def due(self, limit: int) -> list[tuple[Record, int]]:
        return [(record, version) for record, version in self.records.values()
                if record.record_id not in self.indexed
                or self.indexed[record.record_id].version != version][:limit]

    async def index_entities(self, found: Sequence[RecordEntities]) -> None:
        self.indexed.update((item.record_id, item) for item in found)


class Unused:
    """An aggregate the stage under test must not touch."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, method: str) -> Any:
        raise AssertionError(f"the stage used {self._name}.{method}")


@dataclass
class InMemoryStores:
    records: InMemoryRecords = field(default_factory=InMemoryRecords)
    consolidations: InMemoryConsolidations = field(default_factory=InMemoryConsolidations)
    retrievals: InMemoryRetrievals = field(default_factory=InMemoryRetrievals)
    runs: Any = field(default_factory=lambda: Unused("runs"))
    fix_patterns: Any = field(default_factory=lambda: Unused("fix_patterns"))
    versions: Any = field(default_factory=lambda: Unused("versions"))
    blocks: Any = field(default_factory=lambda: Unused("blocks"))
    keys: Any = field(default_factory=lambda: Unused("keys"))
    dead_letters: Any = field(default_factory=lambda: Unused("dead_letters"))
    sessions: Any = field(default_factory=lambda: Unused("sessions"))
    documents: Any = field(default_factory=lambda: Unused("documents"))
    ratings: Any = field(default_factory=lambda: Unused("ratings"))
    gaps: Any = field(default_factory=lambda: Unused("gaps"))
    scoring_configs: Any = field(default_factory=lambda: Unused("scoring_configs"))
    planning: Any = field(default_factory=lambda: Unused("planning"))
    entities: InMemoryEntities = field(default_factory=InMemoryEntities)
    writes: Any = field(default_factory=lambda: Unused("writes"))

    async def ping(self) -> None:
        pass

    async def close(self) -> None:
        pass
