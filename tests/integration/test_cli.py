"""The `memstream` command line against the real stack, run as a user runs it (a process of
its own, configured by the environment or a config file), and the `/v1/changes` feed its
`tail` reads."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.kafka_io import Received, TopicReader
from harness.stack import Stack, Worker
from publisher.kafka_publisher import Publisher

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
TEXT = "The billing deploy needs the office VPN; the bastion host rejects other traffic."
NEW_TEXT = "The billing deploy goes through the bastion host; the VPN is no longer needed."


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines()]


# The console script of client/pyproject.toml's [project.scripts].
MEMSTREAM = Path(sys.executable).parent / "memstream"


def memstream(*args: str, url: str, key: str | None, home: Path,
              **env: str) -> Ran:
    """`memstream ARGS`, the command the set-up installs beside the interpreter, in a process
    of its own, with only these settings: no config file of the user's is read (HOME is
    `home`), and it runs from elsewhere than the checkout."""
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("MEMSTREAM_")}
    environment.update(HOME=str(home), COLUMNS="200", MEMSTREAM_URL=url, **env)
    if key is not None:
        environment["MEMSTREAM_API_KEY"] = key
    done = subprocess.run([str(MEMSTREAM), *args], cwd=home, env=environment,
                          capture_output=True, text=True, timeout=60)
    return Ran(done.returncode, done.stdout, done.stderr)


def changes_of(messages: list[Received], record_id: str) -> list[tuple[str, int]]:
    return [(body["change"], body["version"]) for body in map(json.loads, (
        m.value for m in messages)) if body["record_id"] == record_id]


async def announced(updates: TopicReader, record_id: str,
                    expected: list[tuple[str, int]]) -> None:
    await updates.wait_for(lambda messages: len(changes_of(messages, record_id)) >= len(expected))
    assert changes_of(updates.messages, record_id) == expected


@pytest.fixture
def run(worker: Worker, stack: Stack, tmp_path: Path) -> Any:
    def ran(*args: str, key: str | None = stack.operator_key, **env: str) -> Ran:
        return memstream(*args, url=worker.base_url, key=key, home=tmp_path, **env)
    return ran


async def test_changes_feed_order_cursor_visibility_and_keys(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
        shared = await publisher.write_memory(namespace, TEXT)
        await announced(updates, shared, [("created", 1)])
        finns = await publisher.write_memory(namespace, "Finn prefers the blue staging cluster.",
                                             scope="personal", agent_id="finn")
        await announced(updates, finns, [("created", 1)])
        rubys = await publisher.write_memory(namespace, "Ruby keeps a runbook for port 5432.",
                                             scope="personal", agent_id="ruby")
        await announced(updates, rubys, [("created", 1)])

    answer = await http.get("/v1/changes", params={"namespace": namespace})
    assert answer.status_code == 200, answer.text
    feed = answer.json()
    assert [(c["record_id"], c["version"], c["change"]) for c in feed["changes"]] == [
        (shared, 1, "created"), (finns, 1, "created"), (rubys, 1, "created")]
    first = feed["changes"][0]
    assert (first["actor"], first["record_kind"], first["scope"], first["excerpt"]) == (
        "orchestrator", "memory", "shared", TEXT)
    assert feed["next"] == feed["changes"][-1]["cursor"]

    after_first = await http.get("/v1/changes", params={
        "namespace": namespace, "after": first["cursor"]})
    assert [c["record_id"] for c in after_first.json()["changes"]] == [finns, rubys]
    one = (await http.get("/v1/changes", params={"namespace": namespace, "limit": "1"})).json()
    assert [c["record_id"] for c in one["changes"]] == [shared]
    assert one["next"] == first["cursor"]
    caught_up = (await http.get("/v1/changes", params={
        "namespace": namespace, "after": feed["next"]})).json()
    assert caught_up == {"namespace": namespace, "changes": [], "next": feed["next"]}

    def ids_for(token: str) -> list[str]:
        found = httpx.get(f"{worker.base_url}/v1/changes", params={"namespace": namespace},
                          headers={"Authorization": f"Bearer {token}"})
        assert found.status_code == 200, found.text
        return [c["record_id"] for c in found.json()["changes"]]

    # A key bound to finn lists finn's personal memory, never ruby's; an unbound reader
    # neither.
    assert ids_for(stack.make_key("--namespace", namespace, "--perm", "read",
                                  "--agent", "finn")) == [shared, finns]
    assert ids_for(stack.make_key("--namespace", namespace, "--perm", "read")) == [shared]

    no_key = httpx.get(f"{worker.base_url}/v1/changes", params={"namespace": namespace})
    assert no_key.status_code == 401
    elsewhere = stack.make_key("--namespace", f"{namespace}-other", "--perm", "read")
    assert httpx.get(f"{worker.base_url}/v1/changes", params={"namespace": namespace},
                     headers={"Authorization": f"Bearer {elsewhere}"}).status_code == 403
    for bad in ({"after": "not-a-cursor"}, {"limit": "0"}):
        refused = await http.get("/v1/changes", params={"namespace": namespace, **bad})
        assert refused.status_code == 400, refused.text


async def test_cli_reads_reviews_and_tails_a_memory(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, run: Any,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
        record_id = await publisher.write_memory(namespace, TEXT, tags=["ops"],
                                                 memory_type="fact", title="Billing deploys")
        await announced(updates, record_id, [("created", 1)])

        table = run("search", "does the billing deploy need the VPN?", "-n", namespace)
        assert table.code == 0, table.err
        header, *rows = table.out.splitlines()
        assert header.split() == ["#", "record", "kind", "relevance"]
        assert rows[0].split()[:3] == ["1", record_id, "memory"]
        # The text under its row.
        assert rows[1].startswith("    Billing deploys: The billing deploy needs")

        found = run("--json", "search", "billing VPN", "-n", namespace, "--tag", "ops")
        assert [hit["record_id"] for hit in found.json()["hits"]] == [record_id]
        assert run("search", "billing VPN", "-n", namespace, "--tag", "nope", "--json"
                   ).json()["hits"] == []
        misspelled = run("search", "billing VPN", "-n", f"{namespace}x")
        assert misspelled.code == 0, misspelled.err
        assert f"namespace '{namespace}x' holds no records" in misspelled.err
        assert "holds no records" not in run("search", "payroll", "-n", namespace).err

        pack = run("context", "deploy billing", "-n", namespace, "--budget", "300", "--json")
        assert [item["record_id"] for item in pack.json()["sections"]["long_term"]] == \
            [record_id]
        assert pack.json()["tokens"] <= 300
        shown_pack = run("context", "deploy billing", "-n", namespace)
        assert f"long_term  {record_id}" in shown_pack.out
        assert re.fullmatch(r"\d+ tokens of 2000", shown_pack.err.strip()), shown_pack.err

        shown = run("show", record_id, "-n", namespace)
        assert shown.code == 0, shown.err
        assert f"record:        {record_id}" in shown.out
        assert "producer:      orchestrator" in shown.out and TEXT in shown.out

        # An update of an approved memory waits for review: `review` lists it.
        diff_id = await publisher.update_memory(namespace, record_id, expected_version=1,
                                                text=NEW_TEXT)
        await announced(updates, record_id, [("created", 1), ("proposed", 1)])
    pending = run("review", "-n", namespace)
    assert pending.code == 0, pending.err
    assert pending.out.splitlines()[0].split()[:3] == ["kind", "id", "of"]
    assert pending.out.splitlines()[1].split()[:3] == ["pending_diff", diff_id, record_id]
    assert "text=The billing deploy goes" in pending.out
    assert [d["id"] for d in run("review", "-n", namespace, "--json"
                                 ).json()["items"]] == [diff_id]

    before_review = run("tail", "-n", namespace, "--json")
    assert [(c["record_id"], c["version"], c["change"]) for c in before_review.json_lines()] \
        == [(record_id, 1, "created")]
    cursor = before_review.json_lines()[-1]["cursor"]
    assert f"--after {cursor}" in before_review.err

    approved = run("review", "approve", diff_id, "-n", namespace, "--note", "checked")
    assert approved.code == 0, approved.err
    # It waits for the worker: what it shows is the decision applied, as version 2.
    assert approved.out.splitlines()[0] == f"approve of diff {diff_id}:"
    assert {"outcome: approved", f"record:  {record_id}", "version: 2"} <= set(
        approved.out.splitlines())
    await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2)])

    versions = run("history", record_id, "-n", namespace, "--json").json()["versions"]
    assert [(v["version"], v["change"], v["text"]) for v in versions] == [
        (1, "created", TEXT), (2, "approved", NEW_TEXT)]
    # The reviewer is the key the CLI used.
    assert versions[1]["actor"].startswith("key:")
    history_table = run("history", record_id, "-n", namespace)
    assert [line.split()[0] for line in history_table.out.splitlines()[1:]
            if not line.startswith(" ")] == ["1", "2"]

    diffed = run("diff", record_id, "-n", namespace)
    assert diffed.out.splitlines()[0] == f"{record_id}: version 1 to 2"
    assert f"-{TEXT}" in diffed.out and f"+{NEW_TEXT}" in diffed.out
    assert run("diff", record_id, "-n", namespace, "--from", "1", "--to", "1", "--json"
               ).json()["text"] == []
    assert run("diff", record_id, "-n", namespace, "--to", "9").code == 2

    # Only what came after the cursor: the approval.
    after = run("tail", "-n", namespace, "--after", cursor)
    assert after.code == 0, after.err
    header, row, text = after.out.splitlines()
    assert header.split() == ["changed", "at", "record", "v", "change", "actor"]
    assert row.split()[2:5] == [record_id, "2", "approved"]
    assert "The billing deploy goes through" in text
    assert run("review", "-n", namespace, "--json").json()["items"] == []


def test_errors_are_one_line_with_their_exit_code(
    stack: Stack, worker: Worker, namespace: str, run: Any, tmp_path: Path,
) -> None:
    missing = run("show", "mem_000000000000000000000000", "-n", namespace)
    assert (missing.code, missing.out) == (4, "")
    assert missing.err.strip().startswith("memstream: not found:")
    assert len(missing.err.splitlines()) == 1

    unauthenticated = run("search", "x", "-n", namespace, key=None)
    assert unauthenticated.code == 3
    assert "no key given" in unauthenticated.err

    no_namespace = run("search", "x")
    assert no_namespace.code == 2 and "no namespace" in no_namespace.err

    unreachable = memstream("search", "x", "-n", namespace, url="http://127.0.0.1:9",
                            key=stack.operator_key, home=tmp_path)
    assert unreachable.code == 1
    assert unreachable.err.strip() == "memstream: the worker is not reachable at " \
        "http://127.0.0.1:9 (ConnectError: [Errno 111] Connection refused)"


def test_keys_made_listed_and_revoked_through_the_cli(
    stack: Stack, worker: Worker, namespace: str, run: Any,
) -> None:
    made = run("keys", "create", "-n", namespace, "--perm", "read", "--label", "ci", "--json")
    assert made.code == 0, made.err
    key = made.json()
    assert (key["namespace"], key["permissions"], key["label"]) == (namespace, ["read"], "ci")

    listed = run("keys", "list", "-n", namespace)
    assert listed.out.splitlines()[0].split()[:3] == ["key", "namespace", "permissions"]
    (row,) = listed.out.splitlines()[1:]
    assert row.split()[:3] == [key["key_id"], namespace, "read"]

    assert run("search", "anything", "-n", namespace, key=key["token"]).code == 0
    # A read key may not manage keys.
    assert run("keys", "list", "-n", namespace, key=key["token"]).code == 3

    revoked = run("keys", "revoke", key["key_id"])
    assert revoked.code == 0 and f"key {key['key_id']} revoked at" in revoked.out
    after = run("search", "anything", "-n", namespace, key=key["token"])
    assert after.code == 3
    assert after.err.strip() == f"memstream: unauthorized: key {key['key_id']} was revoked"
    assert run("keys", "list", "-n", namespace, "--json").json()["keys"][0]["revoked_at"]


async def test_an_agent_key_never_shows_another_agents_memory_and_a_config_file_works(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, run: Any,
    tmp_path: Path,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
        finns = await publisher.write_memory(
            namespace, "Finn's deploy checklist: drain the blue pool first.",
            scope="personal", agent_id="finn")
        rubys = await publisher.write_memory(
            namespace, "Ruby's deploy checklist: drain the green pool first.",
            scope="personal", agent_id="ruby")
        await announced(updates, finns, [("created", 1)])
        await announced(updates, rubys, [("created", 1)])
    finn_key = stack.make_key("--namespace", namespace, "--perm", "read", "--agent", "finn")
    config = tmp_path / "memstream.toml"
    config.write_text(f'url = "{worker.base_url}"\nkey = "{finn_key}"\n'
                      f'namespace = "{namespace}"\n')

    # No setting in the environment: the file has the url, the key and the namespace.
    def as_finn(*args: str) -> Ran:
        return memstream(*args, url="", key=None, home=tmp_path, MEMSTREAM_CONFIG=str(config))

    hits = as_finn("search", "deploy checklist drain pool", "--json").json()["hits"]
    assert [hit["record_id"] for hit in hits] == [finns]
    assert as_finn("search", "deploy checklist", "--agent", "ruby").code == 3
    assert as_finn("show", rubys).code == 4
    assert as_finn("show", finns).code == 0
    assert [c["record_id"] for c in as_finn("tail", "--json").json_lines()] == [finns]

    # The operator sees both, from ~/.config/memstream/config.toml this time.
    (tmp_path / ".config" / "memstream").mkdir(parents=True)
    (tmp_path / ".config" / "memstream" / "config.toml").write_text(
        f'url = "{worker.base_url}"\nkey = "{stack.operator_key}"\n')
    both = memstream("tail", "-n", namespace, "--json", url="", key=None, home=tmp_path)
    assert sorted(c["record_id"] for c in both.json_lines()) == sorted([finns, rubys])


async def test_tail_follow_prints_new_changes_until_ctrl_c(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, tmp_path: Path,
) -> None:
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("MEMSTREAM_")}
    environment.update(HOME=str(tmp_path), MEMSTREAM_URL=worker.base_url,
                       MEMSTREAM_API_KEY=stack.operator_key)
    # Started as a terminal starts it: Ctrl-C at its default even when the tests run as a
    # background job, whose children inherit SIGINT ignored.
    follower = subprocess.Popen(
        [sys.executable, "-m", "memstream_client.cli", "tail", "-n", namespace, "--follow",
         "--json"],
        cwd=REPO_ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL))
    try:
        async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
            record_id = await publisher.write_memory(namespace, TEXT)
            await announced(updates, record_id, [("created", 1)])
        assert follower.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(follower.stdout.readline), 30)
        assert (json.loads(line)["record_id"], json.loads(line)["change"]) == (
            record_id, "created")
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=30)
    assert follower.returncode == 0, err
    assert "Traceback" not in err and f"-n {namespace} --after " in err


async def test_a_sessions_ledger_shown(
    worker: Worker, namespace: str, run: Any, http: httpx.AsyncClient,
) -> None:
    woke = await http.post("/v1/sessions/wake", json={
        "namespace": namespace, "agent_id": "finn", "task": "upgrade the payment SDK"})
    session_id = woke.json()["session_id"]
    for step, body in (("checkpoint", {"memories": [{"text": "4.x drops the sync client."}]}),
                       ("sleep", {"summary": "Moved checkout to async.",
                                  "next_steps": ["Upgrade refunds"]})):
        answer = await http.post(f"/v1/sessions/{session_id}/{step}",
                                 json={"namespace": namespace, "agent_id": "finn", **body})
        assert answer.status_code == 202, answer.text
    for _ in range(100):
        shown = run("session", session_id, "-n", namespace, "--json")
        if shown.code == 0 and shown.json()["state"] == "asleep":
            break
        await asyncio.sleep(0.2)
    assert len(shown.json()["events"]) == 3
    table = run("session", session_id, "-n", namespace)
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[:4] == [f"session: {session_id}", "agent:   finn",
                         "task:    upgrade the payment SDK", "state:   asleep"]
    assert [line.split()[2] for line in lines if re.match(r"\d{4}-", line)] == [
        "session.woke", "session.checkpointed", "session.slept"]
    assert "    Moved checkout to async.; Upgrade refunds" in lines
    missing = run("session", "no-such-session", "-n", namespace)
    assert missing.code != 0 and "no session 'no-such-session'" in missing.err


async def test_cli_summarizes_what_memory_holds_citing_each_memory(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, run: Any,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
        record_id = await publisher.write_memory(namespace, TEXT, title="Billing deploys")
        await announced(updates, record_id, [("created", 1)])
    shown = run("summary", "does the billing deploy need the VPN?", "-n", namespace)
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[1] == f"- [{record_id}] Billing deploys: {TEXT}"
    assert re.fullmatch(r"1 of 1 memories found, \d+ tokens of 400", shown.err.strip()), \
        shown.err
    brief = run("--json", "summary", "billing VPN", "-n", namespace, "--budget", "100").json()
    assert brief["memory_ids"] == [record_id] and brief["tokens"] <= 100
