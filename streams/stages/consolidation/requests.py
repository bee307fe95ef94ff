"""After a batch of memories is stored: ask for the consolidation of each namespace that the
trigger rules say is due, once per basis (processors/consolidation/trigger.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import partial

from memstream_client.events import ConsolidatePayload, ConsolidateRequest
from memstream_client.ids import consolidate_request_id
from processors.consolidation.trigger import request_basis, skip_reason
from processors.events.errors import MemstreamError
from schemas.topics import MEMORY_CONSOLIDATE
from streams.plumbing.failures import Attempts
from streams.plumbing.messages import Outbound
from streams.plumbing.runtime import Runtime

log = logging.getLogger(__name__)

PRODUCER = "memstream.consolidation-trigger"


class ConsolidationTrigger:
    """Asks for the consolidation of the namespaces a batch stored memories in."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        # The basis of each namespace's latest request this process saw sent (one entry per
        # namespace, not per day). With one request a day the basis is known without
        # Postgres, so a namespace already asked today costs no query on the batch path,
        # which decides the write->searchable latency.
        self._sent: dict[str, str] = {}

    async def request_due(self, namespaces: Iterable[str], attempts: Attempts) -> None:
        """Claim and send the request of each due namespace; a claimed request the broker
        never acknowledged is sent again (same id: the consolidator runs it once). A request
        that cannot be made is logged and asked again by the namespace's next batch: the
        writes themselves are done."""
        now = datetime.now(UTC)
        for namespace in sorted(set(namespaces)):
            try:
                await attempts.until_done(partial(self._request, namespace, now),
                                          what="requesting consolidation")
            except MemstreamError as error:
                log.error("could not request the consolidation of %s: %s", namespace,
                          error.detail)

    async def _request(self, namespace: str, now: datetime) -> None:
        runtime = self._runtime
        consolidations = runtime.stores.consolidations
        rules = runtime.trigger_rules
        if rules.once_per_day and \
                self._sent.get(namespace) == request_basis(now.date(), None, rules):
            return
        facts = await consolidations.facts(namespace)
        if skip_reason(reports_today=facts.reports_today,
                       new_since_report=facts.new_since_report, rules=rules) is not None:
            return
        basis = request_basis(now.date(), facts.last_report_id, rules)
        request_id = consolidate_request_id(namespace, basis)
        if await consolidations.claim_request(namespace, basis, request_id,
                                              facts.new_since_report):
            await runtime.producer.produce(
                [consolidate_request(namespace, request_id, facts.new_since_report, now)])
            await consolidations.mark_request_sent(namespace, basis)
            runtime.metrics.consolidation_requests.labels("new_memories").inc()
            runtime.metrics.produced.labels(MEMORY_CONSOLIDATE).inc()
        self._sent[namespace] = basis


def consolidate_request(namespace: str, request_id: str, new_memories: int,
                        now: datetime) -> Outbound:
    request = ConsolidateRequest(
        event_id=request_id,
        type="memory.consolidate",
        namespace=namespace,
        occurred_at=now,
        producer=PRODUCER,
        payload=ConsolidatePayload(reason="new_memories", new_memories=new_memories),
    )
    return Outbound(topic=MEMORY_CONSOLIDATE, key=namespace.encode(),
                    value=request.model_dump_json().encode())
