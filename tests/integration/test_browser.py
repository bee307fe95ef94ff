"""The memory browser in a real headless Chromium (the Debian package, driven through its own
chromedriver, so that nothing is downloaded) against the real stack: the key form, search,
a record with two versions and their diff, a pending diff approved in the review queue and
seen applied, the consolidation reports and the graph; the overview, the runs and a run, the
reports of a consolidation that merged, records named by their text, and its draft merges
approved in the review queue and rejected on a record's page; the dead letters of events
sent raw, and why a search found nothing; the scoring settings, read by any key and changed
by an admin's, a refused change saying why; the gaps agents met, open and resolved; a
record's scores and ratings; the pack preview, each section with its share and cost; the
documents indexed, and a document's chunks in order with their heading paths and token counts;
a repository's planning and an item's blockers and ready siblings. Each step is saved as a
screenshot, in `MEMSTREAM_SCREENSHOTS` or the test's temporary directory (the path is
printed)."""

from __future__ import annotations

import asyncio
import http.client
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest

from harness.kafka_io import TopicReader, produce
from harness.stack import Stack, Worker
from publisher.kafka_publisher import Publisher
from tests.integration.conftest import planning_checkout
from tests.integration.test_consolidation import VPN
from tests.integration.test_dead_letters import SECRET, dead_letters_keyed, unknown_type
from tests.integration.test_documents import INSTALL, applied
from tests.integration.test_gaps import ANSWER, QUESTION, REWORDED, UNRELATED, gaps_until
from tests.integration.test_gaps import announced as answered_memory
from tests.integration.test_history_views import consolidated, fixed_history, publish_runs
from tests.integration.test_knowledge_over_time import entities_indexed
from tests.integration.test_lifecycle import announced

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs the Debian packages chromium and chromium-driver (infra/setup.sh)")
WAIT_S = 40.0

VPN_V1 = "Deploys to staging need the office VPN; the [[Bastion host]] rejects other traffic."
VPN_V2 = "Deploys to staging go through the [[Bastion host]]; the VPN is no longer needed."
VPN_V3 = "Deploys to staging go through the [[Bastion host]] with a hardware key."
BASTION = "The bastion host forwards SSH to staging and logs every session."
# Markup in a memory is text to the browser, never markup.
CHECKLIST = ("Before a release, read [[Staging deploys]] and [[A page nobody wrote]]; "
             "<b>never</b> on a Friday.")


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    chosen = os.environ.get("MEMSTREAM_SCREENSHOTS")
    directory = Path(chosen) if chosen else tmp_path / "screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {directory}")
    return directory


@pytest.fixture
def chrome(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # The driver and the browser are given: Selenium Manager must not look for (or fetch) any.
    monkeypatch.setenv("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)),
                              options=options)
    try:
        yield driver
    finally:
        driver.quit()


def raw_get(worker: Worker, path: str,
            method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """Request exactly `path`: http.client sends it as written (httpx would resolve the
    dots)."""
    connection = http.client.HTTPConnection("127.0.0.1", worker.web_port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


async def test_the_static_files_are_the_apps_alone(worker: Worker) -> None:
    status, headers, body = raw_get(worker, "/ui/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert b'<script type="module" src="app.js">' in body
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    status, headers, _ = raw_get(worker, "/ui/app.js")
    assert status == 200 and headers["Content-Type"] == "text/javascript; charset=utf-8"
    status, headers, _ = raw_get(worker, "/ui")
    assert (status, headers["Location"]) == (308, "/ui/")
    assert raw_get(worker, "/ui/app.js", method="POST")[0] == 405
    for path in ("/ui/../../etc/passwd", "/ui/..%2F..%2Fetc%2Fpasswd", "/ui/%2e%2e%2fapp.py",
                 "/ui/browser.py", "/ui/nothing.js"):
        status, _, body = raw_get(worker, path)
        assert status == 404, (path, status)
        assert b"root:" not in body


@needs_chromium
async def test_without_a_key_the_browser_asks_for_one_and_says_when_it_is_refused(
    worker: Worker, chrome: Any, screenshots: Path, namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    def drive() -> None:
        chrome.get(f"{worker.base_url}/ui/#/search")
        wait_until(chrome, lambda: chrome.find_element(By.ID, "key-panel").is_displayed())
        assert not chrome.find_element(By.ID, "view").is_displayed()
        chrome.find_element(By.ID, "key").send_keys("msk_000000000000_" + "x" * 43)
        chrome.find_element(By.ID, "key-namespace").send_keys(namespace)
        chrome.find_element(By.CSS_SELECTOR, "#key-form button").click()
        wait_until(chrome, lambda: "refused the key" in text_of(chrome, "key-message"))
        assert "unknown API key" in text_of(chrome, "key-message")
        assert chrome.find_element(By.ID, "key-panel").is_displayed()
        chrome.save_screenshot(str(screenshots / "00-refused-key.png"))

    await asyncio.to_thread(drive)


@needs_chromium
async def test_search_record_versions_approve_a_diff_reports_and_graph(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    chrome: Any, screenshots: Path, namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
        bastion = await publisher.write_memory(namespace, BASTION, title="Bastion host",
                                               memory_type="fact", tags=["ops"])
        await announced(updates, bastion, [("created", 1)])
        vpn = await publisher.write_memory(namespace, VPN_V1, title="Staging deploys",
                                           memory_type="lesson", tags=["ops"])
        checklist = await publisher.write_memory(namespace, CHECKLIST, title="Release checklist",
                                                 memory_type="decision", related_ids=[bastion])
        await announced(updates, vpn, [("created", 1)])
        await announced(updates, checklist, [("created", 1)])
        # Approved memories are protected: each update waits for review. The first is approved
        # here, so the record has two versions; the browser approves the second.
        first = await publisher.update_memory(namespace, vpn, expected_version=1, text=VPN_V2)
        await announced(updates, vpn, [("created", 1), ("proposed", 1)])
        await publisher.review_memory(namespace, vpn, decision="approve", reviewer="ana",
                                      diff_id=first)
        await announced(updates, vpn, [("created", 1), ("proposed", 1), ("approved", 2)])
        second = await publisher.update_memory(namespace, vpn, expected_version=2, text=VPN_V3)
        await announced(updates, vpn, [("created", 1), ("proposed", 1), ("approved", 2),
                                       ("proposed", 2)])
        report_id = await publisher.request_consolidation(namespace)
    await eventually(lambda: reports_of(http, namespace), lambda r: len(r) == 1)

    # A key of this namespace that reads and reviews: the one a reviewer would paste.
    key = stack.make_key("--namespace", namespace, "--perm", "read,review")

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        chrome.get(f"{worker.base_url}/ui/")
        chrome.find_element(By.ID, "key").send_keys(key)
        chrome.find_element(By.ID, "key-namespace").send_keys(namespace)
        shot("01-key")
        chrome.find_element(By.CSS_SELECTOR, "#key-form button").click()
        wait_for(chrome, By.CSS_SELECTOR, "[data-page=overview]")
        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=search]").click()

        query = wait_for(chrome, By.CSS_SELECTOR, "[data-page=search] input[name=query]")
        query.send_keys("how do deploys reach staging")
        chrome.find_element(By.CSS_SELECTOR, "[data-page=search] button").click()
        hit = wait_for(chrome, By.CSS_SELECTOR, f"[data-page=search] .hit a[href='#/record/{vpn}']")
        assert hit.text == "Staging deploys"
        texts = [e.text for e in chrome.find_elements(By.CSS_SELECTOR, ".hit .text")]
        assert CHECKLIST in texts, texts
        assert chrome.find_elements(By.CSS_SELECTOR, ".hit .text b") == []
        shot("02-search")

        hit.click()
        wait_until(chrome, lambda: text_of(chrome, "record-version") == "2")
        assert text_of(chrome, "record-text") == VPN_V2
        versions = chrome.find_elements(By.CSS_SELECTOR, "table.versions tr")
        assert [row.text.split(" ")[:2] for row in versions[1:]] == [["1", "created"],
                                                                       ["2", "approved"]]
        diff = wait_for(chrome, By.CSS_SELECTOR, "#diff pre.unified")
        assert f"-{VPN_V1}" in diff.text and f"+{VPN_V2}" in diff.text
        # Its pending diff waits for review on its page.
        waiting = chrome.find_element(
            By.CSS_SELECTOR, f"#record-review article.review-item[data-item-id='{second}']")
        assert waiting.get_attribute("data-kind") == "pending_diff"
        assert [p.text for p in waiting.find_elements(By.CSS_SELECTOR, ".proposal p")] == [
            VPN_V3]
        shot("03-record", whole_page=True)
        chrome.execute_script("arguments[0].scrollIntoView({block: 'end'})", diff)
        shot("03-record-diff")

        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=review]").click()
        card = wait_for(chrome, By.CSS_SELECTOR,
                        f"[data-page=review] article.review-item[data-item-id='{second}']")
        assert card.find_element(By.CSS_SELECTOR, "a.record-link").text == "Staging deploys"
        assert "on version 2" in card.find_element(By.TAG_NAME, "h3").text
        # The queue shows the record's text as it is now above the proposed one.
        assert [p.text for p in card.find_elements(By.CSS_SELECTOR, ".proposal p")] == [
            VPN_V2, VPN_V3]
        shot("04-review-queue")
        card.find_element(By.CSS_SELECTOR, "button[data-decision=approve]").click()
        outcome = card.find_element(By.CSS_SELECTOR, ".outcome")
        wait_until(chrome, lambda: "applied" in (outcome.get_attribute("class") or ""),
                   explain=lambda: outcome.text)
        assert outcome.text == f"Applied: {vpn} is now at version 3."
        shot("05-approved")

        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=reports]").click()
        report = wait_for(chrome, By.CSS_SELECTOR, "[data-page=reports] article.report")
        assert report_id in report.text and "manual" in report.text
        shot("06-reports")

        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=graph]").click()
        wait_until(chrome, lambda: len(chrome.find_elements(
            By.CSS_SELECTOR, "#graph g.node[data-record-id]")) == 3)
        edges = chrome.find_elements(By.CSS_SELECTOR, "#graph line.edge:not(.mentions)")
        assert sorted(edge.get_attribute("class") for edge in edges) == [
            "edge related", "edge wiki_link", "edge wiki_link"]
        # Beside the memories, the entities two or more of them mention.
        entities = chrome.find_elements(By.CSS_SELECTOR, "#graph g.node.entity")
        summary = text_of(chrome, "graph-summary")
        assert summary == (
            f"3 memories, 3 links · {len(entities)} entities two or more mention · 1 "
            "unresolved wiki-links · 0 related ids outside the graph")
        legend = chrome.find_element(By.CSS_SELECTOR, "ul.legend").text.split("\n")
        assert legend[:3] == ["decision", "fact", "lesson"]
        shot("07-graph")
        chrome.find_element(By.CSS_SELECTOR,
                            f"#graph g.node[data-record-id='{bastion}'] circle").click()
        wait_until(chrome, lambda: chrome.find_element(By.TAG_NAME, "h1").text
                   == "Bastion host")
        assert chrome.current_url.endswith(f"#/record/{bastion}")
        shot("08-graph-opens-a-record")

    await asyncio.to_thread(drive)

    # What the browser showed is what is stored, approved by the key it was given.
    lineage = (await http.get(f"/v1/records/{vpn}", params={"namespace": namespace})).json()
    assert (lineage["version"], lineage["record"]["text"]) == (3, VPN_V3)
    history = (await http.get(f"/v1/records/{vpn}/history",
                              params={"namespace": namespace})).json()["versions"]
    key_id = key.split("_")[1]
    assert [(v["version"], v["change"], v["actor"]) for v in history] == [
        (1, "created", "orchestrator"), (2, "approved", "ana"), (3, "approved", f"key:{key_id}")]
    assert sorted(p.name for p in screenshots.glob("0[1-8]-*.png")) == [
        "01-key.png", "02-search.png", "03-record-diff.png", "03-record.png",
        "04-review-queue.png",
        "05-approved.png", "06-reports.png", "07-graph.png", "08-graph-opens-a-record.png"]


@needs_chromium
async def test_overview_runs_a_run_reports_and_graph_name_what_they_show(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    chrome: Any, screenshots: Path, namespace: str,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    failed, fixed, going = await publish_runs(stack, worker, namespace, time.time())
    await fixed_history(http, namespace, failed, fixed)
    vpn, approvals, finn = await consolidated(stack, updates, http, namespace)
    (report,) = await reports_of(http, namespace)
    merges = {frozenset(cluster["members"]): cluster["new_id"]
              for cluster in report["clusters"]}
    vpn_merge, approvals_merge = merges[frozenset(vpn)], merges[frozenset(approvals)]
    # The shared memories and merges, which the key below may see.
    texts = {record_id: (await http.get(f"/v1/records/{record_id}", params={
        "namespace": namespace})).json()["record"]["text"]
        for record_id in (*vpn, *approvals, vpn_merge, approvals_merge)}
    # A reviewer's key: it reads the shared memories, not Finn's.
    key = stack.make_key("--namespace", namespace, "--perm", "read,review")

    def links_named_by_text(scope: Any) -> list[tuple[str, str]]:
        """(record id, text) of the record links in `scope`, each checked to be named by
        the start of its record's text."""
        found = []
        for link in scope.find_elements(By.CSS_SELECTOR, "a.record-link"):
            record_id = link.get_attribute("href").rsplit("/", 1)[1]
            if record_id in texts:
                assert link.text == label_of(texts[record_id]), (record_id, link.text)
                found.append((record_id, link.text))
        return found

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        sign_in(chrome, worker, key, namespace)

        # The landing page: counts by kind, the last hour's changes, the last day's runs.
        overview = wait_for(chrome, By.CSS_SELECTOR, "[data-page=overview]")
        counts = {cell.get_attribute("data-kind"): cell.text for cell in
                  overview.find_elements(By.CSS_SELECTOR, "[data-card=records] td")}
        # Eight memories and three merges (Finn's among them: counts are the namespace's).
        assert counts == {"memory": "11", "run_digest": "2", "fix_pattern": "1"}
        changes = overview.find_element(By.CSS_SELECTOR, "[data-card=changes]")
        assert int(changes.find_element(By.CSS_SELECTOR, ".figure").text) >= 10
        assert vpn_merge in dict(links_named_by_text(changes)), "the newest changes"
        runs = overview.find_element(By.CSS_SELECTOR, "[data-card=runs]")
        assert runs.find_element(By.CSS_SELECTOR, ".figure").text == "3"
        assert [a.text for a in runs.find_elements(By.CSS_SELECTOR, ".statuses a")] == [
            "1 succeeded", "1 failed", "1 unfinished"]
        assert [a.text for a in runs.find_elements(By.CSS_SELECTOR, "a.run-link")] == [
            going, fixed, failed]
        # What awaits review: the two shared draft merges (Finn's is not this key's to see).
        waiting = overview.find_element(By.CSS_SELECTOR, "[data-card=review-queue]")
        assert waiting.find_element(By.CSS_SELECTOR, ".figure").text == "2"
        assert waiting.find_element(By.CSS_SELECTOR, "[data-kind=draft_merge]").text \
            == "2 draft merges"
        assert sorted(record_id for record_id, _ in links_named_by_text(waiting)) == sorted(
            [vpn_merge, approvals_merge])
        # The dead letters are an admin's to read: the card says so, the page stands.
        refused = overview.find_element(By.CSS_SELECTOR, "[data-card=dead-letters]").text
        assert "Not readable with this key" in refused and "admin key" in refused
        shot("10-overview", whole_page=True)

        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=runs]").click()
        wait_for(chrome, By.CSS_SELECTOR, "[data-page=runs] table.runs")
        rows = chrome.find_elements(By.CSS_SELECTOR, "table.runs tr[data-run-id]")
        assert [row.get_attribute("data-run-id") for row in rows] == [going, fixed, failed]
        assert [row.find_element(By.CSS_SELECTOR, ".badge").text for row in rows] == [
            "unfinished", "succeeded", "failed"]
        shot("11-runs")
        Select(chrome.find_element(By.CSS_SELECTOR, "#runs-form select[name=status]")
               ).select_by_value("failed")
        chrome.find_element(By.CSS_SELECTOR, "#runs-form button").click()
        wait_until(chrome, lambda: [row.get_attribute("data-run-id") for row in
                                    chrome.find_elements(By.CSS_SELECTOR,
                                                         "table.runs tr[data-run-id]")]
                   == [failed])
        assert chrome.current_url.endswith("#/runs?status=failed")

        chrome.find_element(By.CSS_SELECTOR, f"tr[data-run-id='{failed}'] a.run-link").click()
        wait_until(chrome, lambda: chrome.find_element(By.TAG_NAME, "h1").text
                   == f"Run {failed} failed")
        assert "TimeoutError: connection to db-7.internal:5432 timed out after 30s; unresolved" \
            in text_of(chrome, "run-digest")
        (error,) = chrome.find_elements(By.CSS_SELECTOR, "article.error-signature")
        assert error.find_element(By.TAG_NAME, "h3").text.startswith("TimeoutError · met 1 time")
        (fix,) = error.find_elements(By.CSS_SELECTOR, "ul.fixes > li")
        fixer = fix.find_element(By.CSS_SELECTOR, "a.run-link")
        assert (fix.get_attribute("data-run-id"), fixer.text) == (fixed, fixed)
        assert fixer.get_attribute("href").endswith(f"#/run/{fixed}")
        assert "commit 4be2d1c" in fix.text
        shot("12-run", whole_page=True)
        fixer.click()
        wait_until(chrome, lambda: chrome.find_element(By.TAG_NAME, "h1").text
                   == f"Run {fixed} succeeded")
        (fixed_pattern,) = chrome.find_elements(By.CSS_SELECTOR, "ul.fixed > li")
        assert fixed_pattern.find_element(By.CSS_SELECTOR, "a.record-link").text \
            == "TimeoutError: connection to <*> timed out after <*>"
        assert [a.get_attribute("href").rsplit("/", 1)[1] for a in
                fixed_pattern.find_elements(By.CSS_SELECTOR, "a.run-link")] == [failed]
        shot("13-run-that-fixed", whole_page=True)
        # Its digest's page leads back to the run.
        digest_link = chrome.find_element(By.CSS_SELECTOR, "[data-page=run] table a.record-link")
        assert digest_link.text == f"Run {fixed} succeeded (AUTH-7)"
        digest_link.click()
        back = wait_for(chrome, By.CSS_SELECTOR, "[data-page=record] a.run-link")
        assert back.get_attribute("href").endswith(f"#/run/{fixed}")

        # The merges: every id a link, named by the start of its text, no commas between.
        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=reports]").click()
        card = wait_for(chrome, By.CSS_SELECTOR,
                        f"article.report[data-report-id='{report['report_id']}']")
        clusters = card.find_elements(By.CSS_SELECTOR, "li.cluster")
        assert len(clusters) == 3
        named = {frozenset(record_id for record_id, _ in links_named_by_text(cluster))
                 for cluster in clusters}
        assert {frozenset([*vpn, vpn_merge]),
                frozenset([*approvals, approvals_merge])} <= named
        for cluster in clusters:
            assert "," not in cluster.text, cluster.text
        # Finn's memories are named by their ids alone to this key.
        finn_merge = merges[frozenset(finn[:2])]
        finn_cluster = next(c for c in clusters if finn_merge in c.get_attribute("innerHTML"))
        assert sorted(a.text for a in finn_cluster.find_elements(By.CSS_SELECTOR, "a")) \
            == sorted([finn_merge, *finn[:2]])
        new = card.find_element(By.CSS_SELECTOR, "[data-field=new]")
        assert sorted(a.get_attribute("href").rsplit("/", 1)[1] for a in
                      new.find_elements(By.TAG_NAME, "a")) == sorted(merges.values())
        assert card.find_element(By.CSS_SELECTOR, "[data-field=superseded]").text == "none", \
            "drafts supersede nothing"
        shot("14-reports-merged", whole_page=True)

        # Untitled memories are named by their text in the graph, drafts ringed.
        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=graph]").click()
        node = wait_for(chrome, By.CSS_SELECTOR, f"#graph g.node[data-record-id='{vpn[0]}']")
        assert node.find_element(By.TAG_NAME, "text").text == label_of(VPN[0], words=5)
        drafts = chrome.find_elements(By.CSS_SELECTOR, "#graph g.node.draft")
        assert sorted(d.get_attribute("data-record-id") for d in drafts) == sorted(
            [vpn_merge, approvals_merge])
        legend = chrome.find_element(By.CSS_SELECTOR, "ul.legend").text.split("\n")
        assert legend == ["fact", "draft, awaiting review", "entity (a name records mention)",
                          "related", "wiki-link", "mentions"]
        shot("15-graph-labels", whole_page=True)

        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=search]").click()
        query = wait_for(chrome, By.CSS_SELECTOR, "[data-page=search] input[name=query]")
        query.send_keys("which connections does the staging database accept")
        chrome.find_element(By.CSS_SELECTOR, "[data-page=search] button").click()
        wait_for(chrome, By.CSS_SELECTOR, f".hit a[href='#/record/{vpn[0]}']")
        hits = links_named_by_text(chrome.find_element(By.CSS_SELECTOR, "ol.hits"))
        assert set(vpn) <= {record_id for record_id, _ in hits}
        shot("16-search-untitled")

        # The draft merges wait in the review queue, each with its members: approve one there.
        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=review]").click()
        wait_for(chrome, By.CSS_SELECTOR, "[data-page=review] article.review-item")
        items = chrome.find_elements(By.CSS_SELECTOR, "article.review-item")
        assert sorted((i.get_attribute("data-kind"), i.get_attribute("data-item-id"))
                      for i in items) == sorted([("draft_merge", vpn_merge),
                                                 ("draft_merge", approvals_merge)])
        assert text_of(chrome, "review-summary").startswith("2 draft merges, oldest first.")
        for merge, members in ((vpn_merge, vpn), (approvals_merge, approvals)):
            item = chrome.find_element(By.CSS_SELECTOR, f"article[data-item-id='{merge}']")
            assert item.find_element(By.CSS_SELECTOR, ".text.proposed").text == texts[merge]
            listed = {li.get_attribute("data-record-id"): li.find_element(
                By.CSS_SELECTOR, ".excerpt").text for li in item.find_elements(
                    By.CSS_SELECTOR, "ul.members > li")}
            assert listed == {member: texts[member] for member in members}
            assert set(dict(links_named_by_text(item))) == {merge, *members}
        shot("17-review-queue", whole_page=True)
        item = chrome.find_element(By.CSS_SELECTOR, f"article[data-item-id='{vpn_merge}']")
        item.find_element(By.CSS_SELECTOR, "button[data-decision=approve]").click()
        outcome = item.find_element(By.CSS_SELECTOR, ".outcome")
        wait_until(chrome, lambda: "applied" in (outcome.get_attribute("class") or ""),
                   explain=lambda: outcome.text)
        assert outcome.text == (f"Approved: {vpn_merge} now stands for its 3 members, which "
                                "search no longer shows.")
        shot("18-review-approved", whole_page=True)

        # A member's page offers the draft that would replace it; the draft's own page lists
        # its members and decides it too: rejected there.
        chrome.find_element(By.CSS_SELECTOR, f"article[data-item-id='{approvals_merge}'] "
                            f"ul.members a[href='#/record/{approvals[0]}']").click()
        offered = wait_for(chrome, By.CSS_SELECTOR,
                           f"#record-review article[data-item-id='{approvals_merge}']")
        assert chrome.find_element(By.TAG_NAME, "h1").text == label_of(texts[approvals[0]])
        assert offered.find_elements(By.CSS_SELECTOR, "button[data-decision]")
        assert chrome.find_elements(By.ID, "record-members") == [], "a member merges nothing"
        offered.find_element(By.CSS_SELECTOR, "h3 a.record-link").click()
        members = wait_for(chrome, By.CSS_SELECTOR, "#record-members ul.members")
        assert sorted(li.get_attribute("data-record-id") for li in members.find_elements(
            By.CSS_SELECTOR, "li")) == sorted(approvals)
        assert {badge.text for badge in members.find_elements(By.CSS_SELECTOR, ".badge")} \
            == {"approved"}, "the members stay live while the merge is a draft"
        item = chrome.find_element(
            By.CSS_SELECTOR, f"#record-review article[data-item-id='{approvals_merge}']")
        item.find_element(By.CSS_SELECTOR, "input[name=note]").send_keys("two rules, not one")
        item.find_element(By.CSS_SELECTOR, "button[data-decision=reject]").click()
        outcome = item.find_element(By.CSS_SELECTOR, ".outcome")
        wait_until(chrome, lambda: "applied" in (outcome.get_attribute("class") or ""),
                   explain=lambda: outcome.text)
        assert outcome.text == (f"Rejected: {approvals_merge} is deprecated; its members stay "
                                "as they were.")
        shot("19-draft-merge-rejected", whole_page=True)

        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=review]").click()
        wait_until(chrome, lambda: text_of(chrome, "review-summary")
                   == "Nothing waits for review.")

    await asyncio.to_thread(drive)
    assert sorted(p.name for p in screenshots.glob("1[0-9]-*.png")) == [
        "10-overview.png", "11-runs.png", "12-run.png", "13-run-that-fixed.png",
        "14-reports-merged.png", "15-graph-labels.png", "16-search-untitled.png",
        "17-review-queue.png", "18-review-approved.png", "19-draft-merge-rejected.png"]
    # What the page decided is what is stored: the members of the approved merge superseded
    # by it, those of the rejected one live.
    for merge, members, state, by in ((vpn_merge, vpn, "approved", vpn_merge),
                                      (approvals_merge, approvals, "deprecated", None)):
        lineage = (await http.get(f"/v1/records/{merge}",
                                  params={"namespace": namespace})).json()
        assert lineage["record"]["review_state"] == state
        assert sorted((m["record_id"], m["superseded_by"]) for m in lineage["members"]) == \
            sorted((member, by) for member in members)


@needs_chromium
async def test_dead_letters_and_why_a_search_found_nothing(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    chrome: Any, screenshots: Path, namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
        bastion = await publisher.write_memory(namespace, BASTION, title="Bastion host",
                                               memory_type="fact")
        await announced(updates, bastion, [("created", 1)])
    # Sent raw, as kcat would: three events of an unknown type (a token in each), then JSON
    # cut short and bytes that are not UTF-8, which name no namespace anyone could read.
    key = namespace.encode()
    not_utf8 = b'{"namespace": "' + key + b'", "text": "caf\xe9"}'
    await produce(stack.broker.bootstrap, "memory.events",
                  [(key, unknown_type(namespace)) for _ in range(3)]
                  + [(key, b'{"event_id": "half-written'), (key, not_utf8)])
    ours = await dead_letters_keyed(http, namespace, 5)
    unknown = [d for d in ours if d["reason"] == "unknown_type"]
    assert [d["namespace"] for d in unknown] == [namespace] * 3
    # The operator's key: every namespace's dead letters, and a search in any namespace.
    operator = stack.operator_key
    typo = f"{namespace}x"

    def rows(chrome: Any) -> list[Any]:
        return list(chrome.find_elements(By.CSS_SELECTOR, "tbody.dead-letter"))

    def shown_ids() -> list[str]:
        return [row.get_attribute("data-dead-letter-id") for row in rows(chrome)]

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        # The copy button writes to the clipboard, which the test reads back.
        chrome.execute_cdp_cmd("Browser.grantPermissions", {
            "origin": worker.base_url,
            "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
        sign_in(chrome, worker, operator, namespace)

        card = wait_for(chrome, By.CSS_SELECTOR, "[data-card=dead-letters]")
        assert card.find_element(By.CSS_SELECTOR, ".figure").text == "3"
        assert [a.text for a in card.find_elements(By.CSS_SELECTOR, "a[data-reason]")] == [
            "3 unknown_type"]
        shot("20-overview-operator", whole_page=True)

        card.find_element(By.LINK_TEXT, "All dead letters").click()
        wait_until(chrome, lambda: len(rows(chrome)) == 3)
        assert shown_ids() == [d["dead_letter_id"] for d in unknown], "newest first"
        assert chrome.find_element(By.TAG_NAME, "h1").text == f"Dead letters · {namespace}"
        for row, letter in zip(rows(chrome), unknown, strict=True):
            cells = row.find_elements(By.CSS_SELECTOR, "tr:first-child > td")
            assert [cells[1].text.split(" ")[0], cells[2].text.split("\n")[0], cells[3].text,
                    cells[4].text] == ["memory.events", "unknown_type", "Rejected", namespace]
            first_bytes = row.find_element(By.CSS_SELECTOR, "pre.first-bytes").text
            assert first_bytes == letter["first_bytes"]
            assert "[REDACTED:github_token]" in first_bytes and SECRET not in first_bytes
            assert row.find_elements(By.CSS_SELECTOR, ".not-utf8") == []
            assert row.find_element(By.CSS_SELECTOR, "code.replay-command").text \
                == letter["replay_command"]
        reasons = chrome.find_elements(By.CSS_SELECTOR, "#dead-letter-reasons a")
        assert [a.text for a in reasons][:2] == ["all (3)", "unknown_type (3)"]
        first = rows(chrome)[0]
        first.find_element(By.CSS_SELECTOR, "button.copy").click()
        wait_until(chrome, lambda: first.find_element(By.CSS_SELECTOR, ".copied").text
                   == "Copied.", explain=lambda: first.find_element(
                       By.CSS_SELECTOR, ".copied").text)
        copied = chrome.execute_async_script(
            "navigator.clipboard.readText().then(arguments[0])")
        assert copied == unknown[0]["replay_command"]
        assert "--topic memory.events.dlq --reason unknown_type --since " in copied
        shot("21-dead-letters", whole_page=True)

        # Two a page: the older ones follow the cursor.
        chrome.get(f"{worker.base_url}/ui/#/dead-letters?limit=2")
        wait_until(chrome, lambda: shown_ids() == [d["dead_letter_id"] for d in unknown[:2]])
        chrome.find_element(By.ID, "dead-letters-older").click()
        wait_until(chrome, lambda: shown_ids() == [unknown[2]["dead_letter_id"]])
        assert chrome.find_elements(By.ID, "dead-letters-older") == []
        assert "before=" in chrome.current_url

        # Every namespace's, by reason: what names no namespace, the bytes that are not UTF-8
        # flagged and shown escaped.
        chrome.get(f"{worker.base_url}/ui/#/dead-letters")
        wait_until(chrome, lambda: len(rows(chrome)) == 3)
        chrome.find_element(By.CSS_SELECTOR, "#dead-letter-reasons a.scope").click()
        wait_until(chrome, lambda: chrome.find_element(By.TAG_NAME, "h1").text
                   == "Dead letters · every namespace")
        wait_for(chrome, By.CSS_SELECTOR, "#dead-letter-reasons a[data-reason=malformed_json]"
                 ).click()
        wait_until(chrome, lambda: "reason=malformed_json" in chrome.current_url
                   and all(row.find_element(By.CSS_SELECTOR, ".reason").text
                           == "malformed_json" for row in rows(chrome)))
        broken = {row.find_element(By.CSS_SELECTOR, "pre.first-bytes").text: row
                  for row in rows(chrome) if row.find_element(
                      By.CSS_SELECTOR, "code.key").text == namespace}
        escaped = '{"namespace": "' + namespace + '", "text": "caf\\xe9"}'
        assert set(broken) == {'{"event_id": "half-written', escaped}
        assert broken[escaped].find_element(By.CSS_SELECTOR, ".not-utf8").text \
            == "not UTF-8: shown as \\xNN"
        assert broken['{"event_id": "half-written'].find_elements(
            By.CSS_SELECTOR, ".not-utf8") == []
        assert all(row.find_elements(By.TAG_NAME, "td")[4].text == "none"
                   for row in broken.values()), "the namespace column: none named"
        shot("22-dead-letters-every-namespace")

        # A search that finds nothing says why: nothing relevant, or no such namespace.
        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=search]").click()
        query = wait_for(chrome, By.CSS_SELECTOR, "[data-page=search] input[name=query]")
        query.send_keys("quarterly revenue of the bakery franchise")
        chrome.find_element(By.CSS_SELECTOR, "[data-page=search] button").click()
        wait_until(chrome, lambda: text_of(chrome, "search-empty").startswith(
            "Nothing relevant: no match reaches the min score (0.5, the default)."))
        assert chrome.find_elements(By.CSS_SELECTOR, ".hit") == []
        shot("23-search-nothing-relevant")
        chrome.find_element(By.ID, "search-weaker").click()
        hit = wait_for(chrome, By.CSS_SELECTOR, f".hit a[href='#/record/{bastion}']")
        assert hit.text == "Bastion host"
        relevance = chrome.find_element(By.CSS_SELECTOR, ".hit .score").text
        assert relevance.startswith("relevance ") and float(relevance.split()[1]) < 0.5
        assert chrome.find_element(By.CSS_SELECTOR, "input[name=min_score]"
                                   ).get_attribute("value") == "0"

        chrome.find_element(By.ID, "namespace").clear()
        chrome.find_element(By.ID, "namespace").send_keys(typo)
        chrome.find_element(By.CSS_SELECTOR, "#namespace-form button").click()
        wait_until(chrome, lambda: text_of(chrome, "search-empty")
                   == f"Namespace {typo} holds no records: is its name spelled right?")
        shot("24-search-no-such-namespace")

    await asyncio.to_thread(drive)
    assert sorted(p.name for p in screenshots.glob("2[0-4]-*.png")) == [
        "20-overview-operator.png", "21-dead-letters.png", "22-dead-letters-every-namespace.png",
        "23-search-nothing-relevant.png", "24-search-no-such-namespace.png"]


@needs_chromium
async def test_the_scoring_settings_show_the_parameters_and_an_admin_changes_them(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, chrome: Any, screenshots: Path,
    namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    reader = stack.make_key("--namespace", namespace, "--perm", "read,write,review")
    admin = stack.make_key("--namespace", namespace, "--perm", "admin")
    admin_id = admin.split("_")[1]

    def rows() -> dict[str, Any]:
        return {row.get_attribute("data-parameter"): row for row in chrome.find_elements(
            By.CSS_SELECTOR, "table.scoring tr[data-parameter]")}

    def value_input(name: str) -> Any:
        return rows()[name].find_element(By.CSS_SELECTOR, "input")

    def set_value(name: str, value: str) -> None:
        field = value_input(name)
        field.clear()
        field.send_keys(value)

    def outcome() -> Any:
        return chrome.find_element(By.ID, "scoring-outcome")

    def open_with(key: str) -> None:
        chrome.get(f"{worker.base_url}/ui/")
        chrome.execute_script("sessionStorage.clear()")
        sign_in(chrome, worker, key, namespace, "#/scoring")
        wait_for(chrome, By.CSS_SELECTOR, "[data-page=scoring] table.scoring")

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        # Any key of the namespace reads the settings; only an admin's changes them.
        open_with(reader)
        assert chrome.find_element(By.CSS_SELECTOR, "nav a.active").text == "Scoring"
        assert text_of(chrome, "scoring-version") == "Version 0: the defaults, never changed."
        shown = rows()
        assert len(shown) == 12
        boost = shown["blend_boost_factor"]
        assert [cell.text for cell in boost.find_elements(By.TAG_NAME, "td")][2:4] == [
            "0.3", "[0, 1]"]
        assert value_input("blend_boost_factor").get_attribute("value") == "0.3"
        assert value_input("min_valuations_for_signal").get_attribute("step") == "1"
        assert text_of(chrome, "scoring-history") == ""
        set_value("blend_boost_factor", "0.2")
        chrome.find_element(By.CSS_SELECTOR, "#scoring-form button[type=submit]").click()
        wait_until(chrome, lambda: "error" in (outcome().get_attribute("class") or ""))
        assert f"key {reader.split('_')[1]} may not admin" in outcome().text
        shot("30-scoring-read-only")

        open_with(admin)
        set_value("blend_boost_factor", "0.2")
        set_value("recency_half_life_days", "14")
        chrome.find_element(By.CSS_SELECTOR, "#scoring-form button[type=submit]").click()
        wait_until(chrome, lambda: "applied" in (outcome().get_attribute("class") or ""),
                   explain=lambda: outcome().text)
        assert outcome().text == "Applied: the config is at version 1."
        assert text_of(chrome, "scoring-version").startswith(
            f"Version 1, changed by key:{admin_id}, ")
        assert value_input("blend_boost_factor").get_attribute("value") == "0.2"
        assert "changed" in (rows()["recency_half_life_days"].get_attribute("class") or "")
        history = chrome.find_elements(By.CSS_SELECTOR, "#scoring-history tr[data-version]")
        assert [row.find_elements(By.TAG_NAME, "td")[2].text for row in history] == [
            f"key:{admin_id}"]
        assert history[0].find_element(By.CSS_SELECTOR, "td.changes").text == \
            "blend_boost_factor = 0.2, recency_half_life_days = 14"
        shot("31-scoring-changed", whole_page=True)

        # Weights that do not sum to 1: refused with the reason, nothing sent.
        set_value("blend_usefulness_weight", "0.9")
        chrome.find_element(By.CSS_SELECTOR, "#scoring-form button[type=submit]").click()
        wait_until(chrome, lambda: "error" in (outcome().get_attribute("class") or ""))
        problems = [li.text for li in outcome().find_elements(By.CSS_SELECTOR, "li")]
        assert outcome().text.startswith("The change was refused:")
        assert problems == ["blend_usefulness_weight + blend_recency_weight + "
                            "blend_frequency_weight must sum to 1 (got 1.2999999999999998)"]
        shot("32-scoring-refused", whole_page=True)

    await asyncio.to_thread(drive)
    # What the browser showed is what the worker has: one version, by the admin's key.
    answer = (await http.get("/v1/memory-scoring/config/history",
                             params={"namespace": namespace})).json()
    assert [(v["version"], v["changes"], v["changed_by"]) for v in answer["versions"]] == [
        (1, {"blend_boost_factor": 0.2, "recency_half_life_days": 14}, f"key:{admin_id}")]
    assert sorted(p.name for p in screenshots.glob("3[0-2]-*.png")) == [
        "30-scoring-read-only.png", "31-scoring-changed.png", "32-scoring-refused.png"]


@needs_chromium
async def test_a_record_page_shows_the_agents_scores_and_rates_it(
    stack: Stack, worker: Worker, updates: TopicReader, chrome: Any, screenshots: Path,
    namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
        bastion = await publisher.write_memory(namespace, BASTION, title="Bastion host",
                                               memory_type="fact")
        await announced(updates, bastion, [("created", 1)])
    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")
    admin = stack.make_key("--namespace", namespace, "--perm", "read,admin")

    def cells(agent: str) -> list[str]:
        row = chrome.find_elements(By.CSS_SELECTOR, f"#record-scores tr[data-agent={agent}]")
        return [cell.text for cell in row[0].find_elements(By.TAG_NAME, "td")] if row else []

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        sign_in(chrome, worker, ann, namespace)
        wait_for(chrome, By.CSS_SELECTOR, "[data-page=overview]")
        chrome.get(f"{worker.base_url}/ui/#/record/{bastion}")
        wait_for(chrome, By.CSS_SELECTOR, "#record-scores tr[data-agent=ann]")
        # Never used by Ann: neutral usefulness, the recency floor, no recalls, no ratings.
        assert cells("ann") == ["0.375", "0.5", "0.3", "0", "0.8125", "0 (0)", "0"]
        chrome.find_element(By.CSS_SELECTOR, "#record-scores button[data-useful=yes]").click()
        wait_until(chrome, lambda: cells("ann")[5:6] == ["1 (1)"],
                   explain=lambda: f"ratings cell {cells('ann')}")
        assert len(chrome.find_elements(By.CSS_SELECTOR, "#record-scores .valuations li")) == 1
        shot("30-record-scores")

        # An admin key bound to no agent sees every agent's row.
        chrome.find_element(By.ID, "forget-key").click()
        chrome.find_element(By.ID, "key").send_keys(admin)
        chrome.find_element(By.CSS_SELECTOR, "#key-form button").click()
        chrome.get(f"{worker.base_url}/ui/#/record/{bastion}")
        wait_for(chrome, By.CSS_SELECTOR, "#record-scores tr[data-agent=ann]")
        assert cells("ann")[:1] + cells("ann")[6:7] == ["ann", "1 (1)"]
        assert chrome.find_elements(By.CSS_SELECTOR, "#record-scores button") == []

    await asyncio.to_thread(drive)


@needs_chromium
async def test_the_pack_preview_shows_each_section_and_what_it_costs(
    stack: Stack, worker: Worker, updates: TopicReader, chrome: Any, screenshots: Path,
    namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
        memories = [await publisher.write_memory(namespace, text, memory_type="fact")
                    for text in (VPN_V1, BASTION)]
        await publisher.edit_block(namespace, "ann", "human",
                                   set={"USER": "Alice | On-call engineer"})
        for memory in memories:
            await announced(updates, memory, [("created", 1)])
    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")

    def rows() -> dict[str, list[str]]:
        return {row.get_attribute("data-section"): [cell.text for cell in
                                                    row.find_elements(By.TAG_NAME, "td")]
                for row in chrome.find_elements(By.CSS_SELECTOR, "#pack-sections tr[data-section]")}

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        sign_in(chrome, worker, ann, namespace)
        wait_for(chrome, By.CSS_SELECTOR, "[data-page=overview]")
        chrome.get(f"{worker.base_url}/ui/#/pack")
        form = wait_for(chrome, By.ID, "pack-form")
        form.find_element(By.NAME, "query").send_keys(
            "How do deploys reach staging through the bastion host?")
        form.find_element(By.NAME, "budget_tokens").send_keys("300")
        form.find_element(By.CSS_SELECTOR, "button").click()
        wait_until(chrome, lambda: "long_term" in rows() and "core" in rows(),
                   explain=lambda: f"rows {rows()}")
        # section, share, used, items: the core's share is half the budget; the sections
        # share what it leaves.
        table = rows()
        assert list(table) == ["core", "planning", "history", "long_term", "documents"]
        core_used = int(table["core"][2])
        assert table["core"][1] == "150" and core_used > 0 and table["core"][3] == "1"
        assert sum(int(table[name][1]) for name in list(table)[1:]) <= 300 - core_used
        assert int(table["long_term"][3]) == 2
        shown = {link.get_attribute("href").rsplit("/", 1)[-1] for link in chrome.find_elements(
            By.CSS_SELECTOR, "[data-section=long_term] a.record-link")}
        assert shown == set(memories)
        summary = chrome.find_element(By.ID, "pack-summary").text
        used = sum(int(cells[2]) for cells in table.values())
        assert summary.startswith(f"{used} of 300 tokens")
        assert chrome.find_elements(By.CSS_SELECTOR, "#pack-bar .pack-part.long_term")
        assert "Alice" in chrome.find_element(By.CSS_SELECTOR, "li[data-block=human]").text
        shot("40-pack-preview", whole_page=True)

    await asyncio.to_thread(drive)


@needs_chromium
async def test_the_gaps_page_shows_what_agents_needed_and_what_answered_it(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    chrome: Any, screenshots: Path, namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    await answered_memory(http, updates, namespace, UNRELATED)
    ann = stack.make_key("--namespace", namespace, "--perm", "read", "--agent", "ann")
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=20,
                                 headers={"Authorization": f"Bearer {ann}"}) as as_ann:
        for query in (QUESTION, REWORDED, QUESTION):
            found = await as_ann.get("/v1/search", params={"namespace": namespace,
                                                           "query": query})
            assert found.json()["hits"] == [], found.text
        await gaps_until(as_ann, namespace, "open", lambda groups: len(groups) == 1
                         and groups[0]["gap_count"] == 2)
        answer = await answered_memory(http, updates, namespace, ANSWER)
        await gaps_until(as_ann, namespace, "resolved", lambda groups: len(groups) == 1)
        missed = await as_ann.get("/v1/search", params={
            "namespace": namespace, "query": "which printer on the fourth floor takes A3"})
        assert missed.json()["hits"] == []
        await gaps_until(as_ann, namespace, "open", lambda groups: len(groups) == 1)

    def cards() -> list[Any]:
        return list(chrome.find_elements(By.CSS_SELECTOR, "article.gap"))

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        sign_in(chrome, worker, ann, namespace, "#/gaps")
        wait_until(chrome, lambda: len(cards()) == 1)
        assert chrome.find_element(By.TAG_NAME, "h1").text == f"Gaps · {namespace}"
        (still_open,) = cards()
        assert still_open.find_element(By.CSS_SELECTOR, ".question").text \
            == "which printer on the fourth floor takes A3"
        assert still_open.find_element(By.CSS_SELECTOR, ".badge").text == "open"
        shot("30-gaps-open")

        chrome.find_element(By.CSS_SELECTOR, "#gap-status a[data-status=resolved]").click()
        wait_until(chrome, lambda: "status=resolved" in chrome.current_url
                   and len(cards()) == 1 and cards()[0].find_elements(
                       By.CSS_SELECTOR, ".answered"))
        (resolved,) = cards()
        assert resolved.find_element(By.CSS_SELECTOR, ".question").text == QUESTION
        assert resolved.find_element(By.CSS_SELECTOR, ".badge").text == "resolved"
        assert resolved.find_element(By.CSS_SELECTOR, ".met").text.startswith(
            "Met 3 times by ann, first ")
        rows = resolved.find_elements(By.CSS_SELECTOR, "table.gaps tbody tr")
        assert [row.find_element(By.CSS_SELECTOR, ".gap-text").text for row in rows] == [
            QUESTION, REWORDED], "the most met first"
        assert [row.find_elements(By.TAG_NAME, "td")[3].text for row in rows] == ["2", "1"]
        link = resolved.find_element(By.CSS_SELECTOR, f".answered a[href='#/record/{answer}']")
        assert link.text == label_of(ANSWER)
        shot("31-gaps-resolved", whole_page=True)
        link.click()
        wait_until(chrome, lambda: chrome.current_url.endswith(f"#/record/{answer}"))

    await asyncio.to_thread(drive)


@needs_chromium
async def test_the_documents_page_lists_documents_and_shows_a_documents_chunks(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, chrome: Any, screenshots: Path,
    namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    for doc_id, text in (("guide/install.md", INSTALL), ("notes.txt", "One paragraph.")):
        answer = await http.post("/v1/documents", json={
            "namespace": namespace, "doc_id": doc_id, "text": text, "repo": "acme/app",
            "content_type": "markdown" if doc_id.endswith(".md") else "text"})
        assert answer.status_code == 202, answer.text
    install = await applied(http, namespace, "guide/install.md", 1)
    await applied(http, namespace, "notes.txt", 1)
    reader = stack.make_key("--namespace", namespace, "--perm", "read")

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        sign_in(chrome, worker, reader, namespace, "#/documents")
        wait_until(chrome, lambda: len(chrome.find_elements(
            By.CSS_SELECTOR, "table.documents tbody tr")) == 2)
        assert chrome.find_element(By.TAG_NAME, "h1").text == f"Documents · {namespace}"
        rows = chrome.find_elements(By.CSS_SELECTOR, "table.documents tbody tr")
        assert [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")][:5]
                for row in rows] == [["guide/install.md", "—", "acme/app", "3", "1"],
                                     ["notes.txt", "—", "acme/app", "1", "1"]]
        shot("40-documents")
        rows[0].find_element(By.CSS_SELECTOR, "a.document-link").click()
        wait_until(chrome, lambda: len(chrome.find_elements(By.CSS_SELECTOR, "li.chunk")) == 3)
        assert chrome.current_url.endswith("#/documents/guide%2Finstall.md")
        chunks = chrome.find_elements(By.CSS_SELECTOR, "li.chunk")
        assert [c.find_element(By.CSS_SELECTOR, ".heading-path").text for c in chunks] == [
            "Install", "Install > From source", "Install > Troubleshooting"]
        assert [c.get_attribute("data-record-id") for c in chunks] == \
            [c["record_id"] for c in install["chunks"]]
        assert [c.find_element(By.CSS_SELECTOR, ".tokens").text for c in chunks] == \
            [f"{c['token_count']} tokens" for c in install["chunks"]]
        assert "./scripts/build --release" in chunks[1].find_element(
            By.CSS_SELECTOR, ".chunk-text").text
        shot("41-document", whole_page=True)

    await asyncio.to_thread(drive)


@needs_chromium
async def test_the_planning_page_lists_a_repos_items_and_an_items_page_its_plan(
    stack: Stack, worker: Worker, chrome: Any, screenshots: Path, namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "beads" / "beads-2026-02"
    checkout = planning_checkout(stack, "beads-browser") / ".beads"
    checkout.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fixture / "issues.jsonl", checkout / "issues.jsonl")
    reader = stack.make_key("--namespace", namespace, "--perm", "read")

    def rows() -> dict[str, Any]:
        return {row.get_attribute("data-item-id"): row
                for row in chrome.find_elements(By.CSS_SELECTOR, "table.planning tr[data-item-id]")}

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        sign_in(chrome, worker, reader, namespace, "#/planning?repo=beads-browser")
        wait_until(chrome, lambda: len(rows()) == 12)
        shown = rows()
        # The molecule's steps block one another in a chain: of them, its first step alone is
        # ready, beside the molecule itself.
        assert [item for item, row in shown.items()
                if row.find_element(By.CSS_SELECTOR, ".ready").text == "ready"] == \
            ["bd-wisp-3tmpl", "bd-wisp-y7xh7"]
        assert shown["bd-wisp-dm5w3"].find_element(By.CSS_SELECTOR, ".blockers").text == \
            "bd-wisp-y7xh7"
        assert shown["bd-wisp-dm5w3"].find_element(By.CSS_SELECTOR, ".title").text == \
            "Scan merge queue"
        shot("42-planning")
        shown["bd-wisp-dm5w3"].find_element(By.CSS_SELECTOR, "a.planning-item").click()
        wait_until(chrome, lambda: bool(chrome.find_elements(By.ID, "planning-blockers")))
        assert chrome.find_element(By.TAG_NAME, "h1").text.startswith(
            "bd-wisp-dm5w3 · Scan merge queue")
        assert [li.get_attribute("data-item-id") for li in chrome.find_elements(
            By.CSS_SELECTOR, "#planning-blockers li")] == ["bd-wisp-y7xh7"]
        assert [li.get_attribute("data-item-id") for li in chrome.find_elements(
            By.CSS_SELECTOR, "#planning-siblings li")] == ["bd-wisp-y7xh7"]
        # The item's page is under the Planning menu entry.
        assert "active" in chrome.find_element(
            By.CSS_SELECTOR, "nav a[data-route=planning]").get_attribute("class")
        shot("43-planning-item", whole_page=True)

    await asyncio.to_thread(drive)


def label_of(text: str, words: int = 8) -> str:
    """What the browser names an untitled record by: the first words of its text."""
    split = text.split()
    start = " ".join(split[:words])
    return f"{start}…" if len(split) > words else start


async def reports_of(http: httpx.AsyncClient, namespace: str) -> list[Any]:
    answer = await http.get("/v1/consolidation/reports", params={"namespace": namespace})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["reports"])


async def eventually(read: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not done(value := await read()):
        assert loop.time() < deadline, f"still {value!r}"
        await asyncio.sleep(0.2)
    return value


class Shot(Protocol):
    def __call__(self, name: str, *, whole_page: bool = False) -> None: ...


def screenshot_taker(chrome: Any, directory: Path) -> Shot:
    def shot(name: str, *, whole_page: bool = False) -> None:
        """The window as it is, or (`whole_page`) grown to the page's height for the shot."""
        size = chrome.get_window_size()
        if whole_page:
            page, frame = chrome.execute_script(
                "return [document.documentElement.scrollHeight,"
                " window.outerHeight - window.innerHeight]")
            chrome.set_window_size(size["width"], max(size["height"], page + frame))
        try:
            assert chrome.save_screenshot(str(directory / f"{name}.png")), name
        finally:
            chrome.set_window_size(size["width"], size["height"])

    return shot


def text_of(chrome: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    found = chrome.find_elements(By.ID, element_id)
    return str(found[0].text) if found else ""


def wait_until(chrome: Any, condition: Callable[[], bool],
               explain: Callable[[], str] = lambda: "") -> None:
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(chrome, WAIT_S, poll_frequency=0.1,
                      ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda _: condition())
    except TimeoutException:
        status = text_of(chrome, "status")
        raise AssertionError(f"timed out on {chrome.current_url}: {explain()} {status}"
                             ) from None



def sign_in(chrome: Any, worker: Worker, key: str, namespace: str, page: str = "") -> None:
    """Open the browser at `page` (a route such as `#/gaps`; the overview when empty) and
    give it `key` and `namespace` in its form, as a user does."""
    from selenium.webdriver.common.by import By

    chrome.get(f"{worker.base_url}/ui/{page}")
    chrome.find_element(By.ID, "key").send_keys(key)
    chrome.find_element(By.ID, "key-namespace").send_keys(namespace)
    chrome.find_element(By.CSS_SELECTOR, "#key-form button").click()


def wait_for(chrome: Any, by: str, selector: str) -> Any:
    wait_until(chrome, lambda: bool(chrome.find_elements(by, selector)),
               explain=lambda: f"no {selector}")
    return chrome.find_elements(by, selector)[0]


@needs_chromium
async def test_the_graph_walks_from_a_record_or_an_entity_and_a_stale_fact_says_what_replaced_it(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, chrome: Any,
    screenshots: Path, namespace: str,
) -> None:
    from selenium.webdriver.common.by import By

    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        anchor = await publisher.write_memory(
            namespace, "Atlas is the billing rewrite; card payments go through "
            "[[Payments gateway]].", title="Project: Atlas")
        gateway = await publisher.write_memory(
            namespace, "The gateway writes every charge to [[Ledger database]].",
            title="Payments gateway")
        ledger = await publisher.write_memory(
            namespace, "The Ledger database keeps charges for 7 years.",
            title="Ledger database", scope="personal", agent_id="ann")
        for record_id in (anchor, gateway, ledger):
            await announced(updates, record_id, [("created", 1)])
        before = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 1))
        await asyncio.sleep(2.5)
        newer = await publisher.write_memory(
            namespace, "The Ledger database keeps charges for 10 years.",
            title="Ledger database", scope="personal", agent_id="ann")
        await announced(updates, ledger, [("created", 1), ("invalidated", 2)])
        await announced(updates, newer, [("created", 1)])
    await entities_indexed(http, namespace, {"atlas", "payments gateway", "ledger database"})
    key = stack.make_key("--namespace", namespace, "--perm", "read", "--agent", "ann")

    def drive() -> None:
        shot = screenshot_taker(chrome, screenshots)
        sign_in(chrome, worker, key, namespace, f"#/graph?from={anchor}&depth=2")

        def records() -> set[str]:
            return {node.get_attribute("data-record-id") for node in chrome.find_elements(
                By.CSS_SELECTOR, "#graph g.node[data-record-id]")}

        wait_until(chrome, lambda: records() == {anchor, gateway, newer})
        assert chrome.find_elements(By.CSS_SELECTOR, "#graph g.node.entity")
        assert text_of(chrome, "graph-summary").endswith(f"within 2 hops of {anchor}")
        shot("50-graph-around")
        # One hop: the ledger is two away.
        depth = chrome.find_element(By.CSS_SELECTOR, "#graph-form select[name=depth]")
        depth.find_element(By.CSS_SELECTOR, "option[value='1']").click()
        chrome.find_element(By.CSS_SELECTOR, "#graph-form button").click()
        wait_until(chrome, lambda: records() == {anchor, gateway})
        # As of before the newer fact, the stale one is in force, and in the graph.
        chrome.get(f"{worker.base_url}/ui/#/graph?from={anchor}&depth=2&as_of={before}")
        wait_until(chrome, lambda: records() == {anchor, gateway, ledger})
        assert text_of(chrome, "graph-summary").endswith(
            f"as of {before.replace('T', ' ')} UTC")
        shot("51-graph-as-of")
        # An entity draws the graph around it.
        chrome.find_element(By.CSS_SELECTOR, "#graph g.node.entity[data-entity='atlas'] rect"
                            ).click()
        wait_until(chrome, lambda: "from=entity%3Aatlas" in chrome.current_url)
        wait_until(chrome, lambda: anchor in records())
        # The stale fact's page says what superseded it, and when.
        chrome.get(f"{worker.base_url}/ui/#/record/{ledger}")
        superseded = wait_for(chrome, By.ID, "record-superseded")
        assert superseded.text.startswith(f"Superseded by {newer} on ")
        shot("52-record-superseded")

    await asyncio.to_thread(drive)
