"""Prometheus metrics of one worker. Labels are bounded: topic, partition, type, outcome,
reason, stage, route, status, failure; never a namespace, a record id or a key."""

from __future__ import annotations

import platform
from importlib.metadata import version
from typing import get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from memstream_client.events import ConsolidateReason, RecordKind
from processors.api.access import Failure
from processors.consolidation.trigger import RunOutcome
from processors.events.errors import DeadLetterReason
from processors.memory.refusal import RefusalReason
from processors.runs.stack_traces import Dialect
from schemas.topics import DEAD_LETTER_TOPICS, INPUT_TOPICS

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# A consolidation of 10k memories takes seconds (bench/consolidation_bench.py).
_CONSOLIDATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 60.0, 120.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.events = Counter(
            "memstream_events_total",
            "Events consumed, by topic, event type and outcome (stored, duplicate, dlq, "
            "refused).",
            ["topic", "type", "outcome"],
            registry=r,
        )
        self.dlq = Counter(
            "memstream_dlq_total",
            "Events sent to a dead-letter topic, by source topic and reason.",
            ["topic", "reason"],
            registry=r,
        )
        self.dead_letters_read = Counter(
            "memstream_dead_letters_read_total",
            "Dead letters read back from a dead-letter topic, by topic and outcome (stored, "
            "duplicate: kept already, unrecorded: Postgres refused it, left on the topic).",
            ["topic", "outcome"],
            registry=r,
        )
        self.refused_writes = Counter(
            "memstream_refused_writes_total",
            "Memory writes refused as not worth retaining (announced, not stored), by reason.",
            ["reason"],
            registry=r,
        )
        self.auth_failures = Counter(
            "memstream_auth_failures_total",
            "HTTP requests refused by authentication (401) or by a key's grants (403), by why.",
            ["failure"],
            registry=r,
        )
        self.produced = Counter(
            "memstream_produced_total", "Messages produced, by topic.", ["topic"], registry=r
        )
        self.embed_batch_size = Histogram(
            "memstream_embed_batch_size", "Texts per embedding call.", buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.embed_seconds = Histogram(
            "memstream_embed_seconds", "Seconds per embedding call.", buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.stage_seconds = Histogram(
            "memstream_stage_seconds",
            "Seconds spent per pipeline stage and batch (validate, redact, postgres, index, "
            "announce).",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.end_to_end_lag = Histogram(
            "memstream_end_to_end_lag_seconds",
            "From an event's occurred_at to its record being durable and indexed.",
            ["topic"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.records = Counter(
            "memstream_records_written_total", "Records written, by kind.", ["kind"], registry=r
        )
        self.doc_chunks = Counter(
            "memstream_doc_chunks_total",
            "Chunks of documents applied, by outcome: embedded (new or back), unchanged (kept "
            "without embedding), removed (out of the index).", ["outcome"], registry=r,
        )
        self.expired_records = Counter(
            "memstream_records_expired_total",
            "Records expired by retention: out of the index, marked in Postgres.", registry=r,
        )
        self.redactions = Counter(
            "memstream_redactions_total", "Secrets redacted, by kind of secret.", ["kind"],
            registry=r,
        )
        self.retries = Counter(
            "memstream_sink_retries_total",
            "Steps retried after a store, index or broker failure, by topic.",
            ["topic"],
            registry=r,
        )
        self.unexpected_errors = Counter(
            "memstream_unexpected_errors_total",
            "Failures nobody classified (retried a few times, then dead-lettered as "
            "internal_error), by topic.",
            ["topic"],
            registry=r,
        )
        self.sanitized = Counter(
            "memstream_sanitized_chars_total",
            "Characters removed (U+0000) or replaced (lone surrogates) in prose fields at "
            "intake, by topic and field.",
            ["topic", "field"],
            registry=r,
        )
        self.agent_crashes = Counter(
            "memstream_agent_crashes_total",
            "Crashes of an agent's stages (the agent is restarted and runs the batch again), "
            "by agent.",
            ["agent"],
            registry=r,
        )
        self.agent_up = Gauge(
            "memstream_agent_up",
            "1 while an agent runs, 0 from a crash until it completes a batch again.",
            ["agent"],
            registry=r,
        )
        self.partition_stalled = Gauge(
            "memstream_partition_stalled",
            "1 when a partition this worker owns has lag and its committed offset has not "
            "moved for longer than MEMSTREAM_STALL_AFTER_S.",
            ["topic", "partition"],
            registry=r,
        )
        self.error_occurrences = Counter(
            "memstream_error_occurrences_total",
            "Errors consumed from runs (a replay counts again), by stack-trace dialect.",
            ["dialect"],
            registry=r,
        )
        self.fix_pattern_versions = Counter(
            "memstream_fix_pattern_versions_total",
            "Fix pattern versions written (created, or updated with new facts).",
            ["change"],
            registry=r,
        )
        self.llm_hook = Counter(
            "memstream_llm_hook_total",
            "Calls of the optional LLM hook, by use and outcome (used, fallback).",
            ["use", "outcome"],
            registry=r,
        )
        self.consolidation_counted = Counter(
            "memstream_consolidation_counted_total",
            "New memories counted toward their namespace's next consolidation.",
            registry=r,
        )
        self.consolidation_requests = Counter(
            "memstream_consolidation_requests_total",
            "Consolidation requests sent to memory.consolidate, by reason.",
            ["reason"],
            registry=r,
        )
        self.consolidation_runs = Counter(
            "memstream_consolidation_runs_total",
            "Consolidation requests handled, by reason and outcome (consolidated, "
            "report_today, too_few_new_memories, already_done).",
            ["reason", "outcome"],
            registry=r,
        )
        self.consolidation_clusters = Counter(
            "memstream_consolidation_clusters_total",
            "Clusters of duplicates merged into one replacement memory each.",
            registry=r,
        )
        self.consolidation_superseded = Counter(
            "memstream_consolidation_superseded_total",
            "Memories superseded by a replacement.",
            registry=r,
        )
        self.consolidation_seconds = Histogram(
            "memstream_consolidation_seconds",
            "Seconds per consolidation phase (load, embed, cluster, merge, store; total; and "
            "publish: index and announce, by the worker that owns the index).",
            ["phase"],
            buckets=_CONSOLIDATION_BUCKETS,
            registry=r,
        )
        self.consumer_lag = Gauge(
            "memstream_consumer_lag",
            "Messages of an input topic partition assigned to this worker that its consumer "
            "group has not committed yet (end offset minus committed offset).",
            ["topic", "partition"],
            registry=r,
        )
        self.http_seconds = Histogram(
            "memstream_http_request_seconds",
            "Seconds per HTTP request, by route template and status code.",
            ["route", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.retrieval_log_dropped = Counter(
            "memstream_retrieval_log_dropped_total",
            "Retrieval log rows and implicit gaps dropped because Postgres was away too long.",
            registry=r,
        )
        self.gaps_resolved = Counter(
            "memstream_gaps_resolved_total",
            "Gaps resolved by a memory that answers their question.",
            registry=r,
        )
        self.search_budget_exhausted = Counter(
            "memstream_search_budget_exhausted_total",
            "Searches, context packs and summaries refused because their run spent its "
            "budget, by route.",
            ["route"],
            registry=r,
        )
        self.context_items = Histogram(
            "memstream_context_items",
            "Items per context pack.", buckets=(0, 1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )
        self.context_degraded = Counter(
            "memstream_context_degraded_total",
            "Context packs answered without a part (index: from Postgres; core, planning, "
            "history or long_term: left out), by part.",
            ["part"],
            registry=r,
        )
        self.planning = Counter(
            "memstream_planning_total",
            "Work with repositories' planning files (docs/planning.md), by operation (read: "
            "a pack's or a listing's prefetch; sync: a write-back into the file) and outcome "
            "(ok, failed: logged, never raised into a run or a pack).",
            ["operation", "outcome"],
            registry=r,
        )
        self.up = Gauge("memstream_worker_up", "1 while the worker runs.", registry=r)
        self.build_info = Gauge(
            "memstream_build_info", "Always 1; the labels say what runs.",
            ["version", "python", "faust"], registry=r,
        )
        self.build_info.labels(version("memstream"), platform.python_version(),
                               version("faust-streaming")).set(1)
        self._start_known_series_at_zero()

    def _start_known_series_at_zero(self) -> None:
        """Export every known label combination of the rare counters from the start: a
        series that first appears at 1 shows no increase, so the first dead letter, error or
        fix pattern would be missing from rates and alerts."""
        for topic in INPUT_TOPICS:
            for reason in get_args(DeadLetterReason):
                self.dlq.labels(topic, reason)
            self.retries.labels(topic)
            self.unexpected_errors.labels(topic)
        for dlq in DEAD_LETTER_TOPICS:
            for outcome in ("stored", "duplicate", "unrecorded"):
                self.dead_letters_read.labels(dlq, outcome)
        for reason in get_args(RefusalReason):
            self.refused_writes.labels(reason)
        for failure in get_args(Failure):
            self.auth_failures.labels(failure)
        for dialect in get_args(Dialect):
            self.error_occurrences.labels(dialect)
        for change in ("created", "updated"):
            self.fix_pattern_versions.labels(change)
        for kind in get_args(RecordKind):
            self.records.labels(kind)
        for use in ("digest", "merge", "handoff", "summary"):
            for outcome in ("used", "fallback"):
                self.llm_hook.labels(use, outcome)
        self.retrieval_log_dropped.inc(0)
        self.gaps_resolved.inc(0)
        for route in ("/v1/search", "/v1/context", "/v1/summary"):
            self.search_budget_exhausted.labels(route)
        for part in ("index", "core", "planning", "history", "long_term", "budget"):
            self.context_degraded.labels(part)
        for operation in ("read", "sync"):
            for outcome in ("ok", "failed"):
                self.planning.labels(operation, outcome)
        for reason in get_args(ConsolidateReason):
            self.consolidation_requests.labels(reason)
            for outcome in get_args(RunOutcome):
                self.consolidation_runs.labels(reason, outcome)
