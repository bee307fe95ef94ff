"""LangGraph's long-term memory interface (`langgraph.store.base.BaseStore`) backed by
memstream (docs/agents.md#langgraph-a-store-backed-by-memstream).

A store is one memstream namespace, reached through the SDK (`MemoryClient` for `batch`,
`AsyncMemoryClient` for `abatch`) with the caller's key: nothing here touches Kafka or a
store. A LangGraph item, (namespace tuple, key) -> a JSON object, is one memstream memory:

- its record id is derived from the item's identity: the memory is written with the event
  id `lgs_<digest of memstream namespace, namespace tuple, key>`, and memstream names a
  memory by its namespace and the event that wrote it (client/memstream_client/ids.py), so a get
  is one read by id, answered from Postgres as soon as the put was decided;
- its text is a line that names it (read by search and by people), then the item as one
  line of JSON (`{"namespace": [...], "key": ..., "value": {...}}`), which a read parses
  back: the value a put stored is the value a get answers;
- it is a draft (`review_state` `draft`): memstream protects approved memories (an update of
  one waits for a reviewer, MEMSTREAM_PROTECT), and a store must apply a put at once. A
  draft is live, found when asked for by review state (as this store asks), left out of
  other callers' default recall until a reviewer approves it; once approved, a put on it
  raises `MemstreamStoreError` (its update would wait for review), a get still reads it;
- its `repo` is the item's own (`langgraph:<digest>`): memstream's write-time rules (twins,
  facts that go stale) and consolidation never cross a repo, so no other item's put can fold
  into it, invalidate it or be merged with it, however alike their values read;
- its tags are `langgraph` and one per namespace prefix (`lg:<digest>`), by which a search
  with a query is narrowed to the prefix; its title and `source_ref` say the path.

A put of a new key writes the memory; of a live key, updates it (a new version, the
version read as `expected_version`); of a deleted key, restores its last version and updates
that, so a key keeps one record, and its history, for ever. A delete (a put of None)
deprecates it: a get answers None after. Every write waits for the worker's decision (`wait_s`,
the SDK's 5 s); one that is not applied as asked (pending, refused, dead-lettered, proposed
for review) raises `MemstreamStoreError`, which says what became of it. A put reads its record
back: memory keeps no secret, and a value the worker stored redacted raises too.

Reads: a search without a query, and `list_namespaces`, read the store's items from
Postgres (the record listing, then the records by id, 100 a call): every item put and not
deleted, at once. A search with a query ranks them by memstream's hybrid search
(`GET /v1/search`, `min_score` 0, the prefix's tag, the 100 best): an item the index does not
hold yet (a moment after its put) or not among those 100 follows the ranked ones, its score
None, as InMemoryStore serves the items it has no vectors for. A filter is applied here, to
the values, with InMemoryStore's operators (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`, and
nested objects and lists compared whole).

What it does not do (docs/agents.md): TTL (`supports_ttl` False: a put with a `ttl` raises
LangGraph's NotImplementedError), `index` (memstream embeds every memory's text whole: the
argument is accepted and ignored), values that are not JSON objects of at most `MAX_TEXT`
characters as written here (ValueError before anything is sent).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memstream_client.answers.recall import SearchHit
from memstream_client.answers.records import RecordLineage, RecordList, RecordView, StoredRecord
from memstream_client.answers.writes import WriteOutcome
from memstream_client.events import MemoryType, ReviewState
from memstream_client.ids import memory_record_id
from memstream_client.sdk import AsyncMemoryClient, MemoryClient, NotFound
from memstream_client.sdk.outcomes import said
from memstream_client.sdk.routes import DEFAULT_WAIT_S

# Every item's tag, and the prefix of the tags of its namespace's prefixes.
STORE_TAG = "langgraph"
PREFIX_TAG = "lg:"
# A memory holds at most 20 tags: `langgraph` and the first 19 prefixes of its namespace (a
# deeper prefix's search is narrowed by its 19th and filtered here).
MAX_PREFIX_TAGS = 19
# A memory's text, title and source_ref at most (docs/events.md, `memory.write`).
MAX_TEXT = 8000
MAX_TITLE = 200
MAX_SOURCE_REF = 1000
# Every title starts so: the listing's records that are not items are not read.
TITLE_START = "LangGraph "
# The review states an item may be in and be live: written a draft, approved by a reviewer.
LIVE_STATES: tuple[ReviewState, ...] = ("draft", "approved")
# A page of the record listing, and a read of records by id, at most.
LIST_PAGE = 200
READ_MANY = 100
# The hits a search with a query ranks, at most (`GET /v1/search`'s limit).
RANKED = 100
DELETE_REASON = "deleted through the LangGraph store"


class MemstreamStoreError(RuntimeError):
    """A put or delete that memstream did not apply as asked: `outcome` says what became of
    it (pending: not decided within the wait; refused; dead-lettered; proposed for review)."""

    def __init__(self, message: str, outcome: WriteOutcome | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome


# The mapping, none of it I/O.

def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def event_id_of(memstream_namespace: str, namespace: tuple[str, ...], key: str) -> str:
    """The event id of the write that makes an item's memory: the same item, the same id."""
    return f"lgs_{_digest(memstream_namespace, *namespace, '', key)}"


def record_id_of(memstream_namespace: str, namespace: tuple[str, ...], key: str) -> str:
    """The record that holds an item: named by the event that writes it, as the worker names
    every memory it stores."""
    return memory_record_id(memstream_namespace,
                            event_id_of(memstream_namespace, namespace, key))


def repo_of(namespace: tuple[str, ...], key: str) -> str:
    """The item's own repo, which no write-time rule or merge crosses."""
    return f"langgraph:{_digest(*namespace, '', key)}"


def prefix_tag(prefix: tuple[str, ...]) -> str:
    """The tag a search of `prefix` is narrowed by (the store's tag for the empty prefix)."""
    if not prefix:
        return STORE_TAG
    return PREFIX_TAG + _digest(*prefix[:MAX_PREFIX_TAGS])


def tags_of(namespace: tuple[str, ...]) -> list[str]:
    return [STORE_TAG] + [prefix_tag(namespace[:depth])
                          for depth in range(1, min(len(namespace), MAX_PREFIX_TAGS) + 1)]


def path_of(namespace: tuple[str, ...], key: str) -> str:
    """The item's path, for people (a title, a source_ref, an error): on one line, without
    what no stored field but prose may hold (U+0000, a lone surrogate)."""
    path = "/".join((*namespace, key))
    return "".join(" " if char < " " else char for char in path
                   if not "\ud800" <= char <= "\udfff")


def title_of(namespace: tuple[str, ...], key: str) -> str:
    return f"{TITLE_START}{path_of(namespace, key)}"[:MAX_TITLE]


def source_ref_of(namespace: tuple[str, ...], key: str) -> str:
    return f"langgraph:{path_of(namespace, key)}"[:MAX_SOURCE_REF]


def text_of(namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> str:
    """The memory's text: a line naming the item, then the item as one line of JSON (a
    string's newlines escaped). Raises ValueError for a value JSON cannot hold, or a text
    longer than a memory may be."""
    if not isinstance(value, Mapping):
        raise ValueError(f"a LangGraph item's value is a JSON object, not {type(value).__name__}")
    item = {"namespace": list(namespace), "key": key, "value": dict(value)}
    try:
        line = json.dumps(item, ensure_ascii=False, allow_nan=False)
        line.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate, which no stored text may hold: escaped, as JSON can.
        line = json.dumps(item, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the value of {path_of(namespace, key)!r} is not JSON: {exc}") from exc
    text = f"LangGraph store item {path_of(namespace, key)}:\n{line}"
    if len(text) > MAX_TEXT:
        raise ValueError(f"the value of {path_of(namespace, key)!r} takes {len(text)} "
                         f"characters as a memory's text, more than the {MAX_TEXT} one holds")
    return text


@dataclass(frozen=True)
class Parsed:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]


def parsed(text: str) -> Parsed | None:
    """The item a memory's text holds; None for a text this store did not write."""
    _, _, line = text.partition("\n")
    try:
        item = json.loads(line)
    except ValueError:
        return None
    if not (isinstance(item, dict) and isinstance(item.get("namespace"), list)
            and isinstance(item.get("key"), str) and isinstance(item.get("value"), dict)):
        return None
    return Parsed(tuple(str(label) for label in item["namespace"]), item["key"], item["value"])


def matches(value: Any, condition: Any) -> bool:
    """Whether a value meets a filter's condition, as InMemoryStore judges it: an object of
    operators (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`), a nested object (each of its
    fields), a list (the same length, item by item), else equality."""
    if isinstance(condition, dict):
        if any(name.startswith("$") for name in condition):
            return all(_operator(value, name, operand) for name, operand in condition.items())
        if not isinstance(value, dict):
            return False
        return all(matches(value.get(name), inner) for name, inner in condition.items())
    if isinstance(condition, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(condition)
                and all(matches(got, wanted) for got, wanted in zip(value, condition,
                                                                     strict=True)))
    return bool(value == condition)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    match operator:
        case "$eq":
            return bool(value == operand)
        case "$ne":
            return bool(value != operand)
        case "$gt":
            return float(value) > float(operand)
        case "$gte":
            return float(value) >= float(operand)
        case "$lt":
            return float(value) < float(operand)
        case "$lte":
            return float(value) <= float(operand)
    raise ValueError(f"Unsupported operator: {operator}")


def filtered(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    return not conditions or all(matches(value.get(name), condition)
                                 for name, condition in conditions.items())


def _meets(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path, strict=False) if condition.match_type == "prefix" else \
        zip(reversed(namespace), reversed(path), strict=False)
    return all(wanted in ("*", got) for got, wanted in pairs)


def namespaces_listed(namespaces: Iterable[tuple[str, ...]],
                      op: ListNamespacesOp) -> list[tuple[str, ...]]:
    """The answer of `list_namespaces` among the namespaces that hold items: those that meet
    every condition (a prefix, a suffix, `*` any label), cut to `max_depth` labels, sorted,
    `offset` then `limit`."""
    kept = {namespace for namespace in namespaces
            if all(_meets(condition, namespace) for condition in op.match_conditions or ())}
    if op.max_depth is not None:
        kept = {namespace[:op.max_depth] for namespace in kept}
    return sorted(kept)[op.offset:op.offset + op.limit]


@dataclass(frozen=True)
class Stored:
    """An item as memstream holds it, with its record."""

    item: Item
    record_id: str


def item_of(record: RecordView, updated_at: datetime) -> Item | None:
    """The item a live record holds; None for a record that is no item of this store."""
    if STORE_TAG not in record.tags or record.review_state not in LIVE_STATES:
        return None
    held = parsed(record.text)
    if held is None:
        return None
    return Item(value=held.value, key=held.key, namespace=held.namespace,
                created_at=record.created_at, updated_at=updated_at)


def in_order(items: Sequence[Stored]) -> list[Stored]:
    """Items in the order they were first put, namespace by namespace (a namespace where its
    first item was), as InMemoryStore lists them."""
    first: dict[tuple[str, ...], datetime] = {}
    for stored in items:
        seen = first.get(stored.item.namespace)
        if seen is None or stored.item.created_at < seen:
            first[stored.item.namespace] = stored.item.created_at
    return sorted(items, key=lambda stored: (first[stored.item.namespace],
                                             stored.item.namespace, stored.item.created_at,
                                             stored.record_id))


def search_answer(op: SearchOp, items: Sequence[Stored],
                  scores: Mapping[str, float] | None) -> list[SearchItem]:
    """A search's items among the store's (in order): those under the prefix that meet the
    filter; with a query (`scores` by record id), those ranked first, best first, then the
    others in order, scored None; then `offset` and `limit`."""
    prefix = tuple(op.namespace_prefix)
    kept = [stored for stored in items if stored.item.namespace[:len(prefix)] == prefix
            and filtered(stored.item.value, op.filter)]
    if scores is not None:
        ranked = sorted((stored for stored in kept if stored.record_id in scores),
                        key=lambda stored: -scores[stored.record_id])
        kept = ranked + [stored for stored in kept if stored.record_id not in scores]
    return [SearchItem(namespace=stored.item.namespace, key=stored.item.key,
                       value=stored.item.value, created_at=stored.item.created_at,
                       updated_at=stored.item.updated_at,
                       score=None if scores is None else scores.get(stored.record_id))
            for stored in kept[op.offset:op.offset + op.limit]]


def scores_of(hits: Iterable[SearchHit]) -> dict[str, float]:
    return {hit.record_id: hit.score for hit in hits if STORE_TAG in hit.tags}


def read_ops(ops: Iterable[Op]) -> tuple[list[Op], dict[tuple[tuple[str, ...], str], PutOp]]:
    """A batch's ops, and its puts: the last of each item's, applied after every read of the
    batch, as InMemoryStore applies them."""
    listed = list(ops)
    puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
    for op in listed:
        if isinstance(op, PutOp):
            puts[(tuple(op.namespace), op.key)] = op
        elif not isinstance(op, GetOp | SearchOp | ListNamespacesOp):
            raise ValueError(f"Unknown operation type: {type(op)}")
    return listed, puts


def checked(outcome: WriteOutcome, wanted: frozenset[str], what: str) -> WriteOutcome:
    if outcome.outcome not in wanted:
        raise MemstreamStoreError(f"{what}: {said(outcome)}", outcome)
    return outcome


def updated_at_of(lineage: RecordLineage) -> datetime:
    return max((version.changed_at for version in lineage.versions),
               default=lineage.record.created_at)


def live(lineage: RecordLineage) -> bool:
    return lineage.standing.in_force and lineage.record.review_state in LIVE_STATES


class MemstreamStore(BaseStore):
    """A LangGraph store over one memstream namespace (module docstring):

        store = MemstreamStore(namespace="team-a")  # the key: MEMSTREAM_API_KEY, as the SDK
        graph = builder.compile(store=store)

    `client` and `async_client` are the SDK clients it calls (`batch` the first, `abatch` the
    second); without them it makes its own from `url`, `key`, `namespace` and `env`, as the
    SDK finds its settings, and closes them with `close()`. `memory_type` is its memories'
    type; `wait_s` how long a write waits for the worker's decision."""

    supports_ttl = False

    def __init__(self, url: str | None = None, *, key: str | None = None,
                 namespace: str | None = None, env: Mapping[str, str] | None = None,
                 client: MemoryClient | None = None,
                 async_client: AsyncMemoryClient | None = None,
                 memory_type: MemoryType = "fact", wait_s: float = DEFAULT_WAIT_S) -> None:
        self._owned = client is None, async_client is None
        self.client = client or MemoryClient(url, key=key, namespace=namespace, env=env)
        self.async_client = async_client or AsyncMemoryClient(url, key=key,
                                                              namespace=namespace, env=env)
        found = self.client.config.namespace
        if not found or found != self.async_client.config.namespace:
            raise ValueError("a MemstreamStore is one memstream namespace: give namespace=… "
                             "(or set MEMSTREAM_NAMESPACE), the same for both clients")
        self.namespace: str = found
        self.memory_type: MemoryType = memory_type
        self.wait_s = wait_s

    def record_id(self, namespace: tuple[str, ...], key: str) -> str:
        """The memstream record that holds the item, put or not."""
        return record_id_of(self.namespace, tuple(namespace), key)

    def close(self) -> None:
        if self._owned[0]:
            self.client.close()

    async def aclose(self) -> None:
        if self._owned[1]:
            await self.async_client.aclose()

    def __enter__(self) -> MemstreamStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # batch: MemoryClient.

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        listed, puts = read_ops(ops)
        items: list[Stored] | None = None
        results: list[Result] = []
        for op in listed:
            if isinstance(op, GetOp):
                results.append(self._get(tuple(op.namespace), op.key))
            elif isinstance(op, SearchOp | ListNamespacesOp):
                if items is None:
                    items = self._items()
                results.append(self._search(op, items) if isinstance(op, SearchOp)
                               else namespaces_listed((s.item.namespace for s in items), op))
            else:
                results.append(None)
        for put in puts.values():
            self._put(put)
        return results

    def _lineage(self, record_id: str) -> RecordLineage | None:
        try:
            return self.client.record(record_id)
        except NotFound:
            return None

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        lineage = self._lineage(self.record_id(namespace, key))
        if lineage is None or not live(lineage):
            return None
        return item_of(lineage.record, updated_at_of(lineage))

    def _items(self) -> list[Stored]:
        summaries = list(_summaries(self._pages()))
        records: list[StoredRecord] = []
        for chunk in _chunks([summary.record_id for summary in summaries], READ_MANY):
            records.extend(self.client.records(chunk).records)
        return _stored(records, summaries)

    def _pages(self) -> Iterator[RecordList]:
        cursor = None
        while True:
            page = self.client.list_records(kind="memory", memory_type=self.memory_type,
                                            review_state=list(LIVE_STATES), cursor=cursor,
                                            limit=LIST_PAGE)
            yield page
            if page.next is None:
                return
            cursor = page.next

    def _search(self, op: SearchOp, items: Sequence[Stored]) -> list[SearchItem]:
        scores = None
        if op.query:
            scores = scores_of(self.client.search(
                op.query, **_narrowed(op.namespace_prefix, self.memory_type)).hits)
        return search_answer(op, items, scores)

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        record_id = self.record_id(namespace, op.key)
        lineage = self._lineage(record_id)
        if op.value is None:
            if lineage is not None and lineage.record.review_state != "deprecated":
                checked(self.client.deprecate_memory(record_id, reason=DELETE_REASON,
                                                     wait_s=self.wait_s),
                        DEPRECATED, f"delete {path_of(namespace, op.key)}")
            return
        text = text_of(namespace, op.key, op.value)
        what = f"put {path_of(namespace, op.key)}"
        if lineage is None:
            written = self.client.write_memory(
                text, event_id=event_id_of(self.namespace, namespace, op.key),
                wait_s=self.wait_s, **_written(namespace, op.key, self.memory_type))
            _made(checked(written, STORED, what), record_id, what)
        else:
            version = lineage.version
            if lineage.record.review_state == "deprecated":
                restored = checked(self.client.restore_memory(
                    record_id, version=_before_deletion(lineage), expected_version=version,
                    wait_s=self.wait_s), RESTORED, what)
                version = restored.version or version + 1
            checked(self.client.update_memory(record_id, expected_version=version, text=text,
                                              wait_s=self.wait_s), UPDATED, what)
        _kept(self.client.record(record_id), text, what)

    # abatch: AsyncMemoryClient, the same steps.

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        listed, puts = read_ops(ops)
        items: list[Stored] | None = None
        results: list[Result] = []
        for op in listed:
            if isinstance(op, GetOp):
                results.append(await self._aget(tuple(op.namespace), op.key))
            elif isinstance(op, SearchOp | ListNamespacesOp):
                if items is None:
                    items = await self._aitems()
                results.append(await self._asearch(op, items) if isinstance(op, SearchOp)
                               else namespaces_listed((s.item.namespace for s in items), op))
            else:
                results.append(None)
        for put in puts.values():
            await self._aput(put)
        return results

    async def _alineage(self, record_id: str) -> RecordLineage | None:
        try:
            return await self.async_client.record(record_id)
        except NotFound:
            return None

    async def _aget(self, namespace: tuple[str, ...], key: str) -> Item | None:
        lineage = await self._alineage(self.record_id(namespace, key))
        if lineage is None or not live(lineage):
            return None
        return item_of(lineage.record, updated_at_of(lineage))

    async def _aitems(self) -> list[Stored]:
        pages = []
        cursor = None
        while True:
            page = await self.async_client.list_records(
                kind="memory", memory_type=self.memory_type, review_state=list(LIVE_STATES),
                cursor=cursor, limit=LIST_PAGE)
            pages.append(page)
            if page.next is None:
                break
            cursor = page.next
        summaries = list(_summaries(pages))
        read = await asyncio.gather(*(
            self.async_client.records(chunk)
            for chunk in _chunks([summary.record_id for summary in summaries], READ_MANY)))
        return _stored([record for batch in read for record in batch.records], summaries)

    async def _asearch(self, op: SearchOp, items: Sequence[Stored]) -> list[SearchItem]:
        scores = None
        if op.query:
            scores = scores_of((await self.async_client.search(
                op.query, **_narrowed(op.namespace_prefix, self.memory_type))).hits)
        return search_answer(op, items, scores)

    async def _aput(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        record_id = self.record_id(namespace, op.key)
        lineage = await self._alineage(record_id)
        if op.value is None:
            if lineage is not None and lineage.record.review_state != "deprecated":
                checked(await self.async_client.deprecate_memory(
                    record_id, reason=DELETE_REASON, wait_s=self.wait_s),
                    DEPRECATED, f"delete {path_of(namespace, op.key)}")
            return
        text = text_of(namespace, op.key, op.value)
        what = f"put {path_of(namespace, op.key)}"
        if lineage is None:
            written = await self.async_client.write_memory(
                text, event_id=event_id_of(self.namespace, namespace, op.key),
                wait_s=self.wait_s, **_written(namespace, op.key, self.memory_type))
            _made(checked(written, STORED, what), record_id, what)
        else:
            version = lineage.version
            if lineage.record.review_state == "deprecated":
                restored = checked(await self.async_client.restore_memory(
                    record_id, version=_before_deletion(lineage), expected_version=version,
                    wait_s=self.wait_s), RESTORED, what)
                version = restored.version or version + 1
            checked(await self.async_client.update_memory(
                record_id, expected_version=version, text=text, wait_s=self.wait_s),
                UPDATED, what)
        _kept(await self.async_client.record(record_id), text, what)


STORED = frozenset({"stored"})
UPDATED = frozenset({"updated", "unchanged"})
RESTORED = frozenset({"restored"})
DEPRECATED = frozenset({"deprecated", "unchanged"})


def _written(namespace: tuple[str, ...], key: str, memory_type: MemoryType) -> dict[str, Any]:
    """A new item's memory beside its text."""
    return {"title": title_of(namespace, key), "memory_type": memory_type,
            "tags": tags_of(namespace), "scope": "shared", "review_state": "draft",
            "source_ref": source_ref_of(namespace, key), "repo": repo_of(namespace, key)}


def _narrowed(prefix: tuple[str, ...], memory_type: MemoryType) -> dict[str, Any]:
    """A search with a query, narrowed to the prefix's items, every one ranked (min_score
    0), the best `RANKED`."""
    return {"tag": prefix_tag(tuple(prefix)), "memory_type": memory_type,
            "review_state": list(LIVE_STATES), "min_score": 0.0, "limit": RANKED}


def _made(outcome: WriteOutcome, record_id: str, what: str) -> None:
    if outcome.record_id != record_id:
        raise MemstreamStoreError(f"{what}: stored as {outcome.record_id}, not as the item's "
                                  f"record {record_id}", outcome)


def _kept(lineage: RecordLineage, text: str, what: str) -> None:
    """A put is kept as it was sent, or raises: memstream keeps no secret, and stores the
    text of a write redacted (docs/lifecycle.md#refusing-low-value-writes); and a new item's
    write is named by the item, so of two writes of it the first decided is the one kept (a
    put sent while an earlier one was still pending)."""
    if lineage.record.text != text:
        held = parsed(lineage.record.text)
        raise MemstreamStoreError(
            f"{what}: memstream holds another value than the one put (a secret in it "
            f"redacted, since memory keeps none; or an earlier put of this new item, pending "
            f"when this one was sent, kept instead): the item now holds "
            f"{held.value if held else None!r}")


def _before_deletion(lineage: RecordLineage) -> int:
    """The last version of a deprecated item that was not its deletion."""
    return max(version.version for version in lineage.versions
               if version.version < lineage.version)


def _summaries(pages: Iterable[RecordList]) -> Iterator[Any]:
    for page in pages:
        for summary in page.records:
            if (summary.title or "").startswith(TITLE_START):
                yield summary


def _chunks(values: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(values), size):
        yield list(values[start:start + size])


def _stored(records: Iterable[StoredRecord], summaries: Iterable[Any]) -> list[Stored]:
    updated = {summary.record_id: summary.updated_at for summary in summaries}
    found = []
    for record in records:
        if record.superseded_by is not None or record.invalidated_by is not None:
            continue
        item = item_of(record, updated.get(record.record_id, record.created_at))
        if item is not None:
            found.append(Stored(item, record.record_id))
    return in_order(found)
