"""Stale facts: a newer memory restating an older one with another value invalidates it; a
different subject, a grown list, two true facts, a paraphrase, a question, a turn or an event
of its day does not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from processors.knowledge.stale_facts import (
    Invalidation,
    invalidation_of,
    may_invalidate,
    stale_among,
)
from processors.text.calibration import DEFAULT_CALIBRATION
from tests.unit.test_twins import candidate

STALE_COSINE = DEFAULT_CALIBRATION.stale

T0 = datetime(2026, 11, 23, 9, tzinfo=UTC)
DAY = timedelta(days=1)
CLOSE = 0.9


def judged(older: str, newer: str, cosine: float = CLOSE) -> Invalidation | None:
    """`newer` written a day after `older`, in the same namespace, scope and owner."""
    return invalidation_of(candidate("new", newer, created_at=T0 + DAY),
                           candidate("old", older), cosine)


@pytest.mark.parametrize(("older", "newer", "detail"), [
    # value_change
    ("The API rate limit is 100 requests per minute per key.",
     "The API rate limit is 250 requests per minute per key.", "100 -> 250"),
    ("The nightly backup runs at 02:00 UTC.", "The nightly backup runs at 04:30 UTC.",
     "02:00 -> 04:30"),
    ("The release train leaves every Wednesday.", "The release train leaves every Friday.",
     "Wednesday -> Friday"),
    ("The contract with the CDN vendor renews in June.",
     "The contract with the CDN vendor renews in September.", "June -> September"),
    # a value with its unit
    ("The session cookie expires after 30 minutes.",
     "The session cookie expires after 12 hours.", "30 minutes -> 12 hours"),
    # version_bump
    ("The SDK is pinned to version 4.2.", "The SDK is pinned to version 4.4.", "4.2 -> 4.4"),
    ("The current release of the CLI is v2.3.1.", "The current release of the CLI is v2.4.0.",
     "v2.3.1 -> v2.4.0"),
    # paraphrased_value_change: words the newer adds are details
    ("Dana's team has 6 engineers.", "Dana manages a team of 8 engineers.", "6 -> 8"),
    ("Port 8080 is where the orders service listens.",
     "The orders service listens on port 8081.", "8080 -> 8081"),
])
def test_a_changed_value_invalidates_the_older_memory(older: str, newer: str,
                                                      detail: str) -> None:
    assert judged(older, newer) == Invalidation("old", "new", CLOSE, "value", detail)


@pytest.mark.parametrize(("older", "newer", "detail"), [
    ("Debug logging is enabled in staging.", "Debug logging is disabled in staging.",
     "enabled -> disabled"),
    ("The migration job runs before the deploy.", "The migration job runs after the deploy.",
     "before -> after"),
    ("Ana likes working from the office.", "Ana dislikes working from the office.",
     "likes -> dislikes"),
])
def test_an_opposite_invalidates(older: str, newer: str, detail: str) -> None:
    found = judged(older, newer)
    assert found is not None and (found.because, found.detail) == ("opposite", detail)


@pytest.mark.parametrize(("older", "newer"), [
    ("Deploys to production need the office VPN.",
     "Deploys to production no longer need the office VPN."),
    ("Guest users can export reports.", "Guest users cannot export reports."),
    ("Marco reviews all infrastructure pull requests.",
     "Marco stopped reviewing infrastructure pull requests."),
    # and back: what was denied is affirmed again
    ("The VPN is no longer needed for deploys.", "The VPN is needed for deploys."),
])
def test_a_denial_invalidates(older: str, newer: str) -> None:
    found = judged(older, newer)
    assert found is not None and found.because == "denial"


def test_the_denial_detail_names_what_is_now_denied() -> None:
    found = judged("Guest users can export reports.", "Guest users cannot export reports.")
    assert found is not None and found.detail == "now denied: export reports"


@pytest.mark.parametrize(("older", "newer", "detail"), [
    ("The design docs live in Confluence.", "The design docs now live in Notion.",
     "Confluence -> Notion"),
    ("Priya owns the payments service.", "Marco now owns the payments service.",
     "Priya -> Marco"),
    ("Kai lives in Berlin.", "Kai moved to Lisbon.", "lives in Berlin -> Lisbon"),
    ("The main datastore is MySQL.", "The main datastore was migrated to Postgres.",
     "MySQL -> Postgres"),
])
def test_a_change_cue_with_one_short_part_replaced_invalidates(older: str, newer: str,
                                                               detail: str) -> None:
    found = judged(older, newer)
    assert found is not None and (found.because, found.detail) == ("change_cue", detail)


@pytest.mark.parametrize(("older", "newer", "detail"), [
    # Issue 37: a change statement words the rest its own way. The value it says was
    # replaced is what the older held; "ownership" is "owns".
    ("Marta owns the search relevance service.",
     "Ownership of the search relevance service passed from Marta to Idris.", "Marta -> Idris"),
    ("The platform on-call is Joaquin.", "Femi took over the platform on-call from Joaquin.",
     "Joaquin -> Femi"),
    ("The team's retro board lives in Miro.",
     "The team replaced Miro with FigJam for the retro board.", "lives in Miro -> FigJam"),
    ("The max upload size is 25 MB.", "The max upload size went from 25 MB to 100 MB.",
     "25 -> 100"),
    ("Sami leads the growth squad.", "Sami handed the growth squad over to Ines.",
     "Sami leads -> Ines"),
])
def test_a_change_statement_invalidates_what_it_changes(older: str, newer: str,
                                                        detail: str) -> None:
    found = judged(older, newer)
    assert found is not None and (found.because, found.detail) == ("change_cue", detail)
    assert judged(newer, older) is None, "the change said first is not undone by its past"


@pytest.mark.parametrize(("older", "newer", "detail"), [
    # the verb a change cue stands in for is no part of the change
    ("The build agents run Ubuntu 20.04.", "The build agents were upgraded to Ubuntu 22.04.",
     "20.04 -> 22.04"),
    ("The orders API is on v3.", "The orders API was bumped to v4.", "v3 -> v4"),
])
def test_a_value_said_to_have_changed_invalidates(older: str, newer: str, detail: str) -> None:
    found = judged(older, newer)
    assert found is not None and (found.because, found.detail) == ("value", detail)


@pytest.mark.parametrize(("older", "newer", "detail"), [
    ("The invoice service is maintained by Oren.", "The invoice service is maintained by Lea.",
     "Oren -> Lea"),
    ("Marta owns the search relevance service.", "Idris owns the search relevance service.",
     "Marta -> Idris"),
    ("The on-call lead for payments is Sunny.", "The on-call lead for payments is Ravi.",
     "Sunny -> Ravi"),
    ("Kai's home office is in Porto.", "Kai's home office is in Faro.", "Porto -> Faro"),
])
def test_another_holder_of_a_role_one_holds_invalidates(older: str, newer: str,
                                                        detail: str) -> None:
    found = judged(older, newer)
    assert found is not None and (found.because, found.detail) == ("holder", detail)


@pytest.mark.parametrize(("older", "newer"), [
    # the cue replaces more than a short part: another fact about the subject
    ("The standup happens in the big meeting room.", "The standup moved to a video call."),
    # nothing of the older is replaced: "now" alone is no change
    ("The orders service listens on port 8080.",
     "The orders service now listens on port 8080."),
])
def test_a_change_cue_alone_is_not_enough(older: str, newer: str) -> None:
    assert judged(older, newer) is None


@pytest.mark.parametrize(("older", "newer"), [
    # different_subject
    ("The EU cluster has 3 nodes.", "The US cluster has 5 nodes."),
    ("The API listens on port 8080.", "The metrics endpoint listens on port 9090."),
    ("The Redis instance for sessions has 4 GB of memory.",
     "The Redis instance for the job queue has 16 GB of memory."),
    ("Staging uses Postgres 14.", "Production uses Postgres 16."),
    ("Debug logging is enabled in staging.", "Debug logging is disabled in production."),
    # another environment or another age of a thing: another subject, though the guard
    # counts the pair as opposites
    ("Deploys to staging need the office VPN.", "Deploys to production need the office VPN."),
    ("The staging bucket is public.", "The prod bucket is public."),
    ("The old billing API is deprecated.", "The new billing API is deprecated."),
    # a number that says which thing: another thing
    ("Ann's private note 1 about the rota: it starts at nine.",
     "Ann's private note 2 about the rota: it starts at nine."),
    ("Sprint 12 ends on Friday.", "Sprint 13 ends on Friday."),
    ("Ticket #41 is blocked on the security review.",
     "Ticket #42 is blocked on the security review."),
    # a change described, not a change made; a negative statement said again
    ("The search tool calls both lower-level tools, then returns a concise summary.",
     "Instead of raw hits, the search tool returns a short summary after calling both "
     "lower-level tools."),
    ("Jonas is not the owner of the search service anymore.",
     "Jonas no longer owns the search service."),
    ("The Kafka topic memory.events has 12 partitions.",
     "The Kafka topic memory.dead_letters has 3 partitions."),
    # a name in a relation of many: both hold
    ("Ravi speaks Hindi.", "Ravi speaks Tamil."),
    ("Joaquin mentors Femi.", "Joaquin mentors Ana."),
    ("The mobile team uses Jira.", "The mobile team uses Linear."),
    # a change of another subject; a change said again, or what it made so
    ("Marta owns the search relevance service.",
     "Ownership of the billing gateway passed from Marta to Idris."),
    ("The orders API was bumped to v4.", "The orders API is on v4."),
    ("Ownership of the search service passed from Marta to Idris.",
     "Idris owns the search service."),
    ("Femi took over the platform on-call from Joaquin.", "Femi is now the platform on-call."),
    ("Failed messages are moved to the DLQ.", "Failed messages are moved to the retry topic."),
    ("Sami leads the growth squad.", "Sami leads the growth squad and the onboarding squad."),
    # list_grew
    ("We support Python 3.10 and 3.11.", "We support Python 3.10, 3.11 and 3.12."),
    ("On call: Alice, Bob.", "On call: Alice, Bob and Carol."),
    ("The gateway exposes ports 80 and 443.", "The gateway exposes ports 80, 443 and 8443."),
    # both_true
    ("Alice likes hiking.", "Alice likes painting."),
    ("The backup runs nightly.", "The backup keeps 7 copies."),
    ("The staging cluster has 3 nodes.", "The staging cluster runs Kubernetes 1.29."),
    ("The API rate limit is 100 requests per minute.",
     "The API burst limit is 20 requests per second."),
    ("The nightly ETL loads 2 million rows.", "The nightly ETL takes 40 minutes."),
    # same_value_paraphrase
    ("The orders service listens on port 8080.", "Port 8080 is where the orders service listens."),
    ("Staging has 3 replicas of the search worker.",
     "The search worker runs three replicas in staging."),
    ("Marco no longer reviews infrastructure pull requests.",
     "Marco stopped reviewing infrastructure pull requests."),
    ("The nightly backup runs at 02:00 UTC.",
     "The nightly backup runs at 02:00 UTC and takes about 40 minutes."),
    # unrelated_same_topic
    ("Kafka retention for memory.events is 7 days.", "The Kafka brokers run on 3 dedicated hosts."),
    # question_answer, both ways
    ("Which port does the orders service listen on?", "The orders service listens on port 8080."),
    ("The SDK is pinned to version 4.2.", "Should we pin the SDK to version 4.4?"),
    # conversation_turn: what was said then stays said
    ("Priya: staging has 3 replicas of the search worker.",
     "Priya: staging has 5 replicas of the search worker."),
    ("The API rate limit is 100 requests per minute.",
     "Sam: the API rate limit is 250 requests per minute."),
    ("Omar: the cache TTL is 300 seconds.", "The cache TTL is 600 seconds."),
    # relative_time: an event of its day
    ("Last week the API served 2 million requests.",
     "Last week the API served 3 million requests."),
    ("The deploy failed yesterday.", "The deploy succeeded yesterday."),
])
def test_hard_negatives_are_not_invalidated(older: str, newer: str) -> None:
    assert judged(older, newer) is None
    assert judged(newer, older) is None, "nor the other way round"


@pytest.mark.parametrize(("older", "newer"), [
    # A name beside a value is the thing counted, not a unit: two things, both in use.
    ("The dashboard is built with Vue 3.", "The dashboard is built with Tailwind 2."),
    ("The worker image ships Node 20.", "The worker image ships Deno 1."),
    # A word the newer puts before the phrase that leads to the value names another thing.
    ("The export job times out after 60 seconds.",
     "The nightly export job times out after 300 seconds."),
    ("The search results are cached for 10 minutes.",
     "The autocomplete search results are cached for 30 minutes."),
])
def test_another_thing_with_another_value_is_not_invalidated(older: str, newer: str) -> None:
    assert judged(older, newer) is None
    assert judged(newer, older) is None, "nor the other way round"


@pytest.mark.parametrize(("older", "newer", "detail"), [
    # A qualifier of one word kept apart from the value by one word is a paraphrase's.
    ("The retro is on Fridays.", "The sprint retro is on Thursdays.", "Fridays -> Thursdays"),
    # A value said first is the new value, not a qualifier.
    ("The billing dashboard is owned by Hana.",
     "Omar replaced Hana as owner of the billing dashboard.", "Hana -> Omar"),
])
def test_a_word_added_before_the_value_may_still_be_a_change(older: str, newer: str,
                                                             detail: str) -> None:
    found = judged(older, newer)
    assert found is not None and found.detail == detail


def test_a_channel_said_to_be_replaced_keeps_its_sign() -> None:
    found = judged("Deploy notices go to the #deploys channel.",
                   "Deploy notices now go to #releases instead of #deploys.")
    assert found is not None and found.because == "change_cue"
    assert found.detail == "channel -> releases", "#deploys is the value replaced, no qualifier"


def test_a_changed_value_does_not_take_another_sentence_of_the_older_with_it() -> None:
    assert judged("The orders service listens on port 8080. It has 4 replicas.",
                  "The orders service listens on port 8081.") is None
    found = judged("The orders service has 4 replicas. It listens on port 8080.",
                   "The orders service has 4 replicas. It listens on port 8081.")
    assert found is not None and found.detail == "8080 -> 8081"


OLD = candidate("old", "The SDK is pinned to version 4.2.")
NEW = candidate("new", "The SDK is pinned to version 4.4.", created_at=T0 + DAY)


def test_the_partition_must_be_the_same() -> None:
    assert invalidation_of(NEW, OLD, CLOSE) is not None
    for fields in ({"namespace": "team-b"}, {"scope": "personal", "agent_id": "finn"},
                   {"agent_id": "agent-7"}, {"memory_type": "decision"},
                   {"record_kind": "lesson"}, {"repo": "acme/web"},
                   {"security_scope": "restricted"}):
        other = candidate("new", NEW.text, created_at=T0 + DAY, **fields)
        assert invalidation_of(other, OLD, CLOSE) is None, fields


def test_only_a_newer_memory_invalidates_and_never_itself() -> None:
    assert invalidation_of(OLD, NEW, CLOSE) is None, "the older does not invalidate the newer"
    same_moment = candidate("new", NEW.text)
    assert invalidation_of(same_moment, OLD, CLOSE) is not None, "at or after the older"
    assert invalidation_of(candidate("old", NEW.text, created_at=T0 + DAY), OLD, CLOSE) is None


def test_the_cosine_must_reach_the_threshold() -> None:
    assert invalidation_of(NEW, OLD, STALE_COSINE) is not None
    assert invalidation_of(NEW, OLD, STALE_COSINE - 0.01) is None
    assert invalidation_of(NEW, OLD, 0.9, threshold=0.95) is None


def test_questions_turns_and_relative_times_never_invalidate_and_are_not_searched() -> None:
    for text in ("Is the SDK pinned to version 4.4?", "Marco: the SDK is pinned to 4.4.",
                 "Since yesterday the SDK is pinned to version 4.4."):
        newer = candidate("new", text, created_at=T0 + DAY)
        assert not may_invalidate(newer)
        assert invalidation_of(newer, OLD, CLOSE) is None
        assert invalidation_of(NEW, candidate("old", text), CLOSE) is None
    assert may_invalidate(NEW)


def test_stale_among_finds_each_stale_neighbour_once_the_closest_first() -> None:
    neighbours = [
        (candidate("b", "The SDK is pinned to version 4.3."), 0.95),
        (candidate("a", "The SDK is pinned to version 4.2."), 0.97),
        (candidate("a", "The SDK is pinned to version 4.2."), 0.91),
        (candidate("same", "The SDK is pinned to version 4.4."), 0.99),
        (candidate("far", "The SDK is pinned to version 4.1."), STALE_COSINE - 0.1),
        (candidate("other", "The CLI is pinned to version 4.2."), 0.9),
    ]
    found = stale_among(NEW, neighbours)
    assert [(stale.older_id, stale.cosine) for stale in found] == [("a", 0.97), ("b", 0.95)]
    assert stale_among(NEW, []) == []


# ---------------------------------------------------------------------------- properties

_WORDS = st.sampled_from([
    "the", "deploy", "cluster", "staging", "production", "enabled", "disabled", "not", "now",
    "never", "port", "8080", "9090", "3", "v1.2", "memory.events", "Monday", "before",
    "after", "Alice", "Bob", "needs", "VPN", "replicas", "switched", "to", "runs", "nightly",
    "two", "on", "off", "likes", "dislikes", "March", "api_key", "4.2", "instead", "of",
])
_TEXTS = st.lists(_WORDS, min_size=1, max_size=12).map(
    lambda words: " ".join(words).capitalize() + ".")
_COSINES = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)


@given(_TEXTS, _COSINES)
def test_a_memory_never_invalidates_itself(text: str, cosine: float) -> None:
    memory = candidate("m", text)
    assert invalidation_of(memory, memory, cosine, threshold=-1.0) is None


@given(_TEXTS, _TEXTS, st.integers(min_value=1, max_value=1000))
def test_a_newer_memory_is_never_invalidated_by_an_older_one(older: str, newer: str,
                                                             minutes: int) -> None:
    earlier = candidate("earlier", older)
    later = candidate("later", newer, created_at=T0 + timedelta(minutes=minutes))
    assert invalidation_of(earlier, later, 1.0, threshold=-1.0) is None


@given(_TEXTS, _TEXTS)
def test_a_grown_statement_never_invalidates_what_it_grew_from(text: str, clause: str) -> None:
    older = candidate("old", text)
    grown = candidate("new", f"{text[:-1]}, and {clause}", created_at=T0 + DAY)
    assert invalidation_of(grown, older, 1.0, threshold=-1.0) is None


@given(_TEXTS, _TEXTS)
def test_what_may_not_invalidate_never_does(older: str, newer: str) -> None:
    later = candidate("new", newer, created_at=T0 + DAY)
    if invalidation_of(later, candidate("old", older), 1.0, threshold=-1.0) is not None:
        assert may_invalidate(later)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), _TEXTS, _COSINES),
                max_size=8), st.randoms(use_true_random=False))
def test_stale_among_does_not_depend_on_the_neighbours_order(
        rows: list[tuple[str, str, float]], shuffler: Random) -> None:
    newer = candidate("new", "The SDK is pinned to version 4.4 on staging.",
                      created_at=T0 + DAY)
    neighbours = [(candidate(record_id, text), cosine) for record_id, text, cosine in rows]
    shuffled = list(neighbours)
    shuffler.shuffle(shuffled)
    assert stale_among(newer, shuffled, -1.0) == stale_among(newer, neighbours, -1.0)
