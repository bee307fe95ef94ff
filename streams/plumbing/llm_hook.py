"""The optional LLM hook: an OpenAI-compatible chat endpoint named in configuration.

Off unless MEMSTREAM_LLM_URL is set. Whatever goes wrong (refused connection, timeout, an
error status, an answer of the wrong shape) raises `LLMHookError`, and callers fall back to
their deterministic text: the hook may improve prose, never block or break the pipeline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import httpx

from processors.llm_prompts import (
    HANDOFF_TOKEN_CAP,
    MERGE_TOKEN_CAP,
    ChatMessage,
    accepted_entities,
    accepted_prose,
    digest_rewrite_request,
    entity_extraction_request,
    handoff_rewrite_request,
    merge_rewrite_request,
    summary_rewrite_request,
)
from processors.recall.summary import Summary, TokenCount, grounded_rewrite
from processors.runs.digests import RunDigest
from streams.plumbing.metrics import Metrics

log = logging.getLogger(__name__)


class LLMHookError(RuntimeError):
    """The endpoint gave no usable answer."""


class ChatEndpoint:
    def __init__(self, base_url: str, model: str, api_key: str, timeout_s: float) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._model = model
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s
        )

    async def complete(self, messages: Sequence[ChatMessage]) -> str:
        body = {"model": self._model, "messages": list(messages), "temperature": 0}
        try:
            response = await self._client.post("/chat/completions", json=body)
            response.raise_for_status()
            answer: Any = response.json()
            content = answer["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMHookError(f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(content, str):
            raise LLMHookError(f"the answer's content is {type(content).__name__}, not text")
        return content

    async def close(self) -> None:
        await self._client.aclose()


async def digest_prose(
    llm: ChatEndpoint | None, digest: RunDigest, metrics: Metrics
) -> str | None:
    """The hook's prose for a digest, or None to keep the deterministic text."""
    if llm is None:
        return None
    try:
        prose = accepted_prose(await llm.complete(digest_rewrite_request(digest)))
    except LLMHookError as exc:
        log.warning("LLM hook failed for run %s; keeping the deterministic digest: %s",
                    digest.run_id, exc)
        prose = None
    metrics.llm_hook.labels("digest", "fallback" if prose is None else "used").inc()
    return prose


async def merge_prose(
    llm: ChatEndpoint | None, texts: Sequence[str], metrics: Metrics
) -> str | None:
    """The hook's text for a merged memory (`texts`: the members', medoid first), or None to
    keep the deterministic merge."""
    if llm is None:
        return None
    return await _accepted_rewrite(llm, merge_rewrite_request(texts), MERGE_TOKEN_CAP,
                                   "merge", metrics)


async def handoff_prose(llm: ChatEndpoint | None, handoff: str, metrics: Metrics) -> str | None:
    """The hook's text for a session's handoff (`handoff`: the deterministic one), or None to
    keep the deterministic text."""
    if llm is None:
        return None
    return await _accepted_rewrite(llm, handoff_rewrite_request(handoff), HANDOFF_TOKEN_CAP,
                                   "handoff", metrics)


async def _accepted_rewrite(llm: ChatEndpoint, request: Sequence[ChatMessage], cap_tokens: int,
                            use: str, metrics: Metrics) -> str | None:
    """The hook's answer to `request` if it is acceptable prose within `cap_tokens`, else
    None (a failed call is logged); counted under `use` either way."""
    try:
        prose = accepted_prose(await llm.complete(request), cap_tokens=cap_tokens)
    except LLMHookError as exc:
        log.warning("LLM hook failed for a %s; keeping the deterministic text: %s", use, exc)
        prose = None
    metrics.llm_hook.labels(use, "fallback" if prose is None else "used").inc()
    return prose


async def summary_prose(llm: ChatEndpoint | None, query: str, summary: Summary,
                        budget_tokens: int, count_tokens: TokenCount,
                        metrics: Metrics) -> str | None:
    """The hook's rewrite of a memory summary, grounded in the same memories and within the
    same budget (processors/recall/summary.py `grounded_rewrite`), or None to keep the
    deterministic summary."""
    if llm is None:
        return None
    try:
        reply = await llm.complete(summary_rewrite_request(query, summary.text, budget_tokens))
        # Counting tokens takes the model's tokenizer: off the event loop.
        prose = await asyncio.to_thread(grounded_rewrite, reply, summary, budget_tokens,
                                        count_tokens)
        if prose is None:
            log.warning("the LLM hook's memory summary was refused (empty, over %d tokens, or "
                        "not citing exactly the memories' ids); keeping the deterministic one",
                        budget_tokens)
    except LLMHookError as exc:
        log.warning("LLM hook failed for a memory summary; keeping the deterministic one: %s",
                    exc)
        prose = None
    metrics.llm_hook.labels("summary", "fallback" if prose is None else "used").inc()
    return prose


async def entity_names(llm: ChatEndpoint, text: str,
                       metrics: Metrics) -> list[tuple[str, str]] | None:
    """The named things the hook finds in a record's text and the text writes, as (name,
    kind): none when its answer is not the JSON asked for (logged); None when it could not
    be asked (it is down, or slow: ask again later)."""
    try:
        reply = await llm.complete(entity_extraction_request(text))
    except LLMHookError as exc:
        log.warning("LLM hook failed for entities: %s", exc)
        metrics.llm_hook.labels("entities", "fallback").inc()
        return None
    found = accepted_entities(reply, text)
    if found is None:
        log.warning("the LLM hook's entities were not the JSON array asked for")
    metrics.llm_hook.labels("entities", "fallback" if found is None else "used").inc()
    return found or []
