"""Entities without an LLM: what a record names, under one key, and what its sentences say
between them."""

from __future__ import annotations

import string
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstream_client.events import Provenance
from processors.knowledge.entities import (
    MAX_CO_MENTION_CONFIDENCE,
    MAX_MENTIONS,
    MAX_NAME_CHARS,
    PATTERN_CONFIDENCE,
    Mention,
    co_mention_confidence,
    entity_key,
    mentions_of,
    record_entities,
    relations_of,
)
from schemas.records import Record


def found(text: str, *, title: str | None = None, tags: Sequence[str] = (),
          agent_id: str | None = None) -> list[tuple[str, str, str]]:
    """(key, kind, source) of each mention, in order."""
    return [(m.key, m.kind, m.source)
            for m in mentions_of(text, title=title, tags=tags, agent_id=agent_id)]


def keys(text: str, *, title: str | None = None) -> list[str]:
    return [key for key, _, _ in found(text, title=title)]


def said(text: str) -> list[tuple[str, str, str]]:
    """(source, relation, target) of each relation the text states."""
    return [(r.source, r.relation, r.target) for r in relations_of(text, mentions_of(text))]


# ---------------------------------------------------------------------------- sources


def test_an_agent_memory_names_the_sdk_and_the_version_it_states_not_the_bare_number() -> None:
    assert found("The payment SDK is pinned to 4.2: version 4.3 drops refunds.") == [
        ("payment sdk", "library", "service"), ("payment sdk@4.3", "version", "version")]


def test_a_head_noun_names_a_service_or_a_host_and_an_acronym_is_a_name() -> None:
    assert found("Deploys to staging need the VPN; the bastion host rejects other traffic.") == [
        ("vpn", "name", "proper_noun"), ("bastion host", "host", "service")]


def test_a_typed_wiki_link_a_versioned_name_and_a_service() -> None:
    text = "[[Project: MyApp]] uses Postgres 15 and depends on the billing service."
    assert found(text) == [
        ("myapp", "project", "wiki_link"), ("postgres", "name", "proper_noun"),
        ("postgres@15", "version", "version"), ("billing service", "service", "service")]
    assert mentions_of(text)[0].name == "MyApp"


def test_wiki_links_with_a_label_or_a_section_name_their_target() -> None:
    assert found("See [[Deploy checklist|the list]] and [[Runbook: Failover#steps]].") == [
        ("deploy checklist", "concept", "wiki_link"), ("failover", "runbook", "wiki_link")]


def test_a_conversation_turn_names_its_speaker_and_the_proper_nouns_it_says() -> None:
    text = "Caroline: I went to the LGBTQ support group in New York yesterday."
    assert found(text) == [("caroline", "person", "speaker"), ("lgbtq", "name", "proper_noun"),
                           ("new york", "name", "proper_noun")]


def test_a_note_label_is_no_speaker() -> None:
    assert keys("Decision: keep the queue.") == []
    assert found("Note: we asked Caroline.") == [("caroline", "name", "proper_noun")]


def test_typed_tags_are_entities_and_plain_or_facet_tags_are_not() -> None:
    assert found("", tags=["project:myapp", "ops", "env:prod", "team: payments"]) == [
        ("myapp", "project", "tag"), ("payment", "team", "tag")]


def test_the_agent_is_an_entity_and_its_own_turns_are_the_same_one() -> None:
    assert found("agent-7: the cache is warm.", agent_id="agent-7") == [
        ("agent 7", "agent", "speaker")]
    assert found("Nothing named here.", agent_id="agent-7") == [("agent 7", "agent", "agent")]


def test_code_identifiers_hosts_ips_and_urls() -> None:
    text = ("auth.py sets DB_MIGRATE for JWTManager; memory.events reaches db-1.internal:5432, "
            "api.example.com and 10.0.0.1, see https://Docs.Example.com/Billing/?tab=2#top.")
    assert found(text) == [
        ("auth.py", "code", "code"), ("db migrate", "code", "code"),
        ("jwtmanager", "code", "code"), ("memory.events", "code", "code"),
        ("db 1.internal", "host", "host"), ("api.example.com", "host", "host"),
        ("10.0.0.1", "host", "host"), ("docs.example.com/billing", "url", "url")]


def test_abbreviations_are_not_code() -> None:
    assert keys("Use a queue, e.g. one per tenant, i.e. isolated.") == []


def test_a_hyphenated_service_is_one_name() -> None:
    assert found("Deploying billing-api to staging fails unless DB_MIGRATE is false.") == [
        ("billing api", "service", "service"), ("db migrate", "code", "code")]


def test_a_head_noun_after_a_generic_word_names_nothing() -> None:
    assert keys("The new service calls the other server and our database.") == []


@pytest.mark.parametrize(("text", "expected"), [
    ("Python 3.11 is required.", ["python", "python@3.11"]),
    ("It runs MyApp v1.2.3 now.", ["myapp", "myapp@1.2.3"]),
    ("Pin the payment SDK 4.2 today.", ["payment sdk", "payment sdk@4.2"]),
    ("Node.js 18 and Postgres 16 were certified.", ["node.js", "node.js@18", "postgres",
                                                    "postgres@16"]),
    ("We met at PyCon 2024 in Step 3.", ["pycon"]),
    ("We met Bob 3 times, Alice 2 days ago.", ["bob", "alice"]),
])
def test_a_version_belongs_to_the_name_it_follows_and_a_year_or_a_count_is_none(
        text: str, expected: list[str]) -> None:
    assert keys(text) == expected


# ---------------------------------------------------------------------------- not names


@pytest.mark.parametrize("text", [
    "The deploy failed.", "Yesterday we shipped it.", "This is fine. We agreed.",
    "Monday the queue stalled; on Friday in May it stalled again.", "I think so. Thanks!",
    "Retries 3 times, waits 10 s then 2.5 s, 80% of the time.", "DO NOT DEPLOY ON FRIDAY.",
])
def test_words_capitalised_for_another_reason_and_bare_numbers_are_not_entities(
        text: str) -> None:
    assert keys(text) == []


def test_a_sentence_opening_word_is_a_name_only_when_capitalised_elsewhere_too() -> None:
    assert keys("Restarted the cache. Redis was down.") == []
    assert keys("Redis was down. We restarted Redis.") == ["redis"]
    assert keys("Yesterday Caroline met Bob at Acme Corp.") == ["caroline", "bob", "acme corp"]


def test_a_multiword_name_counts_even_at_the_start_of_a_sentence() -> None:
    assert keys("Payment Gateway timed out. The Bank of America called.") == [
        "payment gateway", "bank of america"]


def test_fenced_code_is_skipped_and_inline_code_is_prose() -> None:
    text = "Set `retry_limit` in MyApp.\n```python\nuser_id = JWTManager()\n```\nDone."
    assert keys(text) == ["retry limit", "myapp"]


# ---------------------------------------------------------------------------- merging


def test_spellings_of_one_entity_merge_into_one_mention_with_the_best_name() -> None:
    text = "[[Project: MyApp]] is up. myapp restarted; MyApp's cache is cold."
    mentions = mentions_of(text, tags=["project:myapp"])
    assert mentions == [Mention("myapp", "MyApp", "project", "wiki_link",
                                ("MyApp", "myapp"))]


def test_the_first_capitalised_form_names_an_entity_seen_in_tags_first() -> None:
    [mention] = mentions_of("We moved MyApp.", tags=["project:myapp"])
    assert (mention.name, mention.kind, mention.source) == ("MyApp", "project", "tag")


def test_the_title_is_read_before_the_text() -> None:
    assert keys("It uses Redis.", title="Acme Corp outage") == ["acme corp", "redis"]


@pytest.mark.parametrize(("spellings", "key"), [
    (["[[Project: MyApp]]", "MyApp", "myapp", "project:myapp", "  MYAPP  "], "myapp"),
    (["My App", "my-app", "my_app"], "my app"),
    (["the Billing Services", "billing_service", "Billing-Service", "(billing service)"],
     "billing service"),
    (["APIs", "api", "API"], "api"),
    (["Payment Gateways", "payment gateway"], "payment gateway"),
    (["Policies", "policy"], "policy"),
    (["Caroline's", "caroline"], "caroline"),
    (["classes", "class"], "class"),
])
def test_entity_key_merges_spellings(spellings: list[str], key: str) -> None:
    assert {entity_key(spelling) for spelling in spellings} == {key}


@pytest.mark.parametrize("word", ["Redis", "status", "class", "Postgres", "Kubernetes", "AWS",
                                  "macOS", "C++", "C#", "localhost:5432"])
def test_entity_key_leaves_singular_names_alone(word: str) -> None:
    assert entity_key(word) == word.casefold()


# ---------------------------------------------------------------------------- relations


def test_explicit_verbs_relate_the_entities_around_them() -> None:
    assert said("[[Project: MyApp]] uses Postgres 15 and depends on the billing service.") == [
        ("myapp", "uses", "postgres"), ("myapp", "depends_on", "billing service")]
    assert said("The billing service calls the Ledger API.") == [
        ("billing service", "calls", "ledger api")]
    assert said("The billing service runs on the bastion host.") == [
        ("billing service", "runs_on", "bastion host")]
    assert said("The ledger service is part of the billing cluster.") == [
        ("ledger service", "part_of", "billing cluster")]
    assert said("The payments team owns the billing service.") == [
        ("payments team", "owns", "billing service")]


@pytest.mark.parametrize("text", [
    "The billing service replaced the Legacy Gateway.",
    "The billing service replaces the Legacy Gateway.",
    "The Legacy Gateway was replaced by the billing service.",
    "The Legacy Gateway has been replaced by the billing service.",
])
def test_replacement_keeps_its_direction_in_the_passive(text: str) -> None:
    assert said(text) == [("billing service", "replaces", "legacy gateway")]


def test_the_passive_flips_every_relation() -> None:
    assert said("The billing service is owned by the payments team.") == [
        ("payments team", "owns", "billing service")]
    assert said("The Ledger API is used by the billing service.") == [
        ("billing service", "uses", "ledger api")]
    assert said("The bastion host hosts the billing service.") == [
        ("billing service", "runs_on", "bastion host")]


def test_a_relation_carries_its_confidence_and_the_words_that_state_it() -> None:
    text = "MyApp runs on Python 3.11 and is owned by the payments team."
    first, second = relations_of(text, mentions_of(text))
    assert (first.confidence, first.evidence, first.origin) == (
        PATTERN_CONFIDENCE, "MyApp runs on Python 3.11", "pattern")
    # The second subject is inferred across "and": trusted a little less.
    assert (second.source, second.relation, second.target) == ("payments team", "owns", "myapp")
    assert second.confidence < first.confidence


@pytest.mark.parametrize("text", [
    "MyApp no longer uses Redis.", "MyApp does not depend on Redis.",
    "MyApp is fine. Uses Redis daily.", "MyApp uses caching for Redis.",
    "We use Redis.", "The tool called Redis is fast.",
])
def test_no_relation_without_an_affirmed_verb_between_two_entities_of_one_sentence(
        text: str) -> None:
    assert said(text) == []


def test_co_mention_confidence_grows_with_records_and_stays_below_a_stated_relation() -> None:
    values = [co_mention_confidence(n) for n in range(0, 12)]
    assert values[0] == 0.0 and values[1] == pytest.approx(0.4)
    assert values == sorted(values) and len(set(values)) == len(values)
    assert values[-1] < MAX_CO_MENTION_CONFIDENCE < PATTERN_CONFIDENCE


def test_a_record_gives_its_mentions_relations_and_the_page_its_title_names() -> None:
    record = Record(
        record_id="mem_1", namespace="team-a", record_kind="memory", title="The MyApp stack",
        text="[[Project: MyApp]] uses Postgres 15.", tags=("team:payments", "ops"),
        agent_id="agent-7", created_at=datetime(2025, 5, 1, tzinfo=UTC),
        provenance=Provenance(source_event_id="e1", source_topic="memory.events",
                              source_partition=0, source_offset=1, producer="agent-7"))
    read = record_entities(record, 3)
    assert (read.record_id, read.namespace, read.version, read.page) == (
        "mem_1", "team-a", 3, "myapp stack")
    # The title is read first: MyApp is named there.
    assert [m.key for m in read.mentions] == [
        "myapp", "postgres", "postgres@15", "payment", "agent 7"]
    # What the sentence states, then what the page links to.
    assert [(r.source, r.relation, r.target, r.origin) for r in read.relations] == [
        ("myapp", "uses", "postgres", "pattern"),
        ("myapp stack", "links_to", "myapp", "wiki_link")]


# ---------------------------------------------------------------------------- bounds


def test_mentions_per_record_and_name_length_are_capped() -> None:
    many = " ".join(f"svc_{i}" for i in range(200))
    mentions = mentions_of(many)
    assert len(mentions) == MAX_MENTIONS and mentions[0].key == "svc 0"
    assert mentions_of(f"[[{'x' * (MAX_NAME_CHARS + 1)}]] and Redis.")[0].key == "redis"


ADVERSARIAL = {
    "dots": "a." * 24_000, "hyphens": "a-" * 24_000, "capitals": "Aa " * 16_000,
    "numbers": "1 " * 24_000, "versions": "Postgres v1 version 2 " * 2_200,
    "brackets": "[[" * 24_000, "open link": "[[a|" + "b" * 48_000, "fences": "```\n" * 12_000,
    "speakers": "Ab:\n" * 12_000, "shouting": "AB " * 16_000, "ips": "1.2.3." * 8_000,
    "labels": "a-" * 30 + "." + "a" * 48_000, "url": "http://" + "a" * 48_000,
    "verbs": "MyApp uses Postgres and is owned by " * 1_400, "connectors": "Ab of " * 8_000,
    "identifiers": "a_" * 24_000, "head nouns": "Ab Cd billing-api " * 2_800,
}


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_a_long_adversarial_text_is_read_in_well_under_a_second(name: str) -> None:
    text = ADVERSARIAL[name][:48_000]
    started = time.process_time()
    mentions = mentions_of(text)
    relations_of(text, mentions)
    assert time.process_time() - started < 1.0
    assert len(mentions) <= MAX_MENTIONS


# ---------------------------------------------------------------------------- properties

FRAGMENTS = st.sampled_from([
    "[[Project: MyApp]]", "[[a|b]]", "Caroline:", "agent-7:", "uses", "is replaced by",
    "depends on", "the billing service", "Postgres 15", "v1.2.3", "version 4.3", "New York",
    "The", "Yesterday", "auth.py", "DB_MIGRATE", "APIs", "db-1.internal:5432", "10.0.0.1",
    "https://api.example.com/v1/?q=1", "```", "\n", ".", ",", "and", "not", "2024", "4.2",
])
TEXTS = st.text() | st.lists(FRAGMENTS | st.text(max_size=8), max_size=40).map(" ".join)


@given(TEXTS, st.none() | st.text(max_size=40), st.lists(st.text(max_size=30), max_size=5),
       st.none() | st.text(max_size=30))
@settings(max_examples=300)
def test_extraction_never_raises_and_its_result_is_keyed_and_bounded(
        text: str, title: str | None, tags: list[str], agent_id: str | None) -> None:
    mentions = mentions_of(text, title=title, tags=tags, agent_id=agent_id)
    assert len(mentions) <= MAX_MENTIONS
    assert len({m.key for m in mentions}) == len(mentions)
    for mention in mentions:
        assert mention.key and mention.name in mention.aliases
        assert len(mention.name) <= MAX_NAME_CHARS
        if mention.kind not in ("version", "url"):
            assert all(entity_key(alias) == mention.key for alias in mention.aliases)


@given(TEXTS)
@settings(max_examples=300)
def test_relations_never_raise_and_join_two_distinct_mentioned_entities(text: str) -> None:
    mentions = mentions_of(text)
    named = {m.key.rsplit("@", 1)[0] if m.kind == "version" else m.key for m in mentions}
    for relation in relations_of(text, mentions):
        assert {relation.source, relation.target} <= named
        assert relation.source != relation.target
        assert 0 < relation.confidence < 1 and relation.evidence


@given(st.text())
def test_entity_key_is_idempotent(name: str) -> None:
    assert entity_key(entity_key(name)) == entity_key(name)


@given(st.text(alphabet=string.printable))
def test_entity_key_ignores_case(name: str) -> None:
    assert entity_key(name.upper()) == entity_key(name.lower()) == entity_key(name)


WORDS = st.lists(st.text(alphabet=string.ascii_letters + string.digits + ".+#'", min_size=1,
                         max_size=8), min_size=1, max_size=5)


@given(WORDS, st.data())
def test_entity_key_ignores_how_words_are_spaced(words: list[str], data: st.DataObject) -> None:
    spaces = data.draw(st.lists(st.sampled_from([" ", "  ", "\t", "\n", " \n ", "_", "-"]),
                                min_size=len(words) + 1, max_size=len(words) + 1))
    spaced = spaces[0] + "".join(word + space for word, space in zip(words, spaces[1:],
                                                                     strict=True))
    assert entity_key(spaced) == entity_key(" ".join(words))


@given(st.sampled_from(["project", "Person", "SERVICE", "team", "tool", "repo", "host"]),
       st.text())
def test_entity_key_is_stable_under_a_typed_prefix(kind: str, name: str) -> None:
    if entity_key(name):
        assert entity_key(f"{kind}: {name}") == entity_key(name)


def test_a_typed_title_names_what_its_page_is_about() -> None:
    (atlas, *_) = mentions_of("It is the billing rewrite.", title="Project: Atlas")
    assert (atlas.key, atlas.kind, atlas.source) == ("atlas", "project", "typed_title")
    # An untyped title is read as text, like the first line of the memory.
    assert [m.key for m in mentions_of("x", title="Deploys need the VPN")] == ["vpn"]
