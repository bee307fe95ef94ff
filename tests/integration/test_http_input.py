"""What a request carries in its path and query string, on the real stack: read with the
rules of the values it names, refused 400 with the reason when they break them, and never
answered 5xx, whatever the request holds."""

from __future__ import annotations

import base64
import json
import re
import uuid
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from harness.kafka_io import TopicReader
from harness.stack import Stack, Worker
from streams.plumbing.config import REPO_ROOT
from tests.integration.test_lifecycle import announced

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Seeded:
    namespace: str
    record_id: str
    # A key made for these tests, which they may revoke.
    key_id: str


@pytest.fixture(scope="module")
async def seeded(stack: Stack, worker: Worker, updates: TopicReader) -> Seeded:
    """A namespace with one memory in it, so that requests that name them reach the stores."""
    namespace = f"ns-input-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                 timeout=20) as http:
        written = await http.post("/v1/memories", content=json.dumps({
            "namespace": namespace, "text": "Deploys to staging need the VPN.",
            "tags": ["ops"]}).encode(), params={"wait": 20})
        assert written.status_code == 200, written.text
    record_id = written.json()["record_id"]
    await announced(updates, record_id, [("created", 1)])
    scratch = stack.make_key("--namespace", namespace, "--perm", "read", "--label", "scratch")
    return Seeded(namespace, record_id, scratch.split("_")[1])


def served_routes() -> list[tuple[str, str]]:
    """(method, route) of every GET route and of every DELETE, read from the code that
    registers them, so that a route added later is probed too."""
    served = set()
    for source in sorted((REPO_ROOT / "streams").rglob("*.py")):
        for route, options in re.findall(r'page\("(/[^"]*)"(.*)', source.read_text()):
            if "methods=" not in options or '"GET"' in options:
                served.add(("GET", route))
            if '"DELETE"' in options:
                served.add(("DELETE", route))
    return sorted(served)


ROUTES = served_routes()
# What a client might send in a path segment, already percent-encoded: NUL, unicode,
# traversal, encoded slashes, broken escapes, invalid UTF-8, long ids.
SEGMENTS = st.sampled_from([
    "%00", "mem_%00", "..", ".", "%2e%2e", "a%2Fb", "%2F", "%5C", "%", "%zz", "%ED%A0%80",
    "%C0%AF", "%FF%FE", "%E2%80%AE", "%F0%9F%92%BE", "mem_" + "a" * 300, "x" * 9000,
    "0123456789ab", "human", "%20", "mem_0123456789abcdef01234567", "%0A",
]) | st.text(min_size=1, max_size=300).map(lambda text: quote(text, safe=""))
NAMES = st.sampled_from([
    "namespace", "query", "q", "error", "agent_id", "run_id", "kind", "memory_type", "type",
    "tag", "tier", "review_state", "profile", "limit", "min_score", "since", "until",
    "related_id", "budget_tokens", "from", "to", "record_id", "after", "label", "", "x",
    "id", "cursor", "agent", "memory_id",
]) | st.text(max_size=20)
VALUES = st.sampled_from([
    "", "0", "-1", "1", "5", "1e400", "nan", "inf", "-0", "99999999999999999999", str(2**31),
    str(2**63), "1.5", "2026-01-01", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00",
    "memory", "fact", "approved", "default", "incident", "\x00", "a\x00b", "..", "\u202e",
    "x" * 5000, "memory,bogus", ",", "KeyError: 'user-1234'",
    base64.urlsafe_b64encode(b"2026-01-01T00:00:00+00:00|99999999999|mem_x").decode(),
    base64.urlsafe_b64encode(b"0001-01-01T00:00:00+14:00|1|mem_\x00").decode(),
]) | st.text(max_size=200)
# Query strings a client may send that no encoder makes.
RAW_QUERIES = st.sampled_from(["", "&", "=", "==&&=", "%", "%zz=1", "namespace", "a=%", "%00=x",
                               "namespace=%ED%A0%80", "limit=%FF"])


def usable(route: str, seeded: Seeded) -> list[tuple[str, str]]:
    """The parameters that make a request of `route` one it answers (or 404s)."""
    if not route.startswith("/v1/") or route == "/v1/keys/{key_id}":
        return []
    wanted = {"/v1/search": [("query", "deploy staging")],
              "/v1/context": [("query", "deploy staging")],
              "/v1/summary": [("query", "deploy staging")],
              "/v1/fix-patterns": [("error", "KeyError: 'user-1234'")],
              "/v1/blocks/{label}": [("agent_id", "ann")],
              "/v1/memory-scores": [("memory_id", seeded.record_id), ("agent_id", "ann")]}
    return [("namespace", seeded.namespace), *wanted.get(route, [])]


def encoded(pairs: list[tuple[str, str]]) -> str:
    return "&".join(f"{quote(name, safe='')}={quote(value, safe='')}" for name, value in pairs)


async def test_the_requests_of_the_issue_answer_400_with_the_reason(
        worker: Worker, http: httpx.AsyncClient, seeded: Seeded) -> None:
    namespace = seeded.namespace
    refused = [
        (("GET", f"/v1/records/mem_%00?namespace={namespace}"), "record_id: holds U+0000"),
        (("GET", f"/v1/records/mem_%00/history?namespace={namespace}"), "record_id"),
        (("DELETE", "/v1/keys/%00"), "key_id: a key id is 12 hexadecimal digits"),
        (("GET", "/v1/keys/%00"), "key_id"),
        (("GET", f"/v1/search?namespace={namespace}&query=vpn&type=bogus"),
         "unknown parameter 'type'"),
        (("GET", f"/v1/search?namespace={namespace}&query=vpn&memory_type=bogus"),
         "memory_type: unknown 'bogus'"),
        (("GET", "/v1/search?namespace=team%00&query=vpn"), "namespace: holds U+0000"),
        (("GET", "/v1/stats?namespace=team%00"), "namespace"),
        (("GET", "/v1/keys?namespace=team%00"), "namespace"),
        (("GET", f"/v1/blocks/%00?namespace={namespace}&agent_id=ann"), "label"),
        (("GET", f"/v1/context?namespace={namespace}&query=vpn&run_id=r%00"), "run_id"),
        (("GET", f"/v1/changes?namespace={namespace}&agent_id=%00"), "agent_id"),
        (("GET", f"/v1/pending-diffs?namespace={namespace}&record_id=%00"), "record_id"),
        (("GET", f"/v1/search?namespace={namespace}&query=vpn"
                 "&since=0001-01-01T00:00:00%2B14:00"), "since: the time has no UTC form"),
        (("GET", f"/v1/records/{seeded.record_id}/diff?namespace={namespace}&to={2**31}"),
         "to: must be an integer"),
        (("GET", f"/v1/changes?namespace={namespace}&after="
                 + base64.urlsafe_b64encode(b"2026-01-01T00:00:00+00:00|99999999999|m").decode()),
         "after: not a cursor this feed gave"),
        (("GET", f"/v1/graph?namespace={namespace}&namespace=other"), "given 2 times"),
        (("GET", f"/v1/records?namespace={namespace}&id="
                 + ",".join(f"mem_{n}" for n in range(101))), "id: at most 100 in one request"),
        (("GET", f"/v1/records?namespace={namespace}&id=mem_1&tier=active"),
         "id reads records by id; tier narrow a listing"),
        (("GET", f"/v1/records?namespace={namespace}&cursor=bm9waXBl"),
         "cursor: not a cursor this listing gave"),
        (("GET", f"/v1/records?namespace={namespace}&limit=201"),
         "limit: must be an integer from 1 to 200"),
        (("GET", f"/v1/search?namespace={namespace}&limit=3"),
         "query is required (or related_id"),
    ]
    for (method, path), reason in refused:
        answer = await http.request(method, path)
        assert answer.status_code == 400, (path, answer.text)
        assert reason in answer.json()["error"], (path, answer.text)
    # A key's grant follows the same rules as the events of its namespace.
    for grant, reason in [({"namespace": "team\x00", "permissions": ["read"]}, "namespace"),
                          ({"namespace": "team a", "permissions": ["read"]}, "namespace"),
                          ({"namespace": namespace, "permissions": ["read"],
                            "label": "x\x00"}, "label")]:
        answer = await http.post("/v1/keys", content=json.dumps(grant).encode())
        assert answer.status_code == 400 and reason in answer.json()["error"], answer.text
    # Faust's own routes are not served: every route is memstream's, behind its rules.
    assert (await http.get("/router/foo/")).status_code == 404
    assert (await http.get("/table/")).status_code == 404

    # What the rules take is read as before; an empty value is a parameter not given.
    for path in (f"/v1/records/{seeded.record_id}?namespace={namespace}",
                 f"/v1/search?namespace={namespace}&query=vpn&limit=&kind=memory,&tag=ops",
                 f"/v1/changes?namespace={namespace}&after=",
                 f"/v1/keys/{seeded.key_id}"):
        answer = await http.get(path)
        assert answer.status_code == 200, (path, answer.text)


@settings(max_examples=250, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(route=st.sampled_from(ROUTES),
       segments=st.lists(SEGMENTS, min_size=3, max_size=3),
       real_ids=st.booleans(), based=st.booleans(),
       pairs=st.lists(st.tuples(NAMES, VALUES), max_size=6), raw=RAW_QUERIES)
async def test_no_request_answers_5xx_whatever_its_path_and_query(
    worker: Worker, seeded: Seeded, route: tuple[str, str], segments: list[str],
    real_ids: bool, based: bool, pairs: list[tuple[str, str]], raw: str,
) -> None:
    method, template = route
    # With the seeded ids and a usable base, requests get past the first checks and reach
    # the stores; without, they probe the checks themselves.
    ids = iter(segments)
    path = re.sub(r"\{(\w+)\}", lambda found: (
        seeded.record_id if found[1] == "record_id" and real_ids else
        seeded.key_id if found[1] == "key_id" and real_ids else next(ids)), template)
    assume(worker.api_key.split("_")[1] not in path)  # the tests' own key is never revoked
    base = usable(template, seeded) if based else []
    query = "&".join(part for part in (encoded(base + pairs), raw) if part)
    async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                 timeout=30) as http:
        answer = await http.request(method, f"{path}?{query}")
    assert answer.status_code < 500, (method, path, query, answer.text[:500])
    if answer.status_code == 400 and answer.headers.get("content-type", "").startswith(
            "application/json"):
        assert isinstance(answer.json()["error"], str) and answer.json()["error"]
