"""The memory-grounded summary: ids kept in rank order, the query's sentences chosen, the
budget never exceeded, the same answer every time, and what the LLM hook's rewrite must keep."""

from __future__ import annotations

import pytest

from processors.recall.summary import (
    MIN_BUDGET_TOKENS,
    Summary,
    SummaryHit,
    grounded_rewrite,
    summarize,
)
from processors.text.condense import approx_tokens

VPN = SummaryHit(
    "mem_" + "a" * 24, "Staging and the VPN",
    "It was set up in March. Deploys to staging need the VPN profile from #ops. "
    "The profile expires every 90 days. Without the VPN, staging deploys time out.")
DEPLOYS = SummaryHit(
    "mem_" + "b" * 24, "Who approves deploys",
    "Production deploys need an approval from the on-call lead. Staging deploys need none.")
CACHE = SummaryHit(
    "mem_" + "c" * 24, None,
    "The user cache is warmed on boot. It takes about a minute.")
HITS = [VPN, DEPLOYS, CACHE]


def test_each_memory_shows_its_id_title_and_the_sentences_about_the_query() -> None:
    summary = summarize("do staging deploys need the VPN?", HITS, 400, approx_tokens)
    lines = summary.text.splitlines()
    assert lines[0].startswith('What memory holds about "do staging deploys need the VPN?"')
    # Its two sentences about the query, in its order, the gap between them marked.
    assert lines[1] == (f"- [{VPN.record_id}] Staging and the VPN: Deploys to staging need "
                        "the VPN profile from #ops. … Without the VPN, staging deploys time "
                        "out.")
    # A memory none of whose sentences holds a query term shows its first one.
    assert lines[3] == f"- [{CACHE.record_id}] The user cache is warmed on boot."
    assert summary.memory_ids == (VPN.record_id, DEPLOYS.record_id, CACHE.record_id)
    assert summary.tokens == approx_tokens(summary.text)


def test_the_sentences_shown_keep_the_memorys_order() -> None:
    summary = summarize("staging deploys approval", [DEPLOYS], 400, approx_tokens)
    assert summary.text.splitlines()[1] == (
        f"- [{DEPLOYS.record_id}] Who approves deploys: Production deploys need an approval "
        "from the on-call lead. Staging deploys need none.")


@pytest.mark.parametrize("budget", [MIN_BUDGET_TOKENS, 40, 50, 60, 80, 100, 150, 400])
def test_the_budget_is_never_exceeded_and_the_best_hits_come_first(budget: int) -> None:
    summary = summarize("do staging deploys need the VPN?", HITS * 3, budget, approx_tokens)
    assert summary.tokens <= budget
    assert approx_tokens(summary.text) == summary.tokens
    # Whatever fits is a prefix of the ranking.
    assert list(summary.memory_ids) == [hit.record_id for hit in (HITS * 3)][
        :len(summary.memory_ids)]
    for memory_id in summary.memory_ids:
        assert f"[{memory_id}]" in summary.text


def test_a_small_budget_cuts_the_best_sentence_at_a_word() -> None:
    long = SummaryHit("mem_" + "d" * 24, None, " ".join(["staging"] * 200) + ".")
    summary = summarize("staging", [long], 60, approx_tokens)
    assert summary.memory_ids == (long.record_id,)
    assert summary.text.endswith("staging …") and summary.tokens <= 60


def test_a_memory_that_cannot_fit_a_few_words_ends_the_summary() -> None:
    summary = summarize("staging deploys", HITS, MIN_BUDGET_TOKENS, approx_tokens)
    assert summary.memory_ids == ()
    assert summary.tokens <= MIN_BUDGET_TOKENS


def test_the_summary_is_the_same_every_time() -> None:
    first = summarize("VPN profile expiry", HITS, 120, approx_tokens)
    assert all(summarize("VPN profile expiry", HITS, 120, approx_tokens) == first
               for _ in range(3))


def test_no_hits_say_that_memory_holds_nothing() -> None:
    summary = summarize("quantum billing", [], 100, approx_tokens)
    assert summary == Summary('Memory holds nothing relevant to "quantum billing".', (),
                              approx_tokens(summary.text))


def test_a_long_query_is_quoted_short() -> None:
    summary = summarize("staging " * 100, [], 100, approx_tokens)
    assert summary.tokens <= 100 and summary.text.endswith(' …".')


def test_a_budget_below_the_least_is_refused() -> None:
    with pytest.raises(ValueError, match="budget_tokens"):
        summarize("staging", HITS, MIN_BUDGET_TOKENS - 1, approx_tokens)


def test_a_rewrite_is_kept_only_grounded_and_within_the_budget() -> None:
    summary = summarize("staging deploys", HITS[:2], 400, approx_tokens)
    a, b = summary.memory_ids
    grounded = f"Staging deploys need the VPN profile [{a}] and no approval [{b}]."
    assert grounded_rewrite(f"  {grounded}\n", summary, 400, approx_tokens) == grounded
    assert grounded_rewrite(f"Staging deploys need the VPN profile [{a}].", summary, 400,
                            approx_tokens) is None
    assert grounded_rewrite(f"{grounded} See also [mem_{'e' * 24}].", summary, 400,
                            approx_tokens) is None
    assert grounded_rewrite("   ", summary, 400, approx_tokens) is None
    assert grounded_rewrite(grounded + " more" * 400, summary, 400, approx_tokens) is None
    secret = grounded_rewrite(f"{grounded} The key is AKIAIOSFODNN7EXAMPLE.", summary, 400,
                              approx_tokens)
    assert secret is not None and "AKIAIOSFODNN7EXAMPLE" not in secret
