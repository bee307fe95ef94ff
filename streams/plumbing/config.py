"""Worker settings, read once from the environment (prefix MEMSTREAM_) by the entry point.

Defaults are the embedded set-up of `make run`: the local broker's address file, the local
Postgres, the embedded Qdrant engine under `var/`, the model under `.cache/`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast, get_args

from pydantic import TypeAdapter

from embedder.models import DEFAULT_MODEL, ModelSpec, model_dir, spec
from memstream_client.events import Repo
from processors.consolidation.plan import DerivedReview
from processors.memory.lifecycle import Protection
from processors.memory.retention import RetentionRules, parse_retention
from processors.recall.confidence import DEFAULT_TIER_THRESHOLDS, tier_thresholds_of
from processors.recall.context_pack import DEFAULT_SHARES, shares_of
from processors.runs.learnings import DEFAULT_LESSON_MIN_FIXES, DEFAULT_PATTERN_MIN_RUNS
from processors.text.calibration import SIMILARITY
from publisher.kafka_security import KafkaSecurity
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
        read = Environment(env, prefix="MEMORY_")
        return cls(
            enabled=read.flag("ENABLED", True),
            # The seed's values name what is on (MEMORY_HISTORY=off|digest,
            # MEMORY_LONG_TERM=off|mem0); on and off are taken too.
            history=read.switch("HISTORY", True, also_on=("digest",)),
            long_term=read.switch("LONG_TERM", True, also_on=("mem0",)),
            documents=read.switch("DOCUMENTS", True),
            fail_open=read.flag("FAIL_OPEN", True),
            context_budget_tokens=read.integer("CONTEXT_BUDGET_TOKENS",
                                               cls.context_budget_tokens),
            planning=read.choice("PLANNING", "off", ("off", "beads")) == "beads",
            context_shares=read.parsed("CONTEXT_SHARES", "", shares_of),
        )


@dataclass(frozen=True)
class Settings:
    kafka_bootstrap: str
    pg_dsn: str
    index_url: str
    # The embedding model (MEMSTREAM_MODEL, embedder/models.py), built into .cache/models/.
    model: ModelSpec
    # A new memory at least this close to a live one of its namespace that restates it (the
    # consolidation guard agrees) updates that one instead (processors/memory/twins.py), as
    # the similarity model's cosine; its measured threshold (processors/text/calibration.py)
    # unless
    # MEMSTREAM_TWIN_COSINE names one; `off` (None) adds every write as a new memory. What it
    # costs the pipeline: docs/performance.md.
    twin_cosine: float | None
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

    @property
    def model_dir(self) -> Path:
        return model_dir(self.model.name)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings of the environment; a value a setting does not take is refused
        (`SettingError`, naming the variable and what it takes)."""
        env = os.environ if env is None else env
        read = Environment(env, prefix="MEMSTREAM_")
        model = read.parsed("MODEL", DEFAULT_MODEL, spec)
        return cls(
            kafka_bootstrap=(read.text("KAFKA_BOOTSTRAP", "") or local_kafka_address(env)
                             or "127.0.0.1:19092"),
            kafka_security=read.parsed_env(KafkaSecurity.from_env),
            pg_dsn=read.text("PG_DSN", "") or _local_pg_dsn(),
            index_url=read.text("INDEX_URL", DEFAULT_INDEX_URL),
            model=model,
            twin_cosine=read.number_or_off("TWIN_COSINE", SIMILARITY.twin,
                                           maximum=1.0),
            data_dir=Path(read.text("DATA_DIR", str(cls.data_dir))),
            app_id=read.text("APP_ID", cls.app_id),
            web_host=read.text("WEB_HOST", cls.web_host),
            web_port=read.integer("WEB_PORT", cls.web_port, minimum=1, maximum=65535),
            batch_max=read.integer("BATCH_MAX", cls.batch_max, minimum=1),
            batch_within_s=read.number("BATCH_WITHIN_S", cls.batch_within_s),
            embed_threads=read.integer("EMBED_THREADS", cls.embed_threads, minimum=1),
            max_event_bytes=read.integer("MAX_EVENT_BYTES", cls.max_event_bytes, minimum=1),
            commit_interval_s=read.number("COMMIT_INTERVAL_S", cls.commit_interval_s),
            session_timeout_s=read.number("SESSION_TIMEOUT_S", cls.session_timeout_s),
            fix_window_h=read.number("FIX_WINDOW_H", cls.fix_window_h),
            lesson_min_fixes=read.integer("LESSON_MIN_FIXES", cls.lesson_min_fixes, minimum=1),
            pattern_min_runs=read.integer("PATTERN_MIN_RUNS", cls.pattern_min_runs, minimum=1),
            llm_url=read.text("LLM_URL", cls.llm_url),
            llm_model=read.text("LLM_MODEL", cls.llm_model),
            llm_api_key=read.text("LLM_API_KEY", cls.llm_api_key),
            llm_timeout_s=read.number("LLM_TIMEOUT_S", cls.llm_timeout_s),
            count_window_s=read.number("COUNT_WINDOW_S", cls.count_window_s),
            count_keep_s=read.number("COUNT_KEEP_S", cls.count_keep_s),
            consolidate_min_new=read.integer("CONSOLIDATE_MIN_NEW", cls.consolidate_min_new),
            consolidate_once_per_day=read.flag("CONSOLIDATE_ONCE_PER_DAY", True),
            lag_interval_s=read.number("LAG_INTERVAL_S", cls.lag_interval_s),
            stall_after_s=read.number("STALL_AFTER_S", cls.stall_after_s),
            unexpected_attempts=read.integer("UNEXPECTED_ATTEMPTS", cls.unexpected_attempts,
                                             minimum=1),
            relay_interval_s=read.number("RELAY_INTERVAL_S", cls.relay_interval_s),
            consolidator_nice=read.integer("CONSOLIDATOR_NICE", cls.consolidator_nice,
                                           minimum=-20, maximum=19),
            max_searches_per_run=read.integer("MAX_SEARCHES_PER_RUN",
                                              cls.max_searches_per_run),
            retrieval_log_interval_s=read.number("RETRIEVAL_LOG_INTERVAL_S",
                                                 cls.retrieval_log_interval_s),
            gap_interval_s=read.number("GAP_INTERVAL_S", cls.gap_interval_s),
            entity_index_interval_s=read.number("ENTITY_INDEX_INTERVAL_S",
                                                cls.entity_index_interval_s),
            entity_llm_interval_s=read.number("ENTITY_LLM_INTERVAL_S",
                                              cls.entity_llm_interval_s),
            index_optimize_after=read.integer("INDEX_OPTIMIZE_AFTER",
                                              cls.index_optimize_after),
            protect=read.parsed("PROTECT", ",".join(cls.protect), _protection),
            invalidation=read.switch("INVALIDATION", True),
            stale_check_interval_s=read.number("STALE_CHECK_INTERVAL_S",
                                               cls.stale_check_interval_s),
            confidence_thresholds=read.parsed("CONFIDENCE_THRESHOLDS", "", tier_thresholds_of),
            block_max_chars=read.integer("BLOCK_MAX_CHARS", cls.block_max_chars, minimum=1),
            promote_after_updates=read.integer("PROMOTE_AFTER_UPDATES",
                                               cls.promote_after_updates, minimum=1),
            retention=read.parsed("RETENTION", "", parse_retention),
            planning_repos=read.parsed("PLANNING_REPOS", "", planning_repos),
            planning_sync_s=read.number_or_off("PLANNING_SYNC_S", None),
            retention_interval_s=read.number("RETENTION_INTERVAL_S", cls.retention_interval_s),
            derived_review=cast(DerivedReview, read.choice(
                "DERIVED_REVIEW", cls.derived_review, get_args(DerivedReview))),
            refuse_low_value=read.flag("REFUSE_LOW_VALUE", True),
            auth=read.switch("AUTH", True),
            memory=MemoryFlags.from_env(env),
        )


class SettingError(ValueError):
    """A variable of the environment holds a value its setting does not take."""


T = TypeVar("T")
_ON = ("on", "true", "yes", "1")
_OFF = ("off", "false", "no", "0")


class Environment:
    """Settings read from the environment, each by its rule, refused with the variable's
    name and what it takes: a typo in a switch is no silent "on"."""

    def __init__(self, env: Mapping[str, str], prefix: str) -> None:
        self._env = env
        self._prefix = prefix

    def _raw(self, name: str) -> str | None:
        raw = self._env.get(self._prefix + name)
        return None if raw is None or not raw.strip() else raw.strip()

    def _refuse(self, name: str, takes: str, raw: str) -> SettingError:
        return SettingError(f"{self._prefix}{name}: takes {takes}, got {raw!r}")

    def text(self, name: str, default: str) -> str:
        return self._raw(name) or default

    def flag(self, name: str, default: bool) -> bool:
        raw = self._raw(name)
        if raw is None:
            return default
        if raw.lower() not in (*_ON, *_OFF):
            raise self._refuse(name, "true or false (on/off, yes/no, 1/0)", raw)
        return raw.lower() in _ON

    def switch(self, name: str, default: bool, also_on: tuple[str, ...] = ()) -> bool:
        """On or off; `also_on` the values that name what is on (the seed's)."""
        raw = self._raw(name)
        if raw is None:
            return default
        if raw.lower() not in (*_ON, *_OFF, *also_on):
            raise self._refuse(name, " or ".join(("off", *also_on)) + " (or on/off, true/false)",
                               raw)
        return raw.lower() not in _OFF

    def choice(self, name: str, default: str, values: tuple[str, ...]) -> str:
        raw = self._raw(name)
        if raw is None:
            return default
        if raw.lower() not in values:
            raise self._refuse(name, " or ".join(values), raw)
        return raw.lower()

    def integer(self, name: str, default: int, minimum: int = 0,
                maximum: int | None = None) -> int:
        raw = self._raw(name)
        if raw is None:
            return default
        takes = f"an integer from {minimum}" + ("" if maximum is None else f" to {maximum}")
        try:
            value = int(raw)
        except ValueError:
            raise self._refuse(name, takes, raw) from None
        if value < minimum or (maximum is not None and value > maximum):
            raise self._refuse(name, takes, raw)
        return value

    def number(self, name: str, default: float, maximum: float | None = None) -> float:
        """A number of at least 0 (seconds, hours, a cosine)."""
        raw = self._raw(name)
        if raw is None:
            return default
        takes = "a number of at least 0" + ("" if maximum is None else f" and at most {maximum}")
        try:
            value = float(raw)
        except ValueError:
            raise self._refuse(name, takes, raw) from None
        if not 0 <= value <= (math.inf if maximum is None else maximum):
            raise self._refuse(name, takes, raw)
        return value

    def number_or_off(self, name: str, default: float | None,
                      maximum: float | None = None) -> float | None:
        raw = self._raw(name)
        if raw is not None and raw.lower() in ("off", "none"):
            return None
        if raw is None:
            return default
        try:
            return self.number(name, 0.0, maximum)
        except SettingError:
            raise self._refuse(name, "off or a number of at least 0"
                               + ("" if maximum is None else f" and at most {maximum}"),
                               raw) from None

    def parsed(self, name: str, default: str, parse: Callable[[str], T]) -> T:
        """A value read by its own parser, whose refusal names the variable."""
        raw = self._raw(name) or default
        try:
            return parse(raw)
        except ValueError as exc:
            raise SettingError(f"{self._prefix}{name}: {exc}") from None

    def parsed_env(self, parse: Callable[[Mapping[str, str]], T]) -> T:
        """A group of variables read by their own parser, which names each refused one."""
        try:
            return parse(self._env)
        except ValueError as exc:
            raise SettingError(str(exc)) from None


def _protection(raw: str) -> tuple[Protection, ...]:
    names = {name.strip() for name in raw.split(",")} - {"", "none"}
    unknown = names - set(get_args(Protection))
    if unknown:
        raise ValueError(f"unknown {', '.join(sorted(unknown))}; "
                         f"takes none or {', '.join(get_args(Protection))}")
    return tuple(cast(Protection, name) for name in sorted(names))


_REPO: TypeAdapter[str] = TypeAdapter(Repo)


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
            raise ValueError(f"{entry!r} is not name=path, the name a repo's as runs give "
                             "it") from None
    return repos


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
