"""Metrics an operator can trust: the alert rules and the scrape config pass promtool, a real
Prometheus scraping a real worker under load answers every panel query of every Grafana
dashboard with data and evaluates every alert rule, and the exported series stay bounded
however many namespaces write."""

from __future__ import annotations

import asyncio
import json
import math
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from harness.kafka_io import produce, wait_caught_up
from harness.stack import Stack, Worker, free_port
from publisher.kafka_publisher import Publisher
from streams.app import group_id
from streams.plumbing.config import REPO_ROOT
from tests.integration.conftest import event

pytestmark = pytest.mark.integration

T = TypeVar("T")

PROMETHEUS_DIR = REPO_ROOT / "infra" / "prometheus"
RULE_FILES = sorted((PROMETHEUS_DIR / "rules").glob("*.yml"))
GRAFANA_DIR = REPO_ROOT / "infra" / "grafana"
DASHBOARDS = sorted((GRAFANA_DIR / "dashboards").glob("*.json"))
DATASOURCE_UID = "memstream-prometheus"
JOB = "memstream"
# Grafana's interval variables, as Grafana would fill them in for a short time range.
GRAFANA_VARIABLE = re.compile(r"\$__(?:rate_interval|interval|range)\b")
WINDOW = "1m"
METRIC_NAME = re.compile(r"\bmemstream_[a-z0-9_]+\b")

# Ten memories: a paraphrased group and an identical pair (merged by the consolidation), one
# with a secret (redacted), the rest distinct.
MEMORIES = [
    "The staging database only accepts connections over the office VPN.",
    "Connections to the staging database are only accepted over the office VPN.",
    "Over the office VPN only: the staging database accepts no other connections.",
    "Production deploys need two approvals in the release channel.",
    "Production deploys need two approvals in the release channel.",
    "The staging admin password=Sup3rS3cretValue is rotated every month.",
    "The billing service retries failed webhooks five times with exponential backoff.",
    "Nightly backups of the analytics warehouse are kept for thirty days.",
    "Feature flags are evaluated on the client for the mobile apps.",
    "The search cluster is reindexed every Sunday at 03:00 UTC.",
]
TRACE = """Traceback (most recent call last):
  File "/srv/ci/build-{build}/app/cache.py", line 42, in load_user
    return self._users[user_id]
KeyError: 'user-{user}'"""


# ------------------------------------------------------------------------ dashboards

@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    ref_id: str
    expr: str

    def __str__(self) -> str:
        return f"{self.dashboard} / {self.panel!r} [{self.ref_id}]"

    @property
    def promql(self) -> str:
        """The expression as Prometheus gets it once Grafana filled in its variables."""
        return GRAFANA_VARIABLE.sub(WINDOW, self.expr)


def load_dashboard(path: Path) -> dict[str, Any]:
    board: dict[str, Any] = json.loads(path.read_text())
    return board


def all_panels(container: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, including those inside (collapsed) rows."""
    for panel in container.get("panels", []):
        yield panel
        yield from all_panels(panel)


def panel_queries() -> list[PanelQuery]:
    queries = []
    for path in DASHBOARDS:
        board = load_dashboard(path)
        for panel in all_panels(board):
            for target in panel.get("targets", []):
                queries.append(PanelQuery(board["title"], panel["title"], target["refId"],
                                          target["expr"]))
    return queries


def alert_count() -> int:
    return sum(len(re.findall(r"^\s*- alert:", path.read_text(), re.M)) for path in RULE_FILES)


def test_the_dashboards_and_provisioning_hang_together() -> None:
    assert {path.name for path in DASHBOARDS} == {"overview.json", "memory.json",
                                                  "history.json"}
    uids = []
    for path in DASHBOARDS:
        board = load_dashboard(path)
        uids.append(board["uid"])
        assert board["schemaVersion"] >= 36, path.name
        ids = [panel["id"] for panel in all_panels(board)]
        assert len(ids) == len(set(ids)), f"{path.name}: panel ids repeat"
        boxes = []
        for panel in all_panels(board):
            where = f"{path.name} / {panel['title']!r}"
            grid = panel["gridPos"]
            assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, where
            boxes.append((where, grid))
            if panel["type"] == "row":
                continue
            assert panel["type"] in {"timeseries", "stat"}, where
            assert panel["datasource"] == {"type": "prometheus", "uid": DATASOURCE_UID}, where
            assert panel["targets"], f"{where}: no query"
            ref_ids = [target["refId"] for target in panel["targets"]]
            assert len(ref_ids) == len(set(ref_ids)), where
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == DATASOURCE_UID, where
                assert target["expr"].strip(), where
                assert "$" not in GRAFANA_VARIABLE.sub("", target["expr"]), \
                    f"{where}: a variable the live check cannot fill in"
        for i, (where, a) in enumerate(boxes):
            for other, b in boxes[i + 1:]:
                overlap = (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
                           and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])
                assert not overlap, f"{where} overlaps {other}"
    assert len(uids) == len(set(uids))

    datasource = (GRAFANA_DIR / "provisioning" / "datasources" / "memstream.yml").read_text()
    assert f"uid: {DATASOURCE_UID}" in datasource
    assert "url: http://localhost:9090" in datasource
    provider = (GRAFANA_DIR / "provisioning" / "dashboards" / "memstream.yml").read_text()
    assert "type: file" in provider and "path: ${MEMSTREAM_GRAFANA_DASHBOARDS}" in provider


# ------------------------------------------------------------------------ promtool

def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed (Debian package prometheus; see infra/setup.sh)")
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_alert_rules_and_the_scrape_config_pass_promtool() -> None:
    assert RULE_FILES, "no rule files"
    rules = promtool("check", "rules", *map(str, RULE_FILES))
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert f"SUCCESS: {alert_count()} rules found" in rules.stdout + rules.stderr

    config_path = PROMETHEUS_DIR / "prometheus.yml"
    config = promtool("check", "config", str(config_path))
    assert config.returncode == 0, config.stdout + config.stderr
    text = config_path.read_text()
    assert f"job_name: {JOB}" in text and "localhost:6066" in text
    assert "metrics_path: /metrics" in text and "rules/*.yml" in text


# ------------------------------------------------------------------------ a live Prometheus

@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path


def prometheus_config(processes: list[Worker]) -> dict[str, Any]:
    """The repository's config, made fast: the test's worker and consolidator scraped every
    second."""
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in RULE_FILES],
        "scrape_configs": [{
            "job_name": JOB,
            "metrics_path": "/metrics",
            "static_configs": [{"targets": [process.base_url.removeprefix("http://")
                                            for process in processes]}],
        }],
    }


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def prometheus(worker: Worker, consolidator: Worker,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    if shutil.which("prometheus") is None:
        pytest.fail("prometheus is not installed (Debian package prometheus; see "
                    "infra/setup.sh)")
    root = tmp_path_factory.mktemp("prometheus")
    config = root / "prometheus.yml"
    config.write_text(  # JSON is YAML
        json.dumps(prometheus_config([worker, consolidator]), indent=2))
    checked = promtool("check", "config", str(config))
    assert checked.returncode == 0, checked.stdout + checked.stderr

    port = free_port()
    log_path = root / "prometheus.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={root / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT, cwd=root,
        )
    running = Prometheus(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_ready(running)
        yield running
    finally:
        stop(process)


def wait_ready(prometheus: Prometheus, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if prometheus.process.poll() is not None:
            raise RuntimeError(f"prometheus exited with {prometheus.process.returncode}: "
                               f"{prometheus.log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"{prometheus.url}/-/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"prometheus not ready after {timeout_s}s: "
                       f"{prometheus.log_path.read_text()[-2000:]}")


async def query(client: httpx.AsyncClient, promql: str) -> dict[str, Any]:
    """The API's answer to an instant query (status "error" included)."""
    answer = await client.get("/api/v1/query", params={"query": promql})
    body: dict[str, Any] = answer.json()
    return body


async def eventually(check: Callable[[], Awaitable[T | None]], what: str,
                     timeout_s: float = 60.0, every_s: float = 0.5) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        found = await check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout_s}s")
        await asyncio.sleep(every_s)


async def scraped_after(client: httpx.AsyncClient, worker: Worker, moment: float) -> None:
    """Wait for a successful scrape of `worker` that started after `moment` (a Unix time).
    Of this worker, and one that answered: a scrape of the other target, or one that timed
    out on a busy worker, leaves the worker's counters without a sample before the load."""
    instance = worker.base_url.removeprefix("http://")

    async def last_scrape() -> float | None:
        body = await query(client,
                           f'timestamp(up{{job="{JOB}",instance="{instance}"}} == 1)')
        result = body["data"]["result"] if body["status"] == "success" else []
        if result and float(result[0]["value"][1]) >= moment:
            return float(result[0]["value"][1])
        return None

    await eventually(last_scrape, f"a scrape after {moment}", timeout_s=30)


# ------------------------------------------------------------------------ the load

async def write_and_consolidate(stack: Stack, http: httpx.AsyncClient, namespace: str) -> None:
    """Ten new memories: the tenth triggers a consolidation; wait for its report."""
    async with Publisher(stack.broker.bootstrap, producer="observability-test") as publisher:
        for text in MEMORIES:
            await publisher.write_memory(namespace, text, memory_type="fact")

    async def report() -> dict[str, Any] | None:
        answer = await http.get("/v1/consolidation/reports", params={"namespace": namespace})
        reports: list[dict[str, Any]] = answer.json()["reports"] if answer.is_success else []
        return reports[0] if reports else None

    await eventually(report, f"a consolidation report for {namespace}", timeout_s=90)


async def failure_then_fix(stack: Stack, worker: Worker, namespace: str) -> None:
    """A failed run with an error step, then a run of the same task that succeeds: an error
    signature with an occurrence and a fix pattern with its fix."""
    task = {"task_key": f"OBS-{uuid.uuid4().hex[:6]}", "repo": "acme/web"}
    failed, fixed = (f"run-{uuid.uuid4().hex[:8]}" for _ in range(2))
    trace = TRACE.format(build=7, user="1234")
    runs: dict[str, list[tuple[str, dict[str, Any]]]] = {
        failed: [("run.started", {"intent": "Warm the user cache on boot", **task}),
                 ("run.step", {"kind": "error", "error": trace}),
                 ("run.finished", {"status": "failed", "error": trace})],
        fixed: [("run.started", {"intent": "Warm the user cache on boot", **task}),
                ("run.step", {"kind": "decision", "text": "Load users lazily."}),
                ("run.finished", {"status": "succeeded", "commits": ["7c0ffee"],
                                  "files_changed": ["app/cache.py"]})],
    }
    for run_id, steps in runs.items():
        await produce(stack.broker.bootstrap, "runs.events", [
            (run_id.encode(), event(type_, namespace, {"run_id": run_id, **payload}))
            for type_, payload in steps])
        await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])


async def read_api(http: httpx.AsyncClient, memories: str, runs: str) -> None:
    for question in ("how do I reach the staging database?", "who approves deploys?"):
        answer = await http.get("/v1/search", params={"namespace": memories, "query": question})
        assert answer.status_code == 200, answer.text
    answer = await http.get("/v1/fix-patterns", params={
        "namespace": runs, "error": TRACE.format(build=9, user="77")})
    assert answer.status_code == 200, answer.text
    assert (await http.get("/v1/stats", params={"namespace": memories})).status_code == 200
    assert (await http.get("/v1/stats", params={"namespace": memories},
                           headers={"Authorization": ""})).status_code == 401


async def put_under_load(stack: Stack, worker: Worker, http: httpx.AsyncClient) -> None:
    first, second, runs = (f"obs-{uuid.uuid4().hex[:10]}" for _ in range(3))
    await write_and_consolidate(stack, http, first)
    await read_api(http, first, runs)
    await produce(stack.broker.bootstrap, "memory.events", [(first.encode(), b"{not json")])
    await failure_then_fix(stack, worker, runs)
    # A second consolidation and more reads, seconds later: histogram series that appeared
    # with the first ones now have observations in the last minute.
    await write_and_consolidate(stack, http, second)
    await read_api(http, second, runs)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id,
                         ["memory.events", "runs.events"])
    await wait_caught_up(stack.broker.bootstrap, group_id(worker.app_id, "consolidator"),
                         ["memory.consolidate"])


# ------------------------------------------------------------------------ the live checks

def problem(body: dict[str, Any]) -> str | None:
    """Why a query's answer is no data for a panel (None: it has data)."""
    if body["status"] != "success":
        return f"{body.get('errorType')}: {body.get('error')}"
    data = body["data"]
    if data["resultType"] == "scalar":
        values = [data["result"][1]]
    else:
        values = [sample["value"][1] for sample in data["result"]]
    if not values:
        return "no series"
    if all(math.isnan(float(value)) for value in values):
        return "only NaN (no observations in the window)"
    return None


async def test_every_panel_and_every_alert_rule_answers_from_a_live_worker(
    stack: Stack, worker: Worker, consolidator: Worker, http: httpx.AsyncClient,
    prometheus: Prometheus,
) -> None:
    async with httpx.AsyncClient(base_url=prometheus.url, timeout=10) as prom:
        started = time.time()
        await scraped_after(prom, worker, started)  # the worker is a target, and up
        await put_under_load(stack, worker, http)
        loaded = time.time()
        await scraped_after(prom, worker, loaded + 3)

        queries = panel_queries()
        answers = await asyncio.gather(*(query(prom, q.promql) for q in queries))
        failed = [f"{q}: {reason}\n    {q.promql}" for q, body in zip(queries, answers,
                                                                        strict=True)
                  if (reason := problem(body)) is not None]
        assert not failed, "panels without data:\n" + "\n".join(failed)

        # The rare counters start at 0 (streams/plumbing/metrics.py), so their first increase shows:
        # the load's one dead letter and its errors are in the rates. Over the whole test: on a
        # loaded machine the load takes more than the panels' 2 minutes.
        window_s = math.ceil(time.time() - started) + 30
        for rare in ('memstream_dlq_total{topic="memory.events",reason="malformed_json"}',
                     "memstream_error_occurrences_total",
                     'memstream_auth_failures_total{failure="missing"}'):
            body = await query(prom, f"sum(increase({rare}[{window_s}s]))")
            assert float(body["data"]["result"][0]["value"][1]) > 0, rare

        # Every metric a panel or a rule names is one the worker or the consolidator exports
        # (also those behind `or vector(0)`, which always have data).
        exported = (await http.get("/metrics")).text + httpx.get(
            f"{consolidator.base_url}/metrics", timeout=10).text
        families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", exported, re.M))
        known = set(families) | {f"{name}{suffix}" for name, kind in families.items()
                                 if kind == "histogram" for suffix in ("_bucket", "_sum",
                                                                        "_count")}
        named = {name for q in queries for name in METRIC_NAME.findall(q.expr)}
        named |= {name for path in RULE_FILES for name in METRIC_NAME.findall(path.read_text())}
        assert named - known == set(), "metrics the worker does not export"

        # The rule group is loaded, evaluated without error, and each rule's expression runs.
        groups = (await prom.get("/api/v1/rules")).json()["data"]["groups"]
        rules = [rule for group in groups for rule in group["rules"]
                 if Path(group["file"]).parent == PROMETHEUS_DIR / "rules"]
        assert len(rules) == alert_count() > 0, groups
        for rule in rules:
            assert rule["type"] == "alerting", rule["name"]
            assert rule["health"] == "ok", f"{rule['name']}: {rule.get('lastError')}"
            assert {"severity"} <= rule["labels"].keys(), rule["name"]
            assert {"summary", "description"} <= rule["annotations"].keys(), rule["name"]
            body = await query(prom, rule["query"])
            assert body["status"] == "success", f"{rule['name']}: {body.get('error')}"
        down = next(rule for rule in rules if rule["name"] == "MemstreamWorkerDown")
        assert down["state"] == "inactive", "the worker is up"


def series_lines(exposition: str) -> list[str]:
    return [line for line in exposition.splitlines() if line and not line.startswith("#")]


@pytest.mark.slow
async def test_ten_thousand_namespaces_add_no_series(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, prometheus: Prometheus,
) -> None:
    async with httpx.AsyncClient(base_url=prometheus.url, timeout=10) as prom:
        await scraped_after(prom, worker, time.time())
        scraped_before = await query(prom, f'count({{job="{JOB}"}})')
        before = series_lines((await http.get("/metrics")).text)

        prefix = f"card-{uuid.uuid4().hex[:8]}"
        namespaces = [f"{prefix}-{n:05d}" for n in range(10_000)]
        await produce(stack.broker.bootstrap, "memory.events", [
            (namespace.encode(), event("memory.write", namespace,
                                       {"text": f"Note {n}: the build cache lives on disk {n}."}))
            for n, namespace in enumerate(namespaces)])
        await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"],
                             timeout_s=300)
        stats = (await http.get("/v1/stats", params={"namespace": namespaces[-1]})).json()
        assert stats["records"] == {"memory": 1}

        exposition = (await http.get("/metrics")).text
        after = series_lines(exposition)
        assert len(after) - len(before) < 100, set(after) - set(before)
        assert prefix not in exposition

        await scraped_after(prom, worker, time.time())
        scraped_after_load = await query(prom, f'count({{job="{JOB}"}})')
        grew = (float(scraped_after_load["data"]["result"][0]["value"][1])
                - float(scraped_before["data"]["result"][0]["value"][1]))
        assert grew < 100
        labels = (await prom.get("/api/v1/labels")).json()["data"]
        assert not {"namespace", "record_id", "run_id", "event_id"} & set(labels)
