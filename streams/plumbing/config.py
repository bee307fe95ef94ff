"""Worker settings, read once from the environment (prefix MEMSTREAM_) by the entry point.

Defaults are the embedded set-up of `make run`: the local broker's address file, the local
Postgres, the embedded Qdrant engine under `var/`, the model under `.cache/`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast, get_args

from pydantic import TypeAdapter

from client.kafka_security import KafkaSecurity
from processors.consolidation.plan import DerivedReview
from processors.memory.lifecycle import Protection
from processors.memory.retention import RetentionRules, parse_retention
from processors.memory.twins import DUPLICATE_COSINE
from processors.recall.confidence import DEFAULT_TIER_THRESHOLDS, tier_thresholds_of
from processors.recall.context_pack import DEFAULT_SHARES, shares_of
from processors.runs.learnings import DEFAULT_LESSON_MIN_FIXES, DEFAULT_PATTERN_MIN_RUNS
from schemas.events import Repo
from stores.index.factory import DEFAULT_INDEX_URL

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class MemoryFlags:
    """Seed 002's runtime controls of the read path, under its names (`MEMORY_*`):
    fail-open by default."""

    enabled: bool = True
    history: bool = True
    long_term: bool = True
    documents: bool = True
    fail_open: bool = True
    context_budget_tokens: int = 2000
    # The planning plane (MEMORY_PLANNING=off|beads): off, no planning section and nothing
    # written back; it reads and writes repositories' files, so it is asked for.
    planning: bool = False
    # Each pack section's share of what the core blocks leave (processors/recall/context_pack.py).
    context_shares: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SHARES))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MemoryFlags:
        return cls(
            enabled=_flag(env.get("MEMORY_ENABLED", "true")),
            # The seed's values name what is on ("digest", "mem0"); "off" turns it off.
            history=_switch(env.get("MEMORY_HISTORY", "on")),
            long_term=_switch(env.get("MEMORY_LONG_TERM", "on")),
            documents=_switch(env.get("MEMORY_DOCUMENTS", "on")),
            fail_open=_flag(env.get("MEMORY_FAIL_OPEN", "true")),
            context_budget_tokens=int(env.get("MEMORY_CONTEXT_BUDGET_TOKENS",
                                              str(cls.context_budget_tokens))),
            planning=_planning(env.get("MEMORY_PLANNING", "off")),
            context_shares=shares_of(env.get("MEMORY_CONTEXT_SHARES", "")),
        )


@dataclass(frozen=True)
class Settings:
    kafka_bootstrap: str
    pg_dsn: str
    index_url: str
    model_dir: Path
    # SASL and TLS of every Kafka connection (MEMSTREAM_KAFKA_SECURITY_PROTOCOL, ...).
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    data_dir: Path = REPO_ROOT / "var"
    app_id: str = "memstream"
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    batch_max: int = 128
    batch_within_s: float = 0.05
    embed_threads: int = 2
    max_event_bytes: int = 64 * 1024
    commit_interval_s: float = 1.0
    # How soon a crashed worker's partitions move to the others (heartbeats every third).
    session_timeout_s: float = 30.0
    # A run without a task_key fixes an error met in the same repo at most this long before.
    fix_window_h: float = 24.0
    # Run learnings (processors/runs/learnings.py): a fix pattern proposes a draft lesson once
    # this many distinct runs fixed its error; a decision or gotcha proposes a draft pattern
    # once it recurs in this many runs of one task key.
    lesson_min_fixes: int = DEFAULT_LESSON_MIN_FIXES
    pattern_min_runs: int = DEFAULT_PATTERN_MIN_RUNS
    # The optional LLM hook (an OpenAI-compatible chat endpoint); off while the URL is empty.
    llm_url: str = ""
    llm_model: str = ""
    llm_api_key: str = ""
    llm_timeout_s: float = 10.0
    # Consolidation triggers: the tumbling window of the per-namespace counts, how long
    # closed windows are kept, and the seed's short-circuit rules.
    count_window_s: float = 1800.0
    count_keep_s: float = 86400.0
    consolidate_min_new: int = 10
    consolidate_once_per_day: bool = True
    # How often the consumer lag of the worker's partitions is read from the broker.
    lag_interval_s: float = 5.0
    # A partition with lag whose committed offset has not moved for this long, or an agent
    # that crashed this recently, makes /healthz answer 503.
    stall_after_s: float = 60.0
    # Tries of a step that fails with an error nobody classified, before it is dead-lettered.
    unexpected_attempts: int = 4
    # How often a worker that owns the index looks for consolidations to publish.
    relay_interval_s: float = 1.0
    # The consolidator process's niceness: maintenance yields the CPU to the writes.
    consolidator_nice: int = 10
    # Searches (and context packs) answered for one run; past it they answer empty.
    max_searches_per_run: int = 10
    # How often the records surfaced by reads are written to the retrieval log.
    retrieval_log_interval_s: float = 1.0
    # How often the worker that owns the index groups new gaps and asks the open ones again
    # (streams/reads/gap_keeper.py).
    gap_interval_s: float = 30.0
    # How often the entity index catches up with the records
    # (streams/stages/knowledge/entity_index.py): how long a new record's entities and wiki-links
    # may lag behind it.
    entity_index_interval_s: float = 0.5
    # How often the LLM hook, when one is configured, is asked for the entities of the
    # records it has not read yet (streams/stages/knowledge/entity_enrichment.py).
    entity_llm_interval_s: float = 5.0
    # Points written to the embedded index before it is optimized again (when idle).
    index_optimize_after: int = 10_000
    # Records that take updates only through review: an update to one becomes a pending
    # diff (MEMSTREAM_PROTECT: "approved", or "none").
    protect: tuple[Protection, ...] = ("approved",)
    # A new memory at least this close to a live one of its namespace that restates it (the
    # consolidation guard agrees) updates that one instead (processors/memory/twins.py, which
    # gives the measured threshold); MEMSTREAM_TWIN_COSINE=off adds every write as a new
    # memory. What it costs the pipeline: docs/performance.md.
    twin_cosine: float | None = DUPLICATE_COSINE
    # A new memory that restates a live one with another value invalidates it
    # (processors/knowledge/stale_facts.py; MEMSTREAM_INVALIDATION=off leaves both in force), found
    # this often off the write path (streams/stages/knowledge/stale_facts.py).
    invalidation: bool = True
    stale_check_interval_s: float = 0.5
    # The confidence each tier's records need to be shown when a read names no
    # min_confidence (MEMSTREAM_CONFIDENCE_THRESHOLDS: `tier=threshold,...`).
    confidence_thresholds: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_TIER_THRESHOLDS))
    # Characters a core memory block holds (seed 004's CORE_MEMORY_MAX_CHARS).
    block_max_chars: int = 1500
    # Content updates that move a memory one tier up (active, short_term, long_term).
    promote_after_updates: int = 5
    # How long each kind of record lives (MEMSTREAM_RETENTION: `kind=days,...`), and how
    # often the worker that owns the index expires what is due.
    retention: RetentionRules = field(default_factory=RetentionRules)
    retention_interval_s: float = 60.0
    # Merges the consolidator makes: drafts until a reviewer approves them, or approved.
    derived_review: DerivedReview = "draft"
    # Refuse memory writes not worth retaining (processors/memory/refusal.py): announced as
    # `refused` with the rule's reason, not stored.
    refuse_low_value: bool = True
    # Every HTTP route but /healthz and /metrics wants an API key (processors/api/access.py);
    # MEMSTREAM_AUTH=off lets every request do everything, for local use.
    auth: bool = True
    memory: MemoryFlags = field(default_factory=MemoryFlags)
    # Each repository's checkout, by the name runs give as their `repo` (docs/planning.md).
    planning_repos: Mapping[str, Path] = field(default_factory=dict)
    # How often the worker writes pending claims, closes and follow-ups back into the
    # repositories' files; None: only when `memstream plan sync` asks.
    planning_sync_s: float | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env

        def get(name: str, default: str) -> str:
            return env.get(f"MEMSTREAM_{name}", default)

        return cls(
            kafka_bootstrap=(get("KAFKA_BOOTSTRAP", "") or local_kafka_address(env)
                             or "127.0.0.1:19092"),
            kafka_security=KafkaSecurity.from_env(env),
            pg_dsn=get("PG_DSN", "") or _local_pg_dsn(),
            index_url=get("INDEX_URL", DEFAULT_INDEX_URL),
            model_dir=Path(get("MODEL_DIR", str(REPO_ROOT / ".cache" / "model"))),
            data_dir=Path(get("DATA_DIR", str(cls.data_dir))),
            app_id=get("APP_ID", cls.app_id),
            web_host=get("WEB_HOST", cls.web_host),
            web_port=int(get("WEB_PORT", str(cls.web_port))),
            batch_max=int(get("BATCH_MAX", str(cls.batch_max))),
            batch_within_s=float(get("BATCH_WITHIN_S", str(cls.batch_within_s))),
            embed_threads=int(get("EMBED_THREADS", str(cls.embed_threads))),
            max_event_bytes=int(get("MAX_EVENT_BYTES", str(cls.max_event_bytes))),
            commit_interval_s=float(get("COMMIT_INTERVAL_S", str(cls.commit_interval_s))),
            session_timeout_s=float(get("SESSION_TIMEOUT_S", str(cls.session_timeout_s))),
            fix_window_h=float(get("FIX_WINDOW_H", str(cls.fix_window_h))),
            lesson_min_fixes=int(get("LESSON_MIN_FIXES", str(cls.lesson_min_fixes))),
            pattern_min_runs=int(get("PATTERN_MIN_RUNS", str(cls.pattern_min_runs))),
            llm_url=get("LLM_URL", cls.llm_url),
            llm_model=get("LLM_MODEL", cls.llm_model),
            llm_api_key=get("LLM_API_KEY", cls.llm_api_key),
            llm_timeout_s=float(get("LLM_TIMEOUT_S", str(cls.llm_timeout_s))),
            count_window_s=float(get("COUNT_WINDOW_S", str(cls.count_window_s))),
            count_keep_s=float(get("COUNT_KEEP_S", str(cls.count_keep_s))),
            consolidate_min_new=int(get("CONSOLIDATE_MIN_NEW", str(cls.consolidate_min_new))),
            consolidate_once_per_day=_flag(get("CONSOLIDATE_ONCE_PER_DAY", "true")),
            lag_interval_s=float(get("LAG_INTERVAL_S", str(cls.lag_interval_s))),
            stall_after_s=float(get("STALL_AFTER_S", str(cls.stall_after_s))),
            unexpected_attempts=int(get("UNEXPECTED_ATTEMPTS", str(cls.unexpected_attempts))),
            relay_interval_s=float(get("RELAY_INTERVAL_S", str(cls.relay_interval_s))),
            consolidator_nice=int(get("CONSOLIDATOR_NICE", str(cls.consolidator_nice))),
            max_searches_per_run=int(get("MAX_SEARCHES_PER_RUN",
                                         str(cls.max_searches_per_run))),
            retrieval_log_interval_s=float(get("RETRIEVAL_LOG_INTERVAL_S",
                                               str(cls.retrieval_log_interval_s))),
            gap_interval_s=float(get("GAP_INTERVAL_S", str(cls.gap_interval_s))),
            entity_index_interval_s=float(get("ENTITY_INDEX_INTERVAL_S",
                                              str(cls.entity_index_interval_s))),
            entity_llm_interval_s=float(get("ENTITY_LLM_INTERVAL_S",
                                            str(cls.entity_llm_interval_s))),
            index_optimize_after=int(get("INDEX_OPTIMIZE_AFTER",
                                         str(cls.index_optimize_after))),
            protect=_protection(get("PROTECT", ",".join(cls.protect))),
            twin_cosine=_off_or_float(get("TWIN_COSINE", str(cls.twin_cosine))),
            invalidation=_switch(get("INVALIDATION", "on")),
            stale_check_interval_s=float(get("STALE_CHECK_INTERVAL_S",
                                             str(cls.stale_check_interval_s))),
            confidence_thresholds=_confidence_thresholds(get("CONFIDENCE_THRESHOLDS", "")),
            block_max_chars=int(get("BLOCK_MAX_CHARS", str(cls.block_max_chars))),
            promote_after_updates=int(get("PROMOTE_AFTER_UPDATES",
                                          str(cls.promote_after_updates))),
            retention=parse_retention(get("RETENTION", "")),
            planning_repos=planning_repos(get("PLANNING_REPOS", "")),
            planning_sync_s=_off_or_float(get("PLANNING_SYNC_S", "off")),
            retention_interval_s=float(get("RETENTION_INTERVAL_S",
                                           str(cls.retention_interval_s))),
            derived_review=_derived_review(get("DERIVED_REVIEW", cls.derived_review)),
            refuse_low_value=_flag(get("REFUSE_LOW_VALUE", "true")),
            auth=_switch(get("AUTH", "on")),
            memory=MemoryFlags.from_env(env),
        )


def _confidence_thresholds(raw: str) -> dict[str, float]:
    try:
        return tier_thresholds_of(raw)
    except ValueError as exc:
        raise ValueError(f"MEMSTREAM_CONFIDENCE_THRESHOLDS: {exc}") from None


def _off_or_float(raw: str) -> float | None:
    return None if raw.strip().lower() in ("off", "none", "") else float(raw)


def _derived_review(raw: str) -> DerivedReview:
    value = raw.strip().lower()
    if value not in get_args(DerivedReview):
        raise ValueError(f"MEMSTREAM_DERIVED_REVIEW: expected draft or approved, got {raw!r}")
    return cast(DerivedReview, value)


def _protection(raw: str) -> tuple[Protection, ...]:
    names = {name.strip() for name in raw.split(",")} - {"", "none"}
    unknown = names - set(get_args(Protection))
    if unknown:
        raise ValueError(f"MEMSTREAM_PROTECT: unknown {', '.join(sorted(unknown))}; "
                         f"expected none or {', '.join(get_args(Protection))}")
    return tuple(cast(Protection, name) for name in sorted(names))


_REPO: TypeAdapter[str] = TypeAdapter(Repo)


def _planning(raw: str) -> bool:
    if raw.strip().lower() not in ("off", "beads"):
        raise ValueError(f"MEMORY_PLANNING must be off or beads, got {raw!r}")
    return raw.strip().lower() == "beads"


def planning_repos(raw: str) -> dict[str, Path]:
    """`name=/path/to/checkout,...`: each repository's name (a run's `repo`) and the checkout
    whose .beads/issues.jsonl holds its planning."""
    repos: dict[str, Path] = {}
    for entry in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, path = entry.partition("=")
        try:
            if not sep or not path.strip():
                raise ValueError("no path")
            repos[_REPO.validate_python(name.strip())] = Path(path.strip())
        except ValueError:
            raise ValueError(f"MEMSTREAM_PLANNING_REPOS: {entry!r} is not name=path, the "
                             "name a repo's as runs give it") from None
    return repos


def _switch(raw: str) -> bool:
    """Off for off, false, no, 0 (and nothing else)."""
    return raw.strip().lower() not in ("off", "false", "no", "0")


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def local_kafka_address(env: Mapping[str, str]) -> str | None:
    """The address the local broker (infra/kafka/broker.sh) wrote for its clients, if any:
    under KAFKA_DATA_DIR, as for the script, else var/kafka."""
    data_dir = Path(env.get("KAFKA_DATA_DIR") or "var/kafka")
    address_file = (data_dir if data_dir.is_absolute() else REPO_ROOT / data_dir) / "bootstrap"
    try:
        return address_file.read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def _local_pg_dsn() -> str:
    from stores.postgres.local_server import local_dsn

    return local_dsn()
