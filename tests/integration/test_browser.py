"""The memory browser in a real headless Chromium (the Debian package, driven through its own
chromedriver, so that nothing is downloaded) against the real stack: the key form, search,
a record with two versions and their diff, a pending diff approved and seen applied,
the consolidation reports and the graph. Each step is saved as a screenshot, in
`MEMSTREAM_SCREENSHOTS` or the test's temporary directory (the path is printed)."""

from __future__ import annotations

import asyncio
import http.client
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from client.publisher import Publisher
from harness.kafka_io import TopicReader
from harness.stack import Stack, Worker
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
        assert chrome.find_element(By.CSS_SELECTOR,
                                   f"article.diff[data-diff-id='{second}']").is_displayed()
        shot("03-record")
        chrome.execute_script("arguments[0].scrollIntoView({block: 'end'})", diff)
        shot("03-record-diff")

        chrome.find_element(By.CSS_SELECTOR, "nav a[data-route=diffs]").click()
        card = wait_for(chrome, By.CSS_SELECTOR,
                        f"[data-page=diffs] article.diff[data-diff-id='{second}']")
        assert VPN_V3 in card.text
        shot("04-pending-diffs")
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
        wait_until(chrome, lambda: len(chrome.find_elements(By.CSS_SELECTOR, "#graph g.node"))
                   == 3)
        edges = chrome.find_elements(By.CSS_SELECTOR, "#graph line.edge")
        assert sorted(edge.get_attribute("class") for edge in edges) == [
            "edge related", "edge wiki_link", "edge wiki_link"]
        assert text_of(chrome, "graph-summary") == (
            "3 memories, 3 links · 1 unresolved wiki-links · 0 related ids outside the graph")
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
        "04-pending-diffs.png",
        "05-approved.png", "06-reports.png", "07-graph.png", "08-graph-opens-a-record.png"]


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


def screenshot_taker(chrome: Any, directory: Path) -> Callable[[str], None]:
    def shot(name: str) -> None:
        assert chrome.save_screenshot(str(directory / f"{name}.png")), name

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


def wait_for(chrome: Any, by: str, selector: str) -> Any:
    wait_until(chrome, lambda: bool(chrome.find_elements(by, selector)),
               explain=lambda: f"no {selector}")
    return chrome.find_elements(by, selector)[0]
