from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt
import pytest

from memstream_client.events import MAX_RELATED_IDS
from processors.consolidation.candidates import (
    ConsolidationCandidate,
    ConsolidationSettings,
    partition_key,
)
from processors.consolidation.clusters import (
    MAX_TEXT_CHARS,
    find_clusters,
    locally_scaled,
    merge_cluster,
    merged_record_id,
    neighbour_cosines,
    pending_supersessions,
    reduce,
)
from processors.consolidation.restatements import (
    asks,
    contradicts,
    names_in,
    near_duplicate,
    polarity,
    restates,
    says_change,
    sentences,
    speaker_of,
)

T0 = datetime(2026, 11, 1, tzinfo=UTC)
DIM = 384
Vectors = npt.NDArray[np.float64]


def candidate(record_id: str, text: str = "", **fields: object) -> ConsolidationCandidate:
    base = ConsolidationCandidate(
        record_id=record_id, namespace="team-a", scope="shared", agent_id=None,
        record_kind="memory", memory_type="fact", text=text or "Something worth keeping.",
        title=None, tags=(), related_ids=(), review_state="approved",
        source_event_ids=(f"e-{record_id}",), created_at=T0)
    return replace(base, **fields)  # type: ignore[arg-type]


def directions(count: int, seed: int = 1) -> Vectors:
    """`count` orthonormal directions: memories that have nothing in common."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(DIM, count)))
    return q.T


def near(direction: Vectors, cosine: float, away: Vectors) -> Vectors:
    """A unit vector at `cosine` to `direction`, turned towards `away` (orthogonal to it)."""
    turned: Vectors = cosine * direction + np.sqrt(1 - cosine**2) * away
    return turned


def duplicates_among_unrelated(pairs: int, singles: int) -> Vectors:
    """`pairs` pairs of duplicates (cosine 0.95), then `singles` unrelated memories."""
    axes = directions(2 * pairs + singles)
    rows = []
    for k in range(pairs):
        rows += [axes[2 * k], near(axes[2 * k], 0.95, axes[2 * k + 1])]
    rows += list(axes[2 * pairs:])
    return np.array(rows)


# ---------------------------------------------------------------------------- partitions


def test_clusters_never_cross_namespaces_scopes_owners_kinds_or_types() -> None:
    same = "Deploys to staging need the VPN."
    variants: list[dict[str, object]] = [
        {}, {"namespace": "team-b"}, {"scope": "personal", "agent_id": "ann"},
        {"scope": "personal", "agent_id": "bob"}, {"record_kind": "run_digest"},
        {"memory_type": "lesson"},
    ]
    candidates = [candidate(f"m{n}", same, **fields) for n, fields in enumerate(variants)]
    candidates.append(candidate("m-dup", same))
    vectors = np.tile(directions(1)[0], (len(candidates), 1))

    clusters = find_clusters(candidates, vectors)

    assert clusters == [[0, len(candidates) - 1]]
    assert len({partition_key(c) for c in candidates}) == len(variants)


def test_a_merge_refuses_members_of_two_partitions() -> None:
    members = [candidate("a"), candidate("b", memory_type="lesson")]
    with pytest.raises(ValueError, match="must not cross"):
        merge_cluster(members, directions(2))


# ---------------------------------------------------------------------------- reduction


def test_pca_is_deterministic() -> None:
    vectors = np.random.default_rng(3).normal(size=(200, DIM))
    first = reduce(vectors)
    assert first.shape == (200, 64)
    assert np.array_equal(first, reduce(vectors.copy()))
    # The axes are signed by the data, not by the solver: negated rows, negated projection.
    assert np.allclose(reduce(-vectors), -first)


def test_pca_does_not_depend_on_row_order() -> None:
    vectors = np.random.default_rng(4).normal(size=(120, DIM))
    order = np.random.default_rng(5).permutation(120)
    assert np.allclose(reduce(vectors)[order], reduce(vectors[order]), atol=1e-9)


def test_pca_of_few_rows_keeps_the_directions_they_span() -> None:
    vectors = np.random.default_rng(6).normal(size=(5, DIM))
    assert reduce(vectors, dims=64).shape == (5, 4)
    assert reduce(vectors, dims=2).shape == (5, 2)


# ---------------------------------------------------------------------------- clustering


def test_two_duplicates_alone_in_their_partition_are_one_cluster() -> None:
    vectors = duplicates_among_unrelated(pairs=1, singles=0)
    assert find_clusters([candidate("a"), candidate("b")], vectors) == [[0, 1]]


def test_pairs_of_duplicates_among_unrelated_memories_are_found() -> None:
    vectors = duplicates_among_unrelated(pairs=5, singles=30)
    candidates = [candidate(f"m{n:02d}") for n in range(len(vectors))]
    assert find_clusters(candidates, vectors) == [[2 * k, 2 * k + 1] for k in range(5)]


def test_a_density_cluster_larger_than_a_group_is_clustered_again() -> None:
    # HDBSCAN takes 200 of these 240 memories as one cluster: a topic, not a duplicate group.
    vectors = duplicates_among_unrelated(pairs=20, singles=200)
    candidates = [candidate(f"m{n:03d}") for n in range(len(vectors))]
    assert find_clusters(candidates, vectors) == [[2 * k, 2 * k + 1] for k in range(20)]


def test_many_identical_memories_are_one_cluster() -> None:
    axes = directions(130)
    vectors = np.array([axes[0]] * 120 + list(axes[1:]))
    candidates = [candidate(f"m{n:03d}") for n in range(len(vectors))]
    assert find_clusters(candidates, vectors) == [list(range(120))]


def test_the_output_is_sorted_and_the_same_whatever_the_input_order() -> None:
    vectors = duplicates_among_unrelated(pairs=4, singles=12)
    candidates = [candidate(f"m{n:02d}") for n in range(len(vectors))]
    order = np.random.default_rng(8).permutation(len(vectors)).tolist()
    clusters = find_clusters(candidates, vectors)
    shuffled = find_clusters([candidates[i] for i in order], vectors[order])
    assert clusters == sorted(clusters) and all(c == sorted(c) for c in clusters)
    assert {frozenset(candidates[i].record_id for i in c) for c in clusters} == {
        frozenset(candidates[order[i]].record_id for i in c) for c in shuffled}


def test_a_member_far_from_the_others_is_split_off() -> None:
    axes = directions(3)
    close = near(axes[0], 0.97, axes[1])
    # 0.7 to both: HDBSCAN may take it in, the guard (mean cosine 0.75) does not.
    loose = near(axes[0], 0.7, axes[2])
    clusters = find_clusters([candidate("a"), candidate("b"), candidate("c")],
                             np.array([axes[0], close, loose]))
    assert clusters == [[0, 1]]


def test_memories_naming_different_numbers_or_identifiers_are_not_merged() -> None:
    texts = ["The importer retries 3 times before giving up.",
             "The importer retries 5 times before giving up.",
             "Call sync_active_memory after each task.",
             "Call retrieve_memories after each task."]
    axes = directions(4)
    vectors = np.array([axes[0], near(axes[0], 0.98, axes[1]),
                        axes[2], near(axes[2], 0.98, axes[3])])
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, vectors) == []


def test_facts_that_share_one_number_and_differ_in_another_are_not_merged() -> None:
    # Issue 12: "service 27 needs flag 0" and "... flag 8" were merged, because the veto only
    # fired when two texts shared no number at all, and both name service 27.
    texts = ["memory number 112: the deploy of service 27 needs flag 0",
             "memory number 112: the deploy of service 27 needs flag 8",
             "The importer retries 3 times within 10 seconds.",
             "The importer retries 5 times within 10 seconds."]
    axes = directions(4)
    vectors = np.array([axes[0], near(axes[0], 0.99, axes[1]),
                        axes[2], near(axes[2], 0.99, axes[3])])
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, vectors) == []


def test_four_facts_that_differ_only_in_the_flag_are_not_merged() -> None:
    texts = [f"the deploy of service 27 needs flag {flag}" for flag in (0, 3, 5, 8)]
    axes = directions(4)
    vectors = np.array([axes[0], *(near(axes[0], 0.99, axes[n]) for n in (1, 2, 3))])
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, vectors) == []


def test_a_restatement_that_adds_a_number_is_still_a_duplicate() -> None:
    # A detail added is no contradiction: the numbers of one contain the other's.
    texts = ["The importer retries 3 times.", "The importer retries 3 times, 10 s apart."]
    axes = directions(2)
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, np.array([axes[0], near(axes[0], 0.95, axes[1])])) == [
        [0, 1]]


def test_the_same_number_written_differently_is_no_conflict() -> None:
    texts = ["Keep at most 10 related ids per memory.", "Keep at most ten related ids.",
             "Rotate at 80% of the budget.", "Rotation happens at 0.8 of the budget."]
    axes = directions(4)
    vectors = np.array([axes[0], near(axes[0], 0.95, axes[1]),
                        axes[2], near(axes[2], 0.95, axes[3])])
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, vectors) == [[0, 1], [2, 3]]


def test_abbreviations_are_not_identifiers() -> None:
    texts = ["Keep retries short, e.g. a few seconds.", "Keep the retries in sync_job.py short."]
    axes = directions(2)
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, np.array([axes[0], near(axes[0], 0.95, axes[1])])) == [
        [0, 1]]


def test_weekdays_and_months_are_values_too() -> None:
    texts = ["The backup runs every Monday night.", "The backup runs every Friday night.",
             "The audit is due in March.", "The audit is due in September."]
    assert find_clusters([candidate(f"m{n}", text) for n, text in enumerate(texts)],
                         identical_pairs(2)) == []


def test_a_value_named_twice_counts_twice() -> None:
    # Each number of the second is named in the first, but the first names 3 twice.
    texts = ["A human block keeps 4 preferences, 3 facts and the last 3 context notes.",
             "A human block keeps 4 preferences, 3 facts and the last 5 context notes."]
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, identical_pairs(1)) == []


def test_times_relative_to_the_writing_are_values() -> None:
    texts = ["Last week the nightly export timed out twice.",
             "This week the nightly export timed out twice.",
             "The export timed out two days ago.", "The export timed out three days ago."]
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, identical_pairs(2)) == []


def identical_pairs(count: int) -> Vectors:
    """`count` pairs of memories whose vectors are all but identical (cosine 0.99)."""
    axes = directions(2 * count)
    return np.array([row for k in range(count)
                     for row in (axes[2 * k], near(axes[2 * k], 0.99, axes[2 * k + 1]))])


# ---------------------------------------------------------------------------- who and when


def test_the_issue_s_painting_turns_of_two_speakers_are_not_merged() -> None:
    # Issue 12: these were merged into one record that dropped Melanie as the speaker.
    texts = ["Caroline: Thanks, Melanie! Is this your own painting?",
             "Melanie: Thanks, Caroline! Painting's a fun way to express my feelings.",
             "Caroline: Wow, Melanie! The colors really blend nicely.",
             "Melanie: Wow, Caroline! The colors really blend nicely."]
    axes = directions(4)
    vectors = np.array([axes[0], *(near(axes[0], 0.97, axes[n]) for n in (1, 2, 3))])
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, vectors) == []


def test_the_same_words_from_two_speakers_are_two_utterances() -> None:
    texts = ["Ann: the nightly backup finished without errors.",
             "Bob: the nightly backup finished without errors."]
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, identical_pairs(1)) == []


def test_a_turn_recorded_twice_on_its_day_is_one_memory() -> None:
    texts = ["Caroline: I went to the LGBTQ support group and it was so powerful.",
             "Caroline: I went to the LGBTQ support group, and it was so powerful!"]
    candidates = [candidate(f"m{n}", text, created_at=T0 + timedelta(minutes=n))
                  for n, text in enumerate(texts)]
    assert find_clusters(candidates, identical_pairs(1)) == [[0, 1]]


def test_one_speaker_s_turns_on_one_topic_are_not_merged() -> None:
    # Close vectors, one speaker, one day, other words: two things she said.
    texts = ["Caroline: I'm keen on counseling or working in mental health.",
             "Caroline: I'm still looking into counseling and mental health jobs, it matters."]
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    assert find_clusters(candidates, identical_pairs(1)) == []


def test_the_same_turn_said_on_another_day_is_another_utterance() -> None:
    texts = ["Melanie: Thanks, Caroline! Your kind words mean a lot.",
             "Melanie: Thanks, Caroline! Your kind words mean a lot."]
    candidates = [candidate(f"m{n}", text, created_at=T0 + timedelta(days=9 * n))
                  for n, text in enumerate(texts)]
    assert find_clusters(candidates, identical_pairs(1)) == []


def test_a_label_that_the_other_text_names_is_no_speaker() -> None:
    texts = ["Recency: exponential decay with a half-life of 30 days.",
             "Recency decays exponentially, with a half-life of 30 days.",
             "Caroline: the decay has a half-life of 30 days.",
             "The decay has a half-life of 30 days."]
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    # The second pair would lose Caroline from the merged text if the canonical one were
    # the unattributed memory.
    assert find_clusters(candidates, identical_pairs(2)) == [[0, 1]]


def test_a_question_and_its_answer_are_not_merged() -> None:
    texts = ["Which flag does the deploy of the billing service need?",
             "The deploy of the billing service needs the canary flag.",
             "Known error signature? Then the best fix patterns come first.",
             "With a known error signature, the best fix patterns come first."]
    candidates = [candidate(f"m{n}", text) for n, text in enumerate(texts)]
    # A question inside a statement does not make it a question.
    assert find_clusters(candidates, identical_pairs(2)) == [[2, 3]]


def test_a_text_relative_to_its_day_is_not_merged_with_one_of_another_day() -> None:
    texts = ["The staging deploy failed yesterday.", "The staging deploy failed yesterday.",
             "Staging deploys need the VPN.", "Staging deploys need the VPN."]
    days = [0, 5, 0, 5]
    candidates = [candidate(f"m{n}", text, created_at=T0 + timedelta(days=day))
                  for n, (text, day) in enumerate(zip(texts, days, strict=True))]
    # A timeless fact recorded again days later is still a duplicate.
    assert find_clusters(candidates, identical_pairs(2)) == [[2, 3]]


@pytest.mark.parametrize(("text", "speaker", "question"), [
    ("Caroline: Is this your own painting?", "caroline", True),
    ("Dr Smith: take two a day.", "dr smith", False),
    ("agent-7: the deploy is green.", "agent-7", False),
    ("Pin the payment SDK to 4.2: 4.3 drops refunds.", None, False),
    ("Melanie: What inspired you? [shares a photo of a sunset]", "melanie", True),
    ("Known error? Then retry.", None, False),
])
def test_speakers_and_questions_are_read_from_the_text(text: str, speaker: str | None,
                                                       question: bool) -> None:
    assert speaker_of(text) == speaker
    assert asks(text) is question


# ---------------------------------------------------------------------------- local scaling


def test_neighbour_cosines_are_the_cosine_to_the_k_th_nearest_other_row() -> None:
    axes = directions(5)
    vectors = np.array([axes[0], near(axes[0], 0.9, axes[1]), near(axes[0], 0.5, axes[2]),
                        axes[3], axes[4]])
    assert np.allclose(neighbour_cosines(vectors, [0], 1), [0.9], atol=1e-6)
    assert np.allclose(neighbour_cosines(vectors, [0, 1], 2), [0.5, 0.45], atol=1e-6)
    assert np.allclose(neighbour_cosines(vectors, [0, 3], 3), [0.0, 0.0], atol=1e-6)
    order = [4, 2, 0, 3, 1]
    assert np.allclose(neighbour_cosines(vectors[order], [2, 4], 2), [0.5, 0.45], atol=1e-6)
    with pytest.raises(ValueError, match="rank"):
        neighbour_cosines(vectors, [0], 5)


def test_local_scaling_lowers_cosines_in_a_crowd_and_raises_them_where_sparse() -> None:
    settings = ConsolidationSettings(local_scaling=0.3, reference_cosine=0.6)
    similarity = np.array([[1.0, 0.8, 0.8], [0.8, 1.0, 0.8], [0.8, 0.8, 1.0]])
    scaled = locally_scaled(similarity, np.array([0.9, 0.7, 0.2]), settings)
    # Mean backgrounds 0.8, 0.55 and 0.45 against the reference 0.6.
    assert scaled[0, 1] == pytest.approx(0.8 - 0.3 * 0.2)
    assert scaled[0, 2] == pytest.approx(0.8 + 0.3 * 0.05)
    assert scaled[1, 2] == pytest.approx(0.8 + 0.3 * 0.15)
    assert np.array_equal(scaled, scaled.T)
    assert np.array_equal(locally_scaled(similarity, np.full(3, 0.6), settings), similarity)


def isolated_or_crowded_pair(crowded: bool) -> tuple[list[ConsolidationCandidate], Vectors]:
    """Two memories at cosine 0.74 stating one fact, then either unrelated memories or six
    distinct facts of the same kind, at 0.85 to each other and to the pair (all-MiniLM-L6-v2
    puts same-topic facts that close: the settings below are its)."""
    axes = directions(16)
    texts = ["The importer retries 7 times before giving up.",
             "Before giving up, the importer makes 7 attempts."]
    if not crowded:
        vectors = [axes[0], near(axes[0], 0.74, axes[1]), *axes[2:8]]
        texts += [f"Unrelated fact number {n}." for n in range(6)]
    else:
        topic = 0.85
        centre, spread = np.sqrt(topic) * axes[0], np.sqrt(1 - topic)
        # cos(a, b) = topic + (1 - topic) * cos(a's and b's own directions) = 0.74.
        own = (0.74 - topic) / (1 - topic)
        vectors = [centre + spread * axes[10], centre + spread * near(axes[10], own, axes[11]),
                   *(centre + spread * axes[2 + n] for n in range(6)), *axes[12:16]]
        texts += [f"The {service} retries {count} times before giving up." for service, count
                  in zip(("exporter", "indexer", "mailer", "scheduler", "crawler", "uploader"),
                         (2, 3, 4, 5, 6, 8), strict=True)]
        texts += [f"Unrelated fact number {n}." for n in range(4)]
    return [candidate(f"m{n:02d}", text) for n, text in enumerate(texts)], np.array(vectors)


def test_an_isolated_pair_is_merged_at_a_cosine_that_a_crowded_topic_refuses() -> None:
    settings = ConsolidationSettings()
    candidates, vectors = isolated_or_crowded_pair(crowded=False)
    assert find_clusters(candidates, vectors, settings) == [[0, 1]]
    # Plain cosine, as before local scaling, needed 0.75 everywhere.
    plain = replace(settings, mean_cosine=0.75, local_scaling=0.0)
    assert find_clusters(candidates, vectors, plain) == []

    candidates, vectors = isolated_or_crowded_pair(crowded=True)
    assert np.allclose((vectors @ vectors.T)[0, 1:8], [0.74] + [0.85] * 6)
    assert find_clusters(candidates, vectors, settings) == []
    # The same threshold on plain cosines takes the pair: the crowd is what refuses it.
    unscaled = replace(settings, local_scaling=0.0)
    assert find_clusters(candidates, vectors, unscaled) == [[0, 1]]


@pytest.mark.parametrize(("cosine", "expected"), [(0.95, [[0, 1]]), (0.6, [])])
def test_a_partition_too_small_for_a_background_is_judged_on_plain_cosine(
        cosine: float, expected: list[list[int]]) -> None:
    axes = directions(4)
    vectors = np.array([axes[0], near(axes[0], cosine, axes[1]), axes[2], axes[3]])
    candidates = [candidate(f"m{n}") for n in range(4)]
    assert len(candidates) <= ConsolidationSettings().neighbour_rank
    assert find_clusters(candidates, vectors) == expected


def test_unusable_vectors_and_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="usable vector"):
        find_clusters([candidate("a"), candidate("b")], np.zeros((2, DIM)))
    with pytest.raises(ValueError, match="one vector per candidate"):
        find_clusters([candidate("a")], np.ones((2, DIM)))
    with pytest.raises(ValueError, match="min_cluster_size"):
        ConsolidationSettings(min_cluster_size=1)
    with pytest.raises(ValueError, match="local_scaling"):
        ConsolidationSettings(local_scaling=-0.1)
    with pytest.raises(ValueError, match="neighbour_rank"):
        ConsolidationSettings(neighbour_rank=0)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        ConsolidationSettings(reference_cosine=1.5)


# ---------------------------------------------------------------------------- merging


def three_alike() -> tuple[list[ConsolidationCandidate], Vectors]:
    """m2 is the medoid: m1 and m3 are each closer to it than to one another."""
    axes = directions(3)
    vectors = np.array([near(axes[0], 0.9, axes[1]), axes[0], near(axes[0], 0.9, axes[2])])
    members = [
        candidate("m1", "Deploys to staging need the VPN. The bastion host rejects other "
                  "traffic.", tags=("ops", "vpn"), related_ids=("r1", "r2", "m2"),
                  review_state="draft", title="VPN", created_at=T0 + timedelta(hours=2),
                  source_event_ids=("e1",)),
        candidate("m2", "Staging deploys need the VPN.", tags=("deploy", "ops"),
                  related_ids=("r2", "r3"), review_state="deprecated", title="Staging deploys",
                  created_at=T0, source_event_ids=("e2", "e2b")),
        candidate("m3", "Deploys to staging need the VPN; the bastion host logs every "
                  "connection for 90 days.", tags=("audit",), related_ids=("r3", "r2", "r4"),
                  created_at=T0 + timedelta(hours=1), source_event_ids=("e3",)),
    ]
    return members, vectors


def test_the_medoid_text_is_the_canonical_statement_followed_by_distinct_facts() -> None:
    members, vectors = three_alike()
    merged = merge_cluster(members, vectors)
    assert merged.medoid_id == "m2"
    assert merged.text.splitlines() == [
        "Staging deploys need the VPN.",
        # m3 (older than m1): its sentence names a fact the canonical one does not.
        "Deploys to staging need the VPN; the bastion host logs every connection for 90 days.",
        # m1: its first sentence is a near-duplicate of the canonical one, its second is new.
        "The bastion host rejects other traffic.",
    ]
    assert merged.title == "Staging deploys"


def test_tags_related_ids_provenance_and_review_state_follow_the_rules() -> None:
    members, vectors = three_alike()
    merged = merge_cluster(members, vectors)
    assert merged.tags == ("deploy", "ops", "audit", "vpn")
    # r2 three times, r3 twice, then r4 and r1 by first appearance (m2, m3, m1); m2 is a member.
    assert merged.related_ids == ("r2", "r3", "r4", "r1")
    assert merged.member_ids == ("m1", "m2", "m3")
    assert merged.source_event_ids == ("e2", "e2b", "e3", "e1")
    assert merged.provenance == ("m1", "m2", "m3", "e2", "e2b", "e3", "e1")
    assert merged.review_state == "approved"
    assert merged.created_at == T0 + timedelta(hours=2)


def test_a_merge_keeps_every_member_s_speaker_agent_source_and_time() -> None:
    axes = directions(2)
    members = [
        candidate("m2", "Caroline: I went to the support group today.", source_ref="D1:3",
                  created_at=T0 + timedelta(minutes=1)),
        candidate("m1", "Caroline: I went to the support group today!", source_ref="D1:3",
                  created_at=T0),
        candidate("m3", "Caroline: I went to the support group, today.", source_ref=None,
                  created_at=T0 + timedelta(minutes=2)),
    ]
    vectors = np.array([axes[0], near(axes[0], 0.99, axes[1]), axes[0]])
    merged = merge_cluster(members, vectors)
    assert [a.record_id for a in merged.attributions] == ["m1", "m2", "m3"]
    assert {a.speaker for a in merged.attributions} == {"caroline"}
    assert [a.source_ref for a in merged.attributions] == ["D1:3", "D1:3", None]
    assert [a.occurred_at for a in merged.attributions] == [
        T0, T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]
    assert merged.member_source_refs == ("D1:3",)
    assert merged.attributions[0].as_json() == {
        "record_id": "m1", "speaker": "caroline", "agent_id": None, "source_ref": "D1:3",
        "occurred_at": T0.isoformat()}


def test_related_ids_are_capped_most_frequent_first() -> None:
    axes = directions(2)
    many = tuple(f"r{n:02d}" for n in range(15))
    members = [candidate("a", related_ids=many),
               candidate("b", related_ids=("r14", "r13"))]
    merged = merge_cluster(members, np.array([axes[0], near(axes[0], 0.9, axes[1])]))
    assert len(merged.related_ids) == MAX_RELATED_IDS
    assert merged.related_ids[:2] == ("r13", "r14")
    assert merged.related_ids[2:] == many[:8]


def test_ties_for_the_medoid_go_to_the_smallest_record_id() -> None:
    axes = directions(2)
    vectors = np.array([axes[0], near(axes[0], 0.9, axes[1])])
    members = [candidate("mem_b", "Second."), candidate("mem_a", "First.")]
    assert merge_cluster(members, vectors).medoid_id == "mem_a"
    assert merge_cluster(members[::-1], vectors[::-1]).medoid_id == "mem_a"


def test_the_replacement_is_the_same_whatever_the_member_order() -> None:
    members, vectors = three_alike()
    merged = merge_cluster(members, vectors)
    assert merge_cluster(members[::-1], vectors[::-1]) == merged
    assert merged.record_id == merged_record_id("team-a", ["m3", "m1", "m2"])
    assert merged.record_id.startswith("mem_") and len(merged.record_id) == 28
    assert merged_record_id("team-b", ["m1", "m2", "m3"]) != merged.record_id
    assert merged_record_id("team-a", ["m1", "m2"]) != merged.record_id


def test_the_merged_text_stays_within_what_a_memory_write_accepts() -> None:
    axes = directions(12)
    members = [candidate(f"m{n:02d}", f"Fact {n} is about subject {n}. " + "x" * 999)
               for n in range(12)]
    vectors = np.array([near(axes[0], 0.99, axes[n]) if n else axes[0] for n in range(12)])
    assert len(merge_cluster(members, vectors).text) <= MAX_TEXT_CHARS


def test_a_merge_needs_two_distinct_members() -> None:
    with pytest.raises(ValueError, match="at least two"):
        merge_cluster([candidate("a")], directions(1))
    with pytest.raises(ValueError, match="twice"):
        merge_cluster([candidate("a"), candidate("a")], directions(2))


# ---------------------------------------------------------------------------- sentences


def test_sentences_split_at_line_breaks_and_sentence_ends_only() -> None:
    assert sentences("Use auth.py line 87. Then retry.\nDone!  Next") == [
        "Use auth.py line 87.", "Then retry.", "Done!", "Next"]


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("Deploys to staging need the VPN.", "Staging deploys need the VPN.", True),
    ("Retry 10 times before giving up.", "Retry ten times before giving up.", True),
    ("Retry 10 times before giving up.", "Retry 12 times before giving up.", False),
    ("Memory writes are mandatory.", "Memory writes are not mandatory.", False),
    ("Memory writes are mandatory.", "Memory writes are no longer mandatory.", False),
    ("Deploys to staging need the VPN.", "Deploys to production need a change ticket.", False),
])
def test_near_duplicate_sentences(first: str, second: str, expected: bool) -> None:
    assert near_duplicate(first, second, ConsolidationSettings().sentence_jaccard) is expected


# ---------------------------------------------------------------------------- re-runs


def test_a_merge_whose_members_are_still_live_is_finished_not_merged_again() -> None:
    members, vectors = three_alike()
    merged = merge_cluster(members, vectors)
    as_live = candidate(merged.record_id, merged.text, source_event_ids=merged.provenance)
    other = candidate("m9")
    assert pending_supersessions([*members, as_live, other]) == {
        "m1": merged.record_id, "m2": merged.record_id, "m3": merged.record_id}
    assert pending_supersessions([as_live, other]) == {}


@pytest.mark.parametrize("first, second", [
    ("The cleanup job runs before the nightly deploy.",
     "The cleanup job runs after the nightly deploy."),
    ("Feature flags are enabled for the mobile apps.",
     "Feature flags are disabled for the mobile apps."),
    ("The search cluster accepts writes from the internal network.",
     "The search cluster accepts writes from the external network."),
])
def test_opposite_words_tell_two_facts_apart(first: str, second: str) -> None:
    a, b = candidate("a", first), candidate("b", second)
    assert not restates(a, b)
    assert restates(a, candidate("c", first.replace("The ", "the ", 1)))


# ---------------------------------------------------------------------------- negation


@pytest.mark.parametrize("first, second", [
    # Issue 18: a draft merged these two.
    ("Deploys need the VPN.",
     "Deploys go through the bastion host; the VPN is no longer needed."),
    ("The nightly export job runs on weekends.",
     "The nightly export job does not run on weekends."),
    ("Priya wants the weekly report as a PDF attachment.",
     "Priya doesn\u2019t want the weekly report as a PDF attachment anymore."),
    ("The CI pipeline caches Docker layers between builds.",
     "The CI pipeline stopped caching Docker layers between builds."),
    ("Customer exports include deleted accounts.",
     "Customer exports never include deleted accounts."),
    ("The mobile app sends analytics events only after the user consents.",
     "The mobile app sends analytics events without the user's consent."),
    ("The search index can be rebuilt without downtime.",
     "The search index cannot be rebuilt without downtime."),
    ("Sam wants code review comments in the pull request, not in chat.",
     "Sam wants code review comments in chat, not in the pull request."),
    ("Production allows root logins.",
     "Neither staging nor production allows root logins."),
])
def test_a_text_that_denies_what_the_other_asserts_is_another_fact(first: str,
                                                                  second: str) -> None:
    a, b = candidate("a", first), candidate("b", second)
    assert not restates(a, b) and not restates(b, a)
    assert restates(a, candidate("c", first.replace(".", "!")))


@pytest.mark.parametrize("first, second", [
    # Both deny the same thing, in another word order.
    ("The weekly sync is not held during the holiday freeze.",
     "During the holiday freeze the weekly sync is not held."),
    ("Guest users cannot export reports.", "Reports cannot be exported by guest users."),
    ("Fatima stopped reviewing frontend pull requests.",
     "Fatima no longer reviews frontend pull requests."),
    # A denial of what the other does not say is a detail added.
    ("Deploys need the VPN.", "Deploys need the VPN, not the bastion."),
    # Absence said in two ways; a contrast that denies alike.
    ("Re-embed any memory missing a usable vector before clustering.",
     "Memories without a usable vector get embedded again before clustering."),
    ("Memory retrieval stays semantic instead of exact string matching.",
     "Memory retrieval is semantic, not exact string matching."),
    # "not only" negates nothing; "no other" restates "only".
    ("Not only staging but production needs the VPN.", "Staging needs the VPN."),
    ("The staging database only accepts connections over the office VPN.",
     "Over the office VPN only: the staging database accepts no other connections."),
])
def test_negations_that_deny_nothing_the_other_asserts_do_not_tell_facts_apart(
        first: str, second: str) -> None:
    assert restates(candidate("a", first), candidate("b", second))


def test_a_negation_denies_what_follows_it_in_its_clause() -> None:
    said = polarity("Deploys go through the bastion host; the VPN is no longer needed.")
    assert said.denied == {"need"}, "the VPN is what it is about, not what it denies"
    assert said.asserted == {"deploy", "go", "bastion", "host", "vpn"}
    assert polarity("The search index cannot be rebuilt without downtime.") == polarity(
        "The search index cannot be rebuilt without downtime!")
    doubled = polarity("The search index cannot be rebuilt without downtime.")
    assert doubled.denied == {"rebuilt"} and "downtim" in doubled.asserted
    assert polarity("The VPN is needed for deploys, not for reads.").denied == {"read"}
    assert polarity("Retries never reach 3.").denied == {"reach"}, "numbers are anchors"


def test_a_denial_vetoes_only_a_text_it_mostly_restates() -> None:
    affirmed = polarity("Deploys to staging need the VPN.")
    negated = polarity("The VPN is no longer needed for staging deploys.")
    assert contradicts(affirmed, negated, 0.8) and contradicts(negated, affirmed, 0.8)
    # Most of what the longer text says is not in the denial: no veto.
    longer = polarity("Deploys to staging need the VPN, a change ticket, two approvals and "
                      "a green build on main.")
    assert not contradicts(longer, negated, 0.8)
    assert contradicts(longer, negated, 0.1)


def test_the_negation_coverage_is_a_share() -> None:
    with pytest.raises(ValueError, match="negation_coverage"):
        ConsolidationSettings(negation_coverage=0)


# ---------------------------------------------------------------------------- corrections


@pytest.mark.parametrize("fact, correction", [
    # Issue 37: a correction was folded into the fact it corrects.
    ("Marta owns the search relevance service.",
     "Ownership of the search relevance service passed from Marta to Idris."),
    ("Marta owns the search relevance service.",
     "Idris took over the search relevance service from Marta."),
    ("The build agents run Ubuntu on the shared runners.",
     "The build agents were upgraded to a newer Ubuntu on the shared runners."),
    ("Hotfixes are branched from the maintenance line.",
     "Hotfixes are now branched from the trunk."),
    ("The release checklist lives in the wiki.",
     "The release checklist was replaced by a template in the tracker."),
    # another holder, no cue: a name is no anchor
    ("The checkout service is owned by Renata.", "The checkout service is owned by Jules."),
    ("Sofia speaks Portuguese.", "Sofia speaks Japanese."),
])
def test_a_correction_is_not_what_it_corrects(fact: str, correction: str) -> None:
    a, b = candidate("a", fact), candidate("b", correction)
    assert not restates(a, b) and not restates(b, a)
    assert restates(b, candidate("c", correction[:-1] + "!"))


@pytest.mark.parametrize("first, second", [
    # One change, said twice.
    ("Fenna took over the growth experiments from Caspar.",
     "The growth experiments were taken over by Fenna from Caspar."),
    ("The nightly reindex was moved to 04:00 UTC.", "We moved the nightly reindex to 04:00 UTC."),
    ("The mobile crash reporter was replaced by Bugsnag.",
     "Bugsnag replaced the mobile crash reporter."),
    # "now" beside other words says how a thing is, not that it changed.
    ("auth.py line 87 now has the corrected logic for the token expiration bug.",
     "Resolved the token expiration bug in the authentication module. Updated logic in "
     "auth.py line 87."),
    # Code handing a value on, or a standby taking over, is no change of holder.
    ("The related-card UUIDs passed to write_memory are checked first.",
     "write_memory checks the related-card UUIDs it is given first."),
    # Named things listed otherwise beside other words are the vectors' business.
    ("MyApp will use FastAPI and PostgreSQL; Django was rejected as too opinionated.",
     "Tech stack for MyApp: FastAPI with PostgreSQL. We ruled out Django as too "
     "opinionated."),
])
def test_restatements_of_a_change_or_in_other_words_still_restate(first: str,
                                                                  second: str) -> None:
    assert restates(candidate("a", first), candidate("b", second))


@pytest.mark.parametrize("text, says", [
    ("The analytics cluster was upgraded to Elasticsearch 8.13.", True),
    ("We moved the nightly reindex to 04:00 UTC.", True),
    ("Tomasz handed the search indexer over to Ines.", True),
    ("Ownership passed from Hiroshi to Leona.", True),
    ("Noah took over the data platform team.", True),
    ("Dario is the new owner of the fraud rules engine.", True),
    ("Each HDBSCAN cluster is handed to the maintenance agent.", False),
    ("The token is passed to the worker.", False),
    ("If a node dies, a standby takes over at once.", False),
    ("Adaptive scoring can be switched off by setting the boost to 0.", False),
    ("Releases are cut from the develop branch.", False),
])
def test_what_says_that_something_changed(text: str, says: bool) -> None:
    assert says_change(text) is says


def test_names_leave_out_function_words_calendar_names_and_identifiers() -> None:
    assert names_in("Kai's office is in Berlin; on Mondays The JWTManager uses BM25 and "
                    "Mem0 with Vault.") == {"kai", "berlin", "vault"}
