"""The Beads rules on real files (tests/fixtures/beads/: excerpts of steveyegge/beads' own
issues.jsonl, one per format version)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from processors.planning.beads import (
    BeadsFormatError,
    Change,
    Claim,
    Close,
    FollowUp,
    Release,
    UnknownItem,
    adaptive_length,
    apply,
    go_time,
    listing,
    parse,
    planning_context,
    serialize,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "beads"
VERSIONS = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
AT = datetime(2026, 11, 25, 2, 30, 0, 123400, tzinfo=UTC)


def fixture(version: str) -> str:
    return (FIXTURES / version / "issues.jsonl").read_text(encoding="utf-8")


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_round_trips_byte_for_byte(version: str) -> None:
    text = fixture(version)
    beads = parse(text)
    assert beads.items
    assert serialize(beads) == text


def test_styles_and_order_are_read_from_the_file() -> None:
    assert (parse(fixture("beads-2025-12")).style, parse(fixture("beads-2025-12")).sorted_by_id
            ) == ("bd", True)
    assert parse(fixture("beads-2026-02")).style == "spaced"
    assert not parse(fixture("beads-2025-12").replace("bd-05a8", "bd-zzzz")).sorted_by_id


def test_a_corrupt_line_is_named() -> None:
    lines = fixture("beads-2025-10").split("\n")
    lines[4] = lines[4][:40]
    with pytest.raises(BeadsFormatError, match="line 5: not JSON"):
        parse("\n".join(lines))
    with pytest.raises(BeadsFormatError, match="line 2: `title`"):
        parse('{"id":"bd-1","title":"x"}\n{"id":"bd-2"}\n')
    with pytest.raises(BeadsFormatError, match="line 1: `dependencies`"):
        parse('{"id":"bd-1","title":"x","dependencies":[{"type":"blocks"}]}\n')


def test_the_planning_context_of_an_item_with_an_open_blocker() -> None:
    beads = parse(fixture("beads-2025-12"))
    context = planning_context(beads, "bd-2vh3.5")
    assert context.item.title == "Tier 4: Auto-squash on molecule completion"
    assert not context.ready
    assert [(b.item_id, b.kind, b.open) for b in context.blockers] == \
        [("bd-2vh3.4", "blocks", True)]
    # .4's own blocker .3 is closed, .6 has none; .1-.3 are closed.
    assert [item.id for item in context.ready_siblings] == ["bd-2vh3.4", "bd-2vh3.6"]
    assert [(dep.kind, item.status if item else None) for dep, item in context.dependencies] \
        == [("parent-child", "open"), ("blocks", "open")]
    ready = planning_context(beads, "bd-2vh3.4")
    assert ready.ready and [b.open for b in ready.blockers] == [False]


def test_siblings_by_the_exports_parent_field_and_acceptance_criteria() -> None:
    beads = parse(fixture("beads-2026-02"))
    context = planning_context(beads, "bd-wisp-dm5w3")
    # The molecule's steps block one another in a chain: only its first step is ready.
    assert [item.id for item in context.ready_siblings] == ["bd-wisp-y7xh7"]
    early = parse(fixture("beads-2025-10"))
    with pytest.raises(UnknownItem):
        planning_context(early, "bd-999")
    criteria = parse(json.dumps({"id": "x-1", "title": "t", "description":
                                 "Do it.\n\n## Acceptance Criteria\n- it works\n\n## Notes\nn"}))
    assert criteria.items[0].acceptance_criteria == "- it works"
    field = parse(json.dumps({"id": "x-1", "title": "t", "acceptance_criteria": "green"}))
    assert field.items[0].acceptance_criteria == "green"


def test_listing_says_readiness_and_open_blockers() -> None:
    rows = {item.id: (ready, [b.item_id for b in open_blockers])
            for item, ready, open_blockers in listing(parse(fixture("beads-2025-12")))}
    assert rows["bd-2vh3.5"] == (False, ["bd-2vh3.4"])
    assert rows["bd-2vh3.4"] == (True, [])
    assert rows["bd-2vh3.2"] == (False, [])  # closed
    # A deleted item (bd's old tombstone, as bd-2vh3.1 is) holds nothing back.
    assert rows["bd-2vh3.1"] == (False, [])
    text = fixture("beads-2025-12")
    blocker = next(line for line in text.splitlines() if line.startswith('{"id":"bd-2vh3.4"'))
    deleted = parse(text.replace(blocker, blocker.replace('"status":"open"',
                                                          '"status":"tombstone"')))
    assert planning_context(deleted, "bd-2vh3.5").ready



def test_a_run_claims_closes_and_files_follow_ups_as_bd_writes_them() -> None:
    text = fixture("beads-2025-12")
    beads = parse(text)
    changes: list[Change] = [Claim("bd-2vh3.5", "agent-7", AT),
               Close("bd-2vh3.5", "Auto-squash landed", AT),
               FollowUp("bd-2vh3.5", "Document auto-squash", "In docs/squash.md", "agent-7", AT)]
    after = apply(beads, changes)
    written = serialize(after)
    old_lines, new_lines = text.splitlines(), written.splitlines()
    assert len(new_lines) == len(old_lines) + 1
    changed = [line for line in new_lines if line not in old_lines]
    closed = json.loads(next(line for line in changed if '"id":"bd-2vh3.5"' in line))
    assert list(closed) == ["id", "title", "description", "status", "priority", "issue_type",
                            "assignee", "created_at", "updated_at", "started_at", "closed_at",
                            "close_reason", "dependencies"]
    assert (closed["status"], closed["assignee"], closed["closed_at"], closed["close_reason"]) \
        == ("closed", "agent-7", "2026-11-25T02:30:00.1234Z", "Auto-squash landed")
    (filed,) = [json.loads(line) for line in changed if '"id":"bd-2vh3.5"' not in line]
    assert filed["id"].startswith("bd-") and len(filed["id"]) == len("bd-") + 3
    assert list(filed) == ["id", "title", "description", "status", "priority", "issue_type",
                           "created_at", "created_by", "updated_at", "dependencies"]
    assert filed["dependencies"] == [{
        "issue_id": filed["id"], "depends_on_id": "bd-2vh3.5", "type": "discovered-from",
        "created_at": "2026-11-25T02:30:00.1234Z", "created_by": "agent-7"}]
    # A sorted file stays sorted, and applying the same changes again changes nothing.
    ids = [json.loads(line)["id"] for line in new_lines]
    assert ids == sorted(ids)
    assert serialize(apply(after, changes)) == written


def test_sequential_ids_take_the_next_number_and_a_release_reopens() -> None:
    beads = parse(fixture("beads-2025-10"))
    released_changes: list[Change] = [FollowUp("bd-1", "Next", "", "memstream", AT),
                                      Claim("bd-2", "a", AT),
                                      Release("bd-2", "run r1 failed", AT)]
    after = apply(beads, released_changes)
    assert after.item("bd-24").title == "Next"
    released = after.item("bd-2")
    assert (released.status, released.assignee, released.fields["notes"]) == \
        ("open", None, "run r1 failed")


def test_the_spaced_style_is_kept_and_unsorted_files_append() -> None:
    text = fixture("beads-2026-02")
    unsorted = parse(text.replace("bd-wisp-3tmpl", "bd-wisp-zzzzz"))
    after = apply(unsorted, [FollowUp("bd-wisp-y7xh7", "Follow", "d", "m", AT)])
    written = serialize(after).splitlines()
    assert written[:-1] == text.replace("bd-wisp-3tmpl", "bd-wisp-zzzzz").splitlines()
    assert written[-1].startswith('{"id": "bd-wisp-') and '"type": "discovered-from"' in \
        written[-1]


def test_ids_and_times_as_bd_makes_them() -> None:
    assert [adaptive_length(n) for n in (0, 100, 300, 2000, 10**6)] == [3, 3, 4, 5, 8]
    assert go_time(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05Z"
