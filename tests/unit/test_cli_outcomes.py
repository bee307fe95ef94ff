"""What the CLI shows of a write's outcome (memstream_client/cli/commands.py): `outcome EVENT_ID`,
and a review's decision, each field on its line within 80 columns, what the outcome means, a
record only once one holds the write, and while pending, on stderr, the command that reads it
later."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest

from memstream_client.cli.commands import Output, outcome, parser, review
from memstream_client.cli.errors import EXIT_OTHER
from memstream_client.sdk import Config, MemoryClient, Retries

EVENT = "0f3c2a9b8d7e4f6a8b9c0d1e2f3a4b5c"


def answered(**decided: Any) -> dict[str, Any]:
    return {"namespace": "team-a", "event_id": EVENT,
            "outcome_url": f"/v1/writes/{EVENT}?namespace=team-a", **decided}


def shown(command: Any, argv: list[str], answer: dict[str, Any]) -> tuple[int, str, str, Any]:
    """The command run with `argv` against a worker that answers `answer` to every write and
    read of an outcome (and an empty review queue): its exit code, stdout, stderr, and the
    requests it sent."""
    sent: list[httpx.Request] = []

    def worker(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.path == "/v1/review-queue":
            return httpx.Response(200, json={"namespace": "team-a", "items": []})
        # A write answers 202 while pending; a read of its outcome, 200 whatever it is.
        pending = answer["outcome"] == "pending" and request.method == "POST"
        return httpx.Response(202 if pending else 200, json=answer)

    out, err = io.StringIO(), io.StringIO()
    output = Output(out, err, "--json" in argv)
    output.width = 80
    args = parser().parse_args(argv)
    with MemoryClient("http://worker", key="k", namespace="team-a", env={},
                      retries=Retries(attempts=0),
                      transport=httpx.MockTransport(worker)) as client:
        code = command(client, args, Config("http://worker", "k", "team-a"), output)
    return code, out.getvalue(), err.getvalue(), sent


@pytest.mark.parametrize(("decided", "lines"), [
    ({"outcome": "stored", "record_id": "mem_4c1d2e3f4a5b6c7d8e9f0a1b", "version": 1,
      "decided_at": "2026-11-28T10:00:00+00:00"},
     [f"event:   {EVENT}", "outcome: stored", "record:  mem_4c1d2e3f4a5b6c7d8e9f0a1b",
      "version: 1", "decided: 2026-11-28 10:00:00"]),
    ({"outcome": "restated", "record_id": "mem_4c1d2e3f4a5b6c7d8e9f0a1b", "version": 3,
      "decided_at": "2026-11-28T10:00:00+00:00"},
     [f"event:   {EVENT}", "outcome: restated", "record:  mem_4c1d2e3f4a5b6c7d8e9f0a1b",
      "version: 3", "decided: 2026-11-28 10:00:00",
      "restated: mem_4c1d2e3f4a5b6c7d8e9f0a1b already held this, so the write was kept",
      "in it (version 3), not as a new memory"]),
    ({"outcome": "refused", "reason": "only_a_secret",
      "decided_at": "2026-11-28T10:00:00+00:00"},
     [f"event:   {EVENT}", "outcome: refused", "reason:  only_a_secret",
      "decided: 2026-11-28 10:00:00",
      "refused (only_a_secret): nothing but a secret, which memory never keeps; nothing",
      "was stored"]),
    ({"outcome": "dead_lettered", "reason": "broken_reference",
      "detail": "related_ids not found in namespace 'team-a': mem_nothing",
      "decided_at": "2026-11-28T10:00:00+00:00"},
     [f"event:   {EVENT}", "outcome: dead_lettered", "reason:  broken_reference",
      "detail:  related_ids not found in namespace 'team-a': mem_nothing",
      "decided: 2026-11-28 10:00:00",
      "dead-lettered (broken_reference): related_ids not found in namespace 'team-a':",
      "mem_nothing; nothing was changed"]),
    ({"outcome": "proposed", "record_id": "mem_4c1d2e3f4a5b6c7d8e9f0a1b", "version": 1,
      "diff_id": EVENT, "decided_at": "2026-11-28T10:00:00+00:00"},
     [f"event:   {EVENT}", "outcome: proposed", "record:  mem_4c1d2e3f4a5b6c7d8e9f0a1b",
      "version: 1", f"diff:    {EVENT}", "decided: 2026-11-28 10:00:00",
      "proposed: mem_4c1d2e3f4a5b6c7d8e9f0a1b is protected, so the change waits for a",
      f"reviewer as pending diff {EVENT}"]),
])
def test_an_outcome_is_shown_field_by_field_within_80_columns(
        decided: dict[str, Any], lines: list[str]) -> None:
    code, out, err, sent = shown(outcome, ["outcome", EVENT], answered(**decided))
    assert (code, err) == (0, "")
    assert out.splitlines() == lines
    assert all(len(line) <= 80 for line in out.splitlines())
    (read,) = sent
    assert (read.url.path, read.url.params.get("wait")) == (f"/v1/writes/{EVENT}", None)


def test_a_pending_outcome_names_no_record_and_says_how_to_read_it_later() -> None:
    # A pending change's answer names the record it is for: none holds the change yet.
    code, out, err, sent = shown(outcome, ["outcome", EVENT, "--wait", "3"], answered(
        outcome="pending", record_id="mem_4c1d2e3f4a5b6c7d8e9f0a1b"))
    assert code == 0
    assert out.splitlines() == [f"event:   {EVENT}", "outcome: pending"]
    assert err == (f"pending: the worker has not decided it yet: memstream outcome {EVENT} "
                   "-n team-a --wait 10 reads it later\n")
    assert sent[0].url.params["wait"] == "3.0"
    code, out, _, _ = shown(outcome, ["--json", "outcome", EVENT], answered(outcome="pending"))
    assert json.loads(out)["outcome"] == "pending"


def test_a_review_shows_what_the_worker_made_of_it_and_a_refused_one_fails() -> None:
    code, out, _, sent = shown(review, ["review", "approve", "mem_draft"], answered(
        outcome="approved", record_id="mem_draft", version=2,
        decided_at="2026-11-28T10:00:00+00:00"))
    assert code == 0
    assert out.splitlines()[:3] == ["approve of record mem_draft:", f"event:   {EVENT}",
                                    "outcome: approved"]
    assert "record:  mem_draft" in out.splitlines()
    (_, posted) = sent
    assert (posted.url.path, posted.url.params["wait"]) == ("/v1/reviews", "5.0")
    code, out, _, _ = shown(review, ["review", "reject", "mem_draft"], answered(
        outcome="dead_lettered", reason="invalid_transition",
        detail="mem_draft is not a draft", decided_at="2026-11-28T10:00:00+00:00"))
    assert code == EXIT_OTHER
    assert out.splitlines()[-2:] == [
        "dead-lettered (invalid_transition): mem_draft is not a draft; nothing was",
        "changed"]
