// The memory browser: hash routes over memstream's JSON API, with the key the user pastes.
// Every value from the API reaches the page as text (textContent, text nodes, attributes),
// never as markup.

const KEY = "memstream.key";
const NAMESPACE = "memstream.namespace";
const MEMORY_TYPES = ["lesson", "decision", "pattern", "fact", "preference", "handoff",
  "commitment", "relationship"];
const TYPE_COLOURS = {
  lesson: "#d1495b", decision: "#edae49", pattern: "#00798c", fact: "#30638e",
  preference: "#8e6c8a", handoff: "#66a182", commitment: "#f28e2b",
  relationship: "#9c755f",
};
const OTHER_COLOUR = "#8a8f98";
// How long the browser waits for a review to go through Kafka and be applied.
const APPLY_TIMEOUT_MS = 30000;
const POLL_MS = 400;
// An untitled record is named by the first words of its text; fewer beside a graph's node.
const LABEL_WORDS = 8;
const LABEL_CHARS = 64;
const GRAPH_LABEL_WORDS = 5;
const GRAPH_LABEL_CHARS = 36;
// About the width of such a label at 11px: a node closer to the right edge is labelled on its
// left.
const GRAPH_LABEL_ROOM = 240;
const HOUR_MS = 3600 * 1000;
const DAY_MS = 24 * HOUR_MS;
// What the overview reads: the changes of the last hour, a page at a time (the feed's largest),
// up to five pages; the runs of the last day, up to the listing's largest page.
const CHANGES_PAGE = 1000;
const CHANGES_PAGES = 5;
const OVERVIEW_RUNS = 500;
const OVERVIEW_SHOWN = 8;
// The dead letters' reasons the overview names, the most frequent first.
const OVERVIEW_REASONS = 4;
const RUN_STATUSES = ["succeeded", "failed", "cancelled", "unfinished"];
// The queue's items read at once: the route's largest page.
const QUEUE_READ = 500;

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

class AuthError extends Error {}
class ApiError extends Error {
  // `answer`: the API's JSON error, which may say more (a refused change's `problems`).
  constructor(message, answer = {}) {
    super(message);
    this.answer = answer;
  }
}

// -- elements ------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  node.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  setAttrs(node, attrs);
  node.append(...children.filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
}

const recordLink = (id, label) => el("a", { href: `#/record/${encodeURIComponent(id)}`,
  class: "record-link", title: label && label !== id ? id : null }, label || id);
const runLink = (id) => el("a", { href: `#/run/${encodeURIComponent(id)}`, class: "run-link" },
  id);

// What names a record where a list shows it: its title, else the first `count` words of its
// text (`text`, or the `excerpt` a listing gives), else its id.
function labelOf({ record_id: id, title, text, excerpt }, count = LABEL_WORDS,
  chars = LABEL_CHARS) {
  if (title && title.trim()) return cut(title.trim(), chars);
  const words = (text ?? excerpt ?? "").split(/\s+/).filter(Boolean);
  if (!words.length) return id;
  const start = words.slice(0, count).join(" ");
  return cut(words.length > count ? `${start}…` : start, chars);
}

const cut = (text, chars) => (text.length > chars ? `${text.slice(0, chars - 1)}…` : text);

// A link to a record named as `names` (id -> {title, excerpt}) has it; by its id when the
// key may not see the record.
const namedLink = (id, names) => recordLink(id,
  names[id] ? labelOf({ record_id: id, ...names[id] }) : id);

function recordList(ids, names) {
  if (!ids.length) return el("span", { class: "hint" }, "none");
  return el("ul", { class: "links" }, ids.map((id) => el("li", {}, namedLink(id, names))));
}

const plural = (n, word, words = `${word}s`) => `${n} ${n === 1 ? word : words}`;
const badge = (text, kind = "") => el("span", { class: `badge ${kind}` }, text);
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "—");

function fieldsTable(rows) {
  return el("table", { class: "fields" }, rows.filter(([, v]) => v !== undefined).map(
    ([name, value]) => el("tr", {}, el("th", {}, name), el("td", {}, value ?? "—"))));
}

function status(text, kind = "") {
  const node = $("status");
  node.textContent = text;
  node.className = `message ${kind}`;
}

// -- the API -------------------------------------------------------------------------------

const namespace = () => sessionStorage.getItem(NAMESPACE) || "";

// A GET asks within the chosen namespace, unless `everyNamespace` (an operator's key).
async function api(path, params = {}, { method = "GET", body, everyNamespace = false } = {}) {
  const url = new URL(path, location.origin);
  if (method === "GET" && !everyNamespace) url.searchParams.set("namespace", namespace());
  for (const [name, value] of Object.entries(params)) {
    for (const item of [].concat(value)) if (item !== "" && item != null) {
      url.searchParams.append(name, item);
    }
  }
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (response.status === 401 || response.status === 403) {
    throw new AuthError(answer.error || `refused (${response.status})`);
  }
  if (!response.ok) {
    throw new ApiError(answer.error || `${response.status} ${response.statusText}`, answer);
  }
  return answer;
}

// -- the key -------------------------------------------------------------------------------

function askForKey(message) {
  $("key-panel").hidden = false;
  $("view").hidden = true;
  $("key-message").textContent = message || "";
  $("key-namespace").value = namespace();
  $("key").focus();
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY, $("key").value.trim());
  sessionStorage.setItem(NAMESPACE, $("key-namespace").value.trim());
  $("key").value = "";
  $("key-panel").hidden = true;
  $("view").hidden = false;
  render();
});

$("namespace-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(NAMESPACE, $("namespace").value.trim());
  render();
});

$("forget-key").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  askForKey("Key forgotten.");
});

// -- routes --------------------------------------------------------------------------------

const ROUTES = { overview: overviewPage, search: searchPage, record: recordPage,
  runs: runsPage, run: runPage, review: reviewPage, gaps: gapsPage, reports: reportsPage,
  graph: graphPage, "dead-letters": deadLettersPage, scoring: scoringPage, pack: packPage,
  documents: documentsPage, planning: planningPage, "planning-item": planningItemPage };
// The menu entry a page is under, when it has none of its own.
const UNDER = { run: "runs", "planning-item": "planning" };

function route() {
  const [path, query = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const [name, ...rest] = path.split("/");
  return { name: ROUTES[name] ? name : "overview", arg: decodeURIComponent(rest.join("/")),
    params: new URLSearchParams(query) };
}

let rendering = 0;

async function render() {
  const current = route();
  const ticket = ++rendering;
  $("namespace").value = namespace();
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("active",
      link.dataset.route === (UNDER[current.name] || current.name));
  }
  if (!sessionStorage.getItem(KEY) || !namespace()) {
    askForKey(sessionStorage.getItem(KEY) ? "Which namespace?" : "");
    return;
  }
  $("key-panel").hidden = true;
  const view = $("view");
  view.hidden = false;
  status("");
  try {
    const page = await ROUTES[current.name](current.arg, current.params);
    // A later navigation wins over a slower earlier one.
    if (ticket === rendering) view.replaceChildren(page);
  } catch (error) {
    if (ticket !== rendering) return;
    if (error instanceof AuthError) askForKey(`The API refused the key: ${error.message}`);
    else view.replaceChildren(el("p", { class: "message error" }, error.message));
  }
}

window.addEventListener("hashchange", render);
render();

// -- overview ------------------------------------------------------------------------------

const ago = (ms) => new Date(Date.now() - ms).toISOString();

function card(name, ...children) {
  return el("article", { class: "card", "data-card": name }, ...children);
}

async function overviewPage() {
  const [stats, changes, runs, ...later] = await Promise.all([
    api("/v1/stats"), recentChanges(),
    api("/v1/runs", { since: ago(DAY_MS), limit: String(OVERVIEW_RUNS) }),
    reviewQueueCard(), deadLettersCard(),
  ]);
  return el("section", { "data-page": "overview" }, el("h1", {}, `Overview · ${namespace()}`),
    el("div", { class: "cards" }, recordsCard(stats), changesCard(changes),
      runsCard(runs), later));
}

function recordsCard(stats) {
  const kinds = Object.entries(stats.records).sort(([a], [b]) => a.localeCompare(b));
  return card("records", el("h2", {}, "Records"),
    kinds.length ? el("table", { class: "counts" }, kinds.map(([kind, n]) => el("tr", {},
      el("th", {}, el("a", { href: `#/search?kind=${encodeURIComponent(kind)}` }, kind)),
      el("td", { "data-kind": kind }, n))))
      : el("p", { class: "hint" }, "No records yet."),
    el("p", { class: "hint" }, `${stats.index_points} in the index`));
}

// The feed lists the oldest first: it is read to its end (or CHANGES_PAGES pages), keeping
// the count and the last changes read.
async function recentChanges() {
  let page = await api("/v1/changes", { since: ago(HOUR_MS), limit: String(CHANGES_PAGE) });
  let count = page.changes.length;
  let last = page.changes.slice(-OVERVIEW_SHOWN);
  for (let read = 1; page.changes.length === CHANGES_PAGE && read < CHANGES_PAGES; read++) {
    page = await api("/v1/changes", { after: page.next, limit: String(CHANGES_PAGE) });
    count += page.changes.length;
    last = [...last, ...page.changes].slice(-OVERVIEW_SHOWN);
  }
  return { count, complete: page.changes.length < CHANGES_PAGE, last };
}

function changesCard({ count, complete, last }) {
  const newest = [...last].reverse();
  return card("changes", el("h2", {}, "Changes in the last hour"),
    el("p", { class: "figure" }, complete ? count : `${count}+`),
    complete ? null : el("p", { class: "hint" }, `The last of the first ${count}:`),
    newest.length ? el("ul", { class: "feed" }, newest.map((change) => el("li", {},
      el("span", { class: "when" }, new Date(change.changed_at).toLocaleTimeString()), " ",
      badge(change.change), " ", recordLink(change.record_id, labelOf(change)),
      change.actor ? el("span", { class: "hint" }, ` by ${change.actor}`) : null)))
      : el("p", { class: "hint" }, "Nothing changed."));
}

function runsCard(listing) {
  const byStatus = Object.fromEntries(RUN_STATUSES.map((status) => [status,
    listing.runs.filter((run) => run.status === status).length]));
  return card("runs", el("h2", {}, "Runs in the last day"),
    el("p", { class: "figure" }, listing.truncated ? `${listing.runs.length}+`
      : listing.runs.length),
    el("p", { class: "statuses" }, RUN_STATUSES.filter((status) => byStatus[status])
      .map((status) => el("a", { href: `#/runs?status=${status}`, class: `status ${status}`,
        "data-status": status }, `${byStatus[status]} ${status}`))),
    listing.runs.length ? el("ul", { class: "feed" }, listing.runs.slice(0, OVERVIEW_SHOWN)
      .map((run) => el("li", {}, runLink(run.run_id), " ", statusBadge(run.status),
        run.intent ? el("span", { class: "hint" }, ` ${run.intent}`) : null)))
      : el("p", { class: "hint" }, "No runs."),
    el("p", {}, el("a", { href: "#/runs" }, "All runs")));
}

async function reviewQueueCard() {
  let items;
  try {
    ({ items } = await api("/v1/review-queue", { limit: String(QUEUE_READ) }));
  } catch (error) {
    if (error instanceof AuthError) return refusedCard("review-queue", "Awaiting review", error);
    throw error;
  }
  const kinds = REVIEW_KINDS.map(([kind, word]) => [kind, word,
    items.filter((item) => item.kind === kind).length]).filter(([, , n]) => n);
  return card("review-queue", el("h2", {}, "Awaiting review"),
    el("p", { class: "figure" }, items.length === QUEUE_READ ? `${items.length}+`
      : items.length),
    el("p", { class: "statuses" }, kinds.map(([kind, word, n]) => el("span", {
      "data-kind": kind }, plural(n, word)))),
    items.length ? el("ul", { class: "feed" }, items.slice(0, OVERVIEW_SHOWN).map((item) =>
      el("li", {}, badge(REVIEW_BADGES[item.kind]), " ",
        itemSubject(item))))
      : el("p", { class: "hint" }, "Nothing waits for review."),
    el("p", {}, el("a", { href: "#/review" }, "Review them")));
}

// A card whose route the key may not read (the dead letters: admin keys only) says so, and
// the rest of the overview stands.
function refusedCard(name, heading, error) {
  return card(name, el("h2", {}, heading),
    el("p", { class: "hint" }, `Not readable with this key: ${error.message}`));
}

async function deadLettersCard() {
  let listing;
  try {
    listing = await api("/v1/dead-letters", { limit: "1" });
  } catch (error) {
    if (error instanceof AuthError) return refusedCard("dead-letters", "Dead letters", error);
    throw error;
  }
  const reasons = Object.entries(listing.by_reason).sort(([, m], [, n]) => n - m);
  return card("dead-letters", el("h2", {}, "Dead letters"),
    el("p", { class: "figure" }, listing.total),
    reasons.length ? el("ul", { class: "feed reasons" }, reasons.slice(0, OVERVIEW_REASONS)
      .map(([reason, n]) => el("li", {}, el("a", { href: `#/dead-letters?reason=${
        encodeURIComponent(reason)}`, "data-reason": reason }, `${n} ${reason}`))))
      : el("p", { class: "hint" }, "Every event was used."),
    reasons.length > OVERVIEW_REASONS ? el("p", { class: "hint" },
      `and ${plural(reasons.length - OVERVIEW_REASONS, "other reason")}`) : null,
    el("p", {}, el("a", { href: "#/dead-letters" }, "All dead letters")));
}

// -- search --------------------------------------------------------------------------------

function choice(name, options, selected, anyLabel) {
  return el("label", {}, name.replace("_", " "), el("select", { name },
    anyLabel === null ? null : el("option", { value: "" }, anyLabel),
    options.map((option) => el("option", { value: option, selected: option === selected },
      option))));
}

async function searchPage(_, params) {
  const query = params.get("query") || "";
  const form = el("form", { class: "search", id: "search-form" },
    el("input", { name: "query", type: "search", value: query, placeholder: "Search memories…",
      autofocus: true }),
    choice("kind", ["memory", "run_digest", "fix_pattern"], params.get("kind"), "any kind"),
    choice("memory_type", MEMORY_TYPES, params.get("memory_type"), "any type"),
    choice("tier", ["active", "short_term", "long_term"], params.get("tier"), "any tier"),
    choice("review_state", ["approved", "draft", "deprecated"],
      params.get("review_state") || "approved", null),
    el("label", {}, "tag", el("input", { name: "tag", value: params.get("tag") || "" })),
    el("label", {}, "agent", el("input", { name: "agent_id",
      value: params.get("agent_id") || "" })),
    // Empty: the route's default, as the CLI asks.
    el("label", {}, "min score", el("input", { name: "min_score", type: "number", min: "-1",
      max: "1", step: "0.05", class: "min-score", placeholder: "0.5",
      value: params.get("min_score") || "" })),
    el("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (value) wanted.set(name, value);
    location.hash = `#/search?${wanted}`;
  });
  const stats = await api("/v1/stats");
  const page = el("section", { "data-page": "search" }, el("h1", {}, "Search"),
    el("p", { class: "hint" }, `${namespace()}: `, Object.entries(stats.records)
      .map(([kind, n]) => `${n} ${kind}`).join(", ") || "no records yet",
    ` · ${stats.index_points} in the index`), form);
  if (!query) return page;
  const filters = Object.fromEntries([...params].filter(([name]) => name !== "query"));
  const answer = await api("/v1/search", { query, limit: "30", ...filters });
  if (answer.degraded) page.append(el("p", { class: "message" }, "Index down: answered by Postgres."));
  if (!answer.hits.length) {
    page.append(emptyAnswer(answer, params));
    return page;
  }
  page.append(el("p", { class: "hint" }, plural(answer.hits.length, "hit")),
    el("ol", { class: "hits" }, answer.hits.map((hit) => el("li", { class: "hit" },
      el("div", {}, recordLink(hit.record_id, labelOf(hit)), " ",
        badge(hit.kind), hit.memory_type ? badge(hit.memory_type, "type") : null,
        badge(hit.review_state), el("span", { class: "score",
          title: "what min score is a floor on (docs/retrieval.md)" },
        `relevance ${hit.relevance.toFixed(2)}`)),
      el("p", { class: "text" }, hit.text),
      hit.tags.length ? el("p", { class: "tags" }, hit.tags.map((tag) => badge(`#${tag}`)))
        : null))));
  return page;
}

// -- the context pack ----------------------------------------------------------------------

const PACK_SECTIONS = ["planning", "history", "long_term", "documents"];
const PACK_FIELDS = [["query", "the task"], ["agent_id", "agent"], ["budget_tokens", "budget"],
  ["error", "error"], ["planning_ref", "planning ref"], ["repo", "repo"],
  ["shares", "shares"]];

// What an agent would be given for a task: every section of the pack, in the order the agent
// reads it, with what each costs of the budget.
async function packPage(_, params) {
  const form = el("form", { class: "search", id: "pack-form" },
    PACK_FIELDS.map(([name, label]) => name === "query"
      ? el("input", { name, type: "search", value: params.get(name) || "", autofocus: true,
        placeholder: "The task an agent is about to do…" })
      : el("label", {}, label, el("input", { name, value: params.get(name) || "",
        class: `pack-${name}`, placeholder: name === "shares"
          ? "history=0.5,documents=0.1" : name === "budget_tokens" ? "2000" : "" }))),
    el("button", { type: "submit" }, "Preview"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (value) wanted.set(name, value);
    location.hash = `#/pack?${wanted}`;
  });
  const page = el("section", { "data-page": "pack" }, el("h1", {}, "Context pack"),
    el("p", { class: "hint" }, "What an agent is given for a task: its core blocks, then "
      + "planning, history, long-term memory and documents, each within its share of the "
      + "budget (docs/retrieval.md#the-context-pack)."), form);
  if (!params.get("query")) return page;
  const pack = await api("/v1/context", Object.fromEntries(params));
  if (!pack.enabled) {
    page.append(el("p", { class: "message" }, "Memory is disabled on this worker."));
    return page;
  }
  const used = [["core", pack.core.tokens],
    ...PACK_SECTIONS.map((name) => [name, pack.section_tokens[name].tokens])];
  page.append(el("p", { class: "hint", id: "pack-summary" },
    `${pack.tokens} of ${pack.budget_tokens} tokens · `,
    `left out: ${pack.dropped.budget || 0} over budget, ${pack.dropped.duplicate || 0} `,
    "near-duplicates", pack.degraded.length ? ` · degraded: ${pack.degraded.join(", ")}` : ""),
  el("div", { class: "pack-bar", id: "pack-bar", role: "img",
    "aria-label": used.map(([name, tokens]) => `${name} ${tokens}`).join(", ") },
  used.filter(([, tokens]) => tokens > 0).map(([name, tokens]) => el("span", {
    class: `pack-part ${name}`, title: `${name}: ${tokens} tokens`,
    style: `width: ${(100 * tokens) / Math.max(1, pack.budget_tokens)}%` }, name))),
  el("table", { class: "pack-sections", id: "pack-sections" },
    el("tr", {}, ["section", "share", "used", "items"].map((h) => el("th", {}, h))),
    el("tr", { "data-section": "core" }, el("td", {}, "core"),
      el("td", {}, pack.core.share_tokens), el("td", {}, pack.core.tokens),
      el("td", {}, pack.core.blocks.length)),
    PACK_SECTIONS.map((name) => el("tr", { "data-section": name }, el("td", {}, name),
      el("td", {}, pack.section_tokens[name].share_tokens),
      el("td", {}, pack.section_tokens[name].tokens),
      el("td", {}, pack.section_tokens[name].items)))),
  el("h2", {}, `core · ${pack.core.tokens} tokens`),
  pack.core.blocks.length ? el("ul", { class: "pack-items" }, pack.core.blocks.map((block) =>
    el("li", { "data-block": block.label }, el("strong", {}, block.label), " ",
      badge(`${block.token_cost} tokens`),
      block.fields_left_out.length ? badge(`left out: ${block.fields_left_out.join(", ")}`,
        "warning") : null,
      el("pre", { class: "text" }, block.text))))
    : el("p", { class: "hint" }, pack.core.absent || "No core blocks."),
  ...PACK_SECTIONS.map((name) => packSection(name, pack)));
  return page;
}

function packSection(name, pack) {
  const items = pack.sections[name] || [];
  return el("section", { class: "pack-section", "data-section": name },
    el("h2", {}, `${name.replace("_", "-")} · ${pack.section_tokens[name].tokens} tokens`),
    items.length ? el("ol", { class: "pack-items" }, items.map((item) => el("li", {},
      // A planning item is a work item of a repository's file: its page is the planning's.
      el("div", {}, item.record_id.startsWith("beads:")
        ? planningItemLink(item.provenance.repo, item.provenance.item_id)
        : recordLink(item.record_id, labelOf(item)), " ", badge(item.kind),
      badge(`${item.token_cost} tokens`, "cost"),
      el("span", { class: "score" }, `score ${item.score.toFixed(2)}`)),
      el("p", { class: "hint" }, item.source),
      el("p", { class: "text" }, item.text))))
      : el("p", { class: "hint" }, pack.degraded.includes(name)
        ? "Its store failed: left out (degraded)." : "Nothing for this task."));
}

// Why an answer holds nothing: a namespace with no record at all (its name misspelled, most
// often), or nothing relevant enough, which a lower min score may show.
function emptyAnswer(answer, params) {
  if (answer.namespace_holds_records === false) {
    return el("p", { class: "message empty", id: "search-empty" },
      `Namespace ${answer.namespace} holds no records: is its name spelled right?`);
  }
  const floor = params.get("min_score");
  const lower = new URLSearchParams(params);
  lower.set("min_score", "0");
  return el("div", { class: "message empty", id: "search-empty" },
    el("p", {}, "Nothing relevant: no match reaches the min score "
      + `(${floor || "0.5, the default"}).`),
    floor !== "0" ? el("p", { class: "hint" }, "Lower the min score to see weaker matches: ",
      el("a", { href: `#/search?${lower}`, id: "search-weaker" },
        "show every match (min score 0)"), ".") : null);
}

// -- a record ------------------------------------------------------------------------------

async function recordPage(recordId) {
  const [lineage, history, queue] = await Promise.all([
    api(`/v1/records/${encodeURIComponent(recordId)}`),
    api(`/v1/records/${encodeURIComponent(recordId)}/history`),
    // Its pending diffs, and the draft merge that is this record or merges it.
    api("/v1/review-queue", { record_id: recordId }),
  ]);
  const record = lineage.record;
  const versions = history.versions;
  const page = el("section", { class: "record", "data-page": "record" },
    el("h1", {}, labelOf(record)),
    el("p", { class: "hint" }, record.record_id, " · version ",
      el("span", { id: "record-version" }, lineage.version)),
    lineage.superseded_by ? el("p", { class: "message" }, "Merged into ",
      recordLink(lineage.superseded_by), ": this record is kept, hidden from search.") : null,
    record.invalidated_by ? el("p", { class: "message", id: "record-superseded" },
      "Superseded by ", recordLink(record.invalidated_by), ` on ${when(record.valid_until)}: `
      + "a newer memory restated it with another value. It is kept in history, out of "
      + "recall; search as of an earlier moment still finds it.") : null,
    el("p", { class: "text", id: "record-text" }, record.text),
    lineage.members.length ? el("section", { id: "record-members" },
      el("h2", {}, `Members (${lineage.members.length})`),
      el("p", { class: "hint" }, record.review_state === "draft"
        ? "The memories this draft would replace, live until it is approved."
        : "The memories this merge replaced."),
      memberList(lineage.members)) : null,
    queue.items.length ? el("section", { id: "record-review" },
      el("h2", {}, "Awaiting review"),
      el("div", {}, queue.items.map((item) => reviewCard(item, recordId)))) : null,
    el("div", { class: "columns" }, el("div", {}, el("h2", {}, "Fields"), fieldsTable([
      ["kind", record.record_kind], ["memory type", record.memory_type],
      ["review state", record.review_state], ["tier", record.tier],
      ["trust class", record.trust_class],
      ["scope", record.scope + (record.agent_id ? ` (${record.agent_id})` : "")],
      ["tags", record.tags.join(", ")],
      ["related", record.related_ids.length ? recordList(record.related_ids, {}) : null],
      ["wiki-links", (record.body.wiki_links || []).join(", ")],
      ["source", record.source_ref],
      ["run", record.run_ref ? runLink(record.run_ref) : undefined],
      ["confidence", lineage.confidence.toFixed(2)],
      ["valid from", when(record.created_at)],
      ["valid until", record.valid_until ? when(record.valid_until) : undefined],
      ["recorded", lineage.recorded_at ? when(lineage.recorded_at) : undefined],
      ["expires", record.expires_at ? when(record.expires_at) : undefined],
      ["graph", el("a", { href: `#/graph?${new URLSearchParams({ from: record.record_id,
        depth: "2" })}`, id: "record-graph" }, "what it links to, two hops out")],
    ])), el("div", {}, el("h2", {}, "Provenance"), fieldsTable(Object.entries(record.provenance)
      .map(([name, value]) => [name, String(value)])))));
  // A merge's members are listed above, superseded or not.
  const merged = new Set(lineage.members.map((member) => member.record_id));
  const superseded = lineage.supersedes.filter((member) => !merged.has(member.record_id));
  if (superseded.length) {
    page.append(el("h2", {}, "Supersedes"), el("ul", { class: "supersedes" },
      superseded.map((member) => el("li", {}, recordLink(member.record_id,
        labelOf(member)), ` (v${member.version}) `,
      el("span", { class: "text" }, member.text)))));
  }
  page.append(el("h2", {}, `Versions (${versions.length})`),
    el("table", { class: "versions" },
      el("tr", {}, ["version", "change", "by", "when", "changed", "reason"]
        .map((h) => el("th", {}, h))),
      versions.map((v) => el("tr", {}, el("td", {}, v.version), el("td", {}, v.change),
        el("td", {}, v.actor), el("td", {}, when(v.changed_at)),
        el("td", {}, (v.changed || []).join(", ")), el("td", {}, v.reason || "")))));
  page.append(await scoresSection(recordId));
  if (versions.length > 1) page.append(await diffSection(recordId, versions));
  return page;
}

// -- scores and ratings --------------------------------------------------------------------

// The record's adaptive score (seed 003) for the key's agent, with its parts and ratings, and
// buttons that rate it; for an admin key bound to no agent, every agent's.
async function scoresSection(recordId) {
  const section = el("section", { id: "record-scores" }, el("h2", {}, "Scores and ratings"));
  let scores;
  try {
    scores = await api("/v1/memory-scores", { memory_id: recordId });
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    section.append(el("p", { class: "hint" }, error.message));
    return section;
  }
  if (scores.agent_id === undefined || scores.agent_id === null) {
    section.append(scores.agents.length ? el("table", { class: "scores" },
      el("tr", {}, ["agent", "adaptive", "usefulness", "recency", "frequency", "blend",
        "ratings (useful)", "recalls"].map((h) => el("th", {}, h))),
      scores.agents.map((use) => el("tr", { "data-agent": use.agent_id },
        el("td", {}, use.agent_id), ...useCells(use))))
      : el("p", { class: "hint" }, "No agent has recalled or rated this record yet."));
    return section;
  }
  const outcome = el("p", { class: "outcome" });
  const rate = (useful) => el("button", { type: "button", "data-useful": useful ? "yes" : "no",
    onclick: () => rateRecord(recordId, useful, scores, section, outcome) },
  useful ? "Useful" : "Not useful");
  section.append(
    el("p", { class: "hint" }, `For agent ${scores.agent_id}: recalls rank it by its raw `
      + `score × ${scores.blend_factor} (config version ${scores.adaptive.config_version}).`),
    el("table", { class: "scores" },
      el("tr", {}, ["adaptive", "usefulness", "recency", "frequency", "blend",
        "ratings (useful)", "recalls"].map((h) => el("th", {}, h))),
      el("tr", { "data-agent": scores.agent_id }, ...useCells(scores))),
    scores.valuations.length ? el("ul", { class: "valuations" }, scores.valuations.map((v) =>
      el("li", {}, v.useful ? "useful" : "not useful", ", ", when(v.valued_at)))) : null,
    el("div", { class: "actions" }, rate(true), rate(false)), outcome);
  return section;
}

function useCells(use) {
  const { adaptive } = use;
  return [adaptive.score, adaptive.usefulness, adaptive.recency, adaptive.frequency,
    use.blend_factor, `${use.valuation_count} (${use.useful_count})`, use.access_count]
    .map((value) => el("td", {}, value));
}

// A rating goes through Kafka: the section is drawn again once it has been applied.
async function rateRecord(recordId, useful, scores, section, outcome) {
  for (const button of section.querySelectorAll("button")) button.disabled = true;
  try {
    const sent = await api("/v1/ratings", {}, { method: "POST", body: {
      namespace: namespace(), ratings: [{ memory_id: recordId, useful }] } });
    outcome.textContent = `Rating sent (event ${sent.event_id}); waiting for it to be applied…`;
    outcome.className = "outcome waiting";
    const deadline = Date.now() + APPLY_TIMEOUT_MS;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      const now = await api("/v1/memory-scores", { memory_id: recordId });
      if (now.valuation_count > scores.valuation_count) {
        section.replaceWith(await scoresSection(recordId));
        return;
      }
    }
    throw new ApiError("the rating was not applied in time: see the dead letters");
  } catch (error) {
    outcome.textContent = error.message;
    outcome.className = "outcome error";
    for (const button of section.querySelectorAll("button")) button.disabled = false;
    if (error instanceof AuthError) status(`The API refused: ${error.message}`, "error");
  }
}

async function diffSection(recordId, versions) {
  const numbers = versions.map((v) => v.version);
  const pick = (name, selected) => el("select", { name }, numbers.map((n) =>
    el("option", { value: n, selected: n === selected }, `v${n}`)));
  const from = pick("from", numbers.at(-2));
  const to = pick("to", numbers.at(-1));
  const shown = el("div", { id: "diff" });
  const show = async () => {
    const diff = await api(`/v1/records/${encodeURIComponent(recordId)}/diff`,
      { from: from.value, to: to.value });
    shown.replaceChildren(diffView(diff));
  };
  from.addEventListener("change", show);
  to.addEventListener("change", show);
  await show();
  return el("section", {}, el("h2", {}, "Diff ", from, " → ", to), shown);
}

function diffView(diff) {
  const fields = Object.entries(diff.fields);
  return el("div", {},
    fields.length ? fieldsTable(fields.map(([name, change]) => [name,
      `${JSON.stringify(change.from)} → ${JSON.stringify(change.to)}`])) : null,
    diff.text.length
      ? el("pre", { class: "unified" }, diff.text.map((line, i) => el("span", {
        // The file lines come first, then hunks; a text line always starts with + - or space.
        class: (i < 2 && /^(\+\+\+|---) /.test(line)) || line.startsWith("@@") ? "header"
          : line.startsWith("+") ? "added" : line.startsWith("-") ? "removed" : "",
      }, `${line}\n`)))
      : el("p", { class: "hint" }, "The text is the same."));
}

// -- runs ----------------------------------------------------------------------------------

const statusBadge = (status) => badge(status, `status ${status}`);

async function runsPage(_, params) {
  const status = params.get("status") || "";
  const agent = params.get("agent") || "";
  const form = el("form", { class: "search", id: "runs-form" },
    choice("status", RUN_STATUSES, status, "any status"),
    el("label", {}, "agent", el("input", { name: "agent", value: agent })),
    el("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (value) wanted.set(name, value);
    location.hash = `#/runs?${wanted}`;
  });
  const listing = await api("/v1/runs", { status, agent });
  return el("section", { "data-page": "runs" }, el("h1", {}, "Runs"), form,
    listing.runs.length ? el("table", { class: "runs" },
      el("tr", {}, ["run", "status", "task", "agent", "intent", "started", "finished",
        "events", "errors"].map((h) => el("th", {}, h))),
      listing.runs.map((run) => el("tr", { "data-run-id": run.run_id },
        el("td", {}, runLink(run.run_id)), el("td", {}, statusBadge(run.status)),
        el("td", {}, run.task_key || ""), el("td", {}, run.agent || ""),
        el("td", { class: "intent" }, run.intent || ""), el("td", {}, when(run.started_at)),
        el("td", {}, run.finished_at ? when(run.finished_at) : ""),
        el("td", { class: "number" }, run.event_count),
        el("td", { class: "number" }, run.error_count || ""))))
      : el("p", { class: "hint" }, "No runs."),
    listing.truncated ? el("p", { class: "hint" }, `The newest ${listing.runs.length} shown.`)
      : null);
}

async function runPage(runId) {
  const shown = await api(`/v1/runs/${encodeURIComponent(runId)}`);
  const { run, digest } = shown;
  const page = el("section", { class: "run", "data-page": "run" },
    el("h1", {}, `Run ${run.run_id}`, " ", statusBadge(run.status)),
    run.intent ? el("p", { class: "hint" }, run.intent) : null,
    fieldsTable([
      ["task", run.task_key], ["repo", run.repo], ["agent", run.agent],
      ["started", when(run.started_at)],
      ["finished", run.finished_at ? when(run.finished_at) : "not yet"],
      ["events", run.event_count], ["digest", digest ? recordLink(digest.record_id,
        labelOf(digest)) : "none yet (written when the run finishes)"],
    ]));
  if (digest) {
    page.append(el("h2", {}, "Digest"), el("p", { class: "text digest", id: "run-digest" },
      digest.text));
  }
  page.append(el("h2", {}, `Errors met (${shown.errors.length})`), shown.errors.length
    ? el("div", {}, shown.errors.map(errorCard))
    : el("p", { class: "hint" }, "None."));
  if (shown.fixed.length) {
    page.append(el("h2", {}, "Fixed"), el("ul", { class: "fixed" }, shown.fixed.map((fixed) =>
      el("li", { "data-signature-id": fixed.signature_id },
        recordLink(fixed.record_id, labelOf(fixed)), el("span", { class: "hint" }, " after "),
        runList(fixed.after_runs)))));
  }
  page.append(el("h2", {}, `Events (${run.event_count})`), eventsTable(shown.events));
  if (shown.events.length < run.event_count) {
    page.append(el("p", { class: "hint" }, `The first ${shown.events.length} shown.`));
  }
  return page;
}

function runList(ids) {
  return el("ul", { class: "links" }, ids.map((id) => el("li", {}, runLink(id))));
}

function errorCard(error) {
  const pattern = error.fix_pattern;
  return el("article", { class: "error-signature", "data-signature-id": error.signature_id },
    el("h3", {}, error.exception_type || "error", el("span", { class: "hint" },
      ` · met ${plural(error.count, "time")} · ${error.dialect}`)),
    el("p", {}, el("code", {}, error.template)),
    el("pre", { class: "example" }, error.example),
    pattern ? el("div", { class: "fix-pattern" },
      el("p", {}, "Fix pattern ", recordLink(pattern.record_id, labelOf(pattern)),
        el("span", { class: "hint" },
          ` · seen in ${plural(pattern.occurrences.run_count, "run")}`
          + ` · fixed by ${plural(pattern.success_count, "run")}`)),
      pattern.fixes.length ? el("ul", { class: "fixes" }, pattern.fixes.map(fixItem))
        : el("p", { class: "hint" }, "No run has fixed it yet."))
      : el("p", { class: "hint" }, "No fix pattern yet."));
}

function fixItem(fix) {
  const evidence = [...fix.commits.map((commit) => `commit ${commit}`),
    ...fix.pull_requests.map((pr) => `PR ${pr}`)];
  const itself = fix.after_runs.length === 1 && fix.after_runs[0] === fix.run_id;
  return el("li", { "data-run-id": fix.run_id }, "Fixed by ", runLink(fix.run_id),
    itself ? el("span", { class: "hint" }, " (recovered within the run)")
      : [el("span", { class: "hint" }, " after "), runList(fix.after_runs)],
    ` · ${when(fix.finished_at)}`, evidence.length ? ` · ${evidence.join(" · ")}` : null);
}

// What a ledger event says, in a line: its kind and its most telling field.
function eventSummary(event) {
  const p = event.payload;
  switch (event.type) {
    case "run.started": return [p.intent, p.task_key && `task ${p.task_key}`,
      p.agent && `agent ${p.agent}`].filter(Boolean).join(" · ");
    case "run.step": return [p.kind, p.tool, p.status, p.error || p.text]
      .filter(Boolean).join(" · ");
    case "run.artifact": return [p.kind, p.title, p.ref].filter(Boolean).join(" · ");
    case "run.finished": return [p.status, p.summary, p.error,
      (p.commits || []).map((c) => `commit ${c}`).join(" ")].filter(Boolean).join(" · ");
    default: return "";
  }
}

function eventsTable(events) {
  return el("table", { class: "events" },
    el("tr", {}, ["when", "event", "what"].map((h) => el("th", {}, h))),
    events.map((event) => el("tr", {}, el("td", {}, when(event.occurred_at)),
      el("td", {}, event.type), el("td", { class: "what" }, eventSummary(event)))));
}

// -- the review queue ----------------------------------------------------------------------

async function reviewPage() {
  const { items } = await api("/v1/review-queue", { limit: String(QUEUE_READ) });
  const kinds = REVIEW_KINDS.map(([kind, word]) => [word,
    items.filter((item) => item.kind === kind).length]).filter(([, n]) => n);
  return el("section", { "data-page": "review" }, el("h1", {}, `Review queue · ${namespace()}`),
    el("p", { class: "hint", id: "review-summary" }, items.length
      ? `${items.length === QUEUE_READ ? "The oldest " : ""}${kinds.map(([word, n]) =>
        plural(n, word)).join(" and ")}, oldest first. Each decision is a memory.review `
        + "event, applied by the worker."
      : "Nothing waits for review."),
    items.length ? el("div", {}, items.map((item) => reviewCard(item))) : null);
}

// Each kind of item the queue holds, and what a person calls it.
const REVIEW_KINDS = [["pending_diff", "pending diff"], ["draft_merge", "draft merge"],
  ["proposed_lesson", "proposed lesson"]];
const REVIEW_BADGES = { pending_diff: "diff", draft_merge: "merge", proposed_lesson: "lesson" };

// What an item is about: a record (named by its title or text as it is now), or a block.
function itemSubject(item) {
  if (item.record_id === null) return `block ${item.block.label} of ${item.block.agent_id}`;
  return recordLink(item.record_id, labelOf(item));
}

// `onPage`: the record whose page shows the card; a draft merge's own page lists its text
// and members above it.
function reviewCard(item, onPage = null) {
  const note = el("input", { name: "note", placeholder: "note (optional)" });
  const outcome = el("p", { class: "outcome" });
  const buttons = ["approve", "reject"].map((decision) => el("button", {
    type: "button", class: decision, "data-decision": decision,
    onclick: () => decide(item, decision, note.value.trim(), card, outcome),
  }, decision === "approve" ? "Approve" : "Reject"));
  const card = el("article", { class: `review-item ${item.kind}`, "data-kind": item.kind,
    "data-item-id": item.id },
  el("h3", {}, badge(Object.fromEntries(REVIEW_KINDS)[item.kind], "kind"),
    " ", itemSubject(item), item.kind === "pending_diff"
      ? ` · on version ${item.base_version}` : null,
    item.memory_type ? badge(item.memory_type, "type") : null),
  el("p", { class: "hint" }, `proposed by ${item.proposer}, ${when(item.proposed_at)}`),
  item.kind === "pending_diff" ? diffBody(item, item.record_id !== onPage)
    : item.record_id === onPage ? null
      : item.kind === "proposed_lesson" ? learningBody(item) : mergeBody(item),
  el("div", { class: "actions" }, note, buttons), outcome);
  return card;
}

// A diff: the proposed text, below the text as it is now unless the page shows it.
function diffBody(item, showNow) {
  const { text, ...others } = item.proposed;
  return el("div", {},
    text !== undefined ? el("div", { class: "proposal" },
      showNow && item.text !== null ? [el("span", { class: "hint" }, "now"),
        el("p", { class: "text now" }, item.text)] : null,
      el("span", { class: "hint" }, "proposed"), el("p", { class: "text proposed" }, text))
      : null,
    Object.keys(others).length ? fieldsTable(Object.entries(others).map(([name, value]) =>
      [name, typeof value === "string" ? value : JSON.stringify(value)])) : null);
}

// A draft merge: the text it would stand for, and the memories it would replace.
function mergeBody(item) {
  return el("div", {}, el("p", { class: "text proposed" }, item.text),
    el("p", { class: "hint" }, `Merges ${plural(item.members.length, "memory", "memories")}`
      + " (approving it hides them from search; rejecting it leaves them as they are):"),
    memberList(item.members));
}

// A proposed lesson: its text, and what it was learnt from (a fix pattern or a task key,
// and the digests of the runs that are its evidence).
function learningBody(item) {
  return el("div", {}, el("p", { class: "text proposed" }, item.text),
    el("p", { class: "hint" }, `Learnt from ${item.source_ref}; evidence: `,
      item.related_ids.map((id, n) => [n ? ", " : null, recordLink(id)])));
}

function memberList(members) {
  return el("ul", { class: "members" }, members.map((member) => el("li", {
    "data-record-id": member.record_id },
  recordLink(member.record_id, labelOf(member)),
  member.superseded_by ? el("span", { class: "hint" }, " · superseded by ",
    recordLink(member.superseded_by)) : badge(member.review_state),
  el("span", { class: "text excerpt" }, member.excerpt))));
}

async function decide(item, decision, note, card, outcome) {
  for (const button of card.querySelectorAll("button")) button.disabled = true;
  // The item names the route and the body that decide it; the browser adds the note alone.
  const [method, path] = item.review.route.split(" ");
  try {
    const sent = await api(path, {}, { method, body: {
      ...item.review[decision], ...(note ? { note } : {}) } });
    outcome.textContent = `${decision === "approve" ? "Approval" : "Rejection"} sent `
      + `(event ${sent.event_id}); waiting for it to be applied…`;
    outcome.className = "outcome waiting";
    outcome.textContent = await waitApplied(item, decision);
    outcome.className = "outcome applied";
    card.classList.add("done");
  } catch (error) {
    outcome.textContent = error.message;
    outcome.className = "outcome error";
    for (const button of card.querySelectorAll("button")) button.disabled = false;
    if (error instanceof AuthError) status(`The API refused: ${error.message}`, "error");
  }
}

// A decision goes through Kafka: the item leaves the queue once it is applied. Then an
// approved diff has moved its record past the version it was made on, and a merge is approved
// (its members superseded) or deprecated.
async function waitApplied(item, decision) {
  const deadline = Date.now() + APPLY_TIMEOUT_MS;
  const scope = item.record_id === null ? {} : { record_id: item.record_id };
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    const { items } = await api("/v1/review-queue", scope);
    if (items.some((waiting) => waiting.kind === item.kind && waiting.id === item.id)) continue;
    if (item.record_id === null) return `Applied: the block's diff was ${decision}d.`;
    const lineage = await api(`/v1/records/${encodeURIComponent(item.record_id)}`);
    const done = appliedOutcome(item, decision, lineage);
    if (done) return done;
  }
  throw new ApiError(`Not applied within ${APPLY_TIMEOUT_MS / 1000}s: is the worker consuming?`);
}

function appliedOutcome(item, decision, { record, version, members }) {
  const id = item.record_id;
  if (item.kind === "pending_diff") {
    if (decision === "reject") return `Rejected: ${id} stays at version ${version}.`;
    return version > item.base_version ? `Applied: ${id} is now at version ${version}.` : null;
  }
  if (decision === "reject") {
    return record.review_state === "deprecated"
      ? `Rejected: ${id} is deprecated${item.kind === "draft_merge"
        ? "; its members stay as they were" : ""}.` : null;
  }
  if (item.kind === "proposed_lesson") {
    return record.review_state === "approved" ? `Approved: ${id} is a ${item.memory_type} `
      + "search now shows." : null;
  }
  const replaced = members.filter((member) => member.superseded_by === id).length;
  return record.review_state === "approved" && replaced === members.length
    ? `Approved: ${id} now stands for its ${plural(replaced, "member")}, which search no `
      + "longer shows." : null;
}

// -- dead letters --------------------------------------------------------------------------

async function deadLettersPage(_, params) {
  const reason = params.get("reason") || "";
  const before = params.get("before") || "";
  const every = params.get("every") === "1";
  // The page's size: the route's default unless the address names one.
  const limit = params.get("limit") || "";
  const scope = { everyNamespace: every };
  const [listing, all] = await Promise.all([
    api("/v1/dead-letters", { reason, before, limit }, scope),
    // The reasons to filter by, and their counts, whatever the filter.
    reason ? api("/v1/dead-letters", { limit: "1" }, scope) : null,
  ]);
  const counts = (all || listing).by_reason;
  const link = (changes) => {
    const wanted = new URLSearchParams({ ...(reason ? { reason } : {}),
      ...(every ? { every: "1" } : {}), ...(limit ? { limit } : {}) });
    for (const [name, value] of Object.entries(changes)) {
      if (value) wanted.set(name, value); else wanted.delete(name);
    }
    return `#/dead-letters?${wanted}`;
  };
  const reasons = Object.entries(counts).sort(([a, m], [b, n]) => n - m || a.localeCompare(b));
  return el("section", { "data-page": "dead-letters" },
    el("h1", {}, `Dead letters · ${listing.namespace ?? "every namespace"}`),
    el("p", { class: "hint" }, "Events no stage could use, newest first, as the dead-letter "
      + "topics keep them: the first bytes of each (secrets redacted) and the command that "
      + "replays it once its cause is fixed."),
    el("nav", { class: "filters", id: "dead-letter-reasons" },
      el("a", { href: link({ reason: "", before: "" }), class: reason ? "" : "active" },
        `all (${(all || listing).total})`),
      reasons.map(([name, n]) => el("a", { href: link({ reason: name, before: "" }),
        class: name === reason ? "active" : "", "data-reason": name }, `${name} (${n})`)),
      el("a", { href: link({ every: every ? "" : "1", before: "" }), class: "scope" },
        every ? `only ${namespace()}` : "every namespace (an operator's key)")),
    listing.dead_letters.length ? deadLettersTable(listing.dead_letters, every)
      : el("p", { class: "hint" }, before ? "No older dead letters."
        : "No dead letters: every event was used."),
    el("p", { class: "pages" },
      before ? el("a", { href: link({ before: "" }) }, "Newest") : null,
      listing.next ? el("a", { href: link({ before: listing.next }), id: "dead-letters-older" },
        "Older") : null));
}

function deadLettersTable(letters, every) {
  return el("table", { class: "dead-letters" },
    el("thead", {}, el("tr", {}, ["when", "source", "reason", "error class",
      every ? "namespace" : null, "key", "size"].filter(Boolean)
      .map((h) => el("th", {}, h)))),
    letters.map((letter) => deadLetterRows(letter, every)));
}

// A dead letter in two rows: what, where and why; then its first bytes and how to replay it.
function deadLetterRows(letter, every) {
  const columns = every ? 7 : 6;
  const source = letter.source.topic
    ? `${letter.source.topic} ${letter.source.partition}/${letter.source.offset}`
    : `${letter.dlq.topic} ${letter.dlq.partition}/${letter.dlq.offset}`;
  return el("tbody", { class: "dead-letter", "data-dead-letter-id": letter.dead_letter_id },
    el("tr", {},
      el("td", { class: "when" }, when(letter.dead_lettered_at)),
      el("td", { class: "source" }, source),
      el("td", {}, el("strong", { class: "reason" }, letter.reason),
        letter.error ? el("div", { class: "hint error-detail" }, letter.error) : null),
      el("td", {}, letter.error_class || "—",
        letter.retriable ? badge("retriable", "retriable") : null),
      every ? el("td", {}, letter.namespace ?? "none") : null,
      el("td", { class: "key" }, letter.key === null ? el("span", { class: "hint" }, "none")
        : el("code", { class: "key" }, letter.key)),
      el("td", { class: "number" }, `${letter.size} B`)),
    el("tr", { class: "detail" }, el("td", { colspan: columns },
      el("div", { class: "first-bytes-head" }, "First bytes",
        letter.first_bytes_utf8 ? null
          : badge("not UTF-8: shown as \\xNN", "warning not-utf8"),
        letter.truncated ? badge("cut to fit the topic", "warning") : null),
      el("pre", { class: "first-bytes" }, letter.first_bytes),
      replayLine(letter.replay_command))));
}

function replayLine(command) {
  if (!command) {
    return el("p", { class: "hint replay" }, "No replay command: it was cut to fit the "
      + "dead-letter topic, or came from another source topic.");
  }
  const code = el("code", { class: "replay-command" }, command);
  const said = el("span", { class: "hint copied", role: "status" });
  const copy = el("button", { type: "button", class: "quiet copy", onclick: async () => {
    try {
      await navigator.clipboard.writeText(command);
      said.textContent = "Copied.";
    } catch {
      // Without the clipboard (a page not served from a secure origin): select it to copy.
      getSelection().selectAllChildren(code);
      said.textContent = "Selected: copy it with Ctrl+C.";
    }
  } }, "Copy");
  return el("div", { class: "replay" }, el("span", { class: "hint" }, "Replay: "), code, " ",
    copy, " ", said);
}

// -- the adaptive scoring's settings -------------------------------------------------------

// The versions of the config the page lists, newest first.
const SCORING_HISTORY = 50;

// Seed 003's parameters: each with its value, default and range, editable with an admin key;
// a change is a memory.scoring event, made on the version shown, and applied by the worker.
async function scoringPage() {
  const [settings, history] = await Promise.all([api("/v1/memory-scoring/config"),
    api("/v1/memory-scoring/config/history", { limit: String(SCORING_HISTORY) })]);
  const outcome = el("div", { class: "outcome", id: "scoring-outcome", role: "status" });
  const inputs = settings.parameters.map((parameter) => el("input", {
    type: "number", name: parameter.name, value: parameter.value, required: true,
    step: parameter.type === "integer" ? "1" : "any",
    min: parameter.exclusive_minimum ? null : parameter.minimum,
    max: parameter.maximum, class: "scoring-value" }));
  const form = el("form", { id: "scoring-form" },
    el("table", { class: "scoring" },
      el("tr", {}, ["parameter", "value", "default", "valid", ""].map((h) => el("th", {}, h))),
      settings.parameters.map((parameter, i) => el("tr", {
        "data-parameter": parameter.name,
        class: parameter.value === parameter.default ? "" : "changed" },
      el("td", {}, el("code", {}, parameter.name)), el("td", {}, inputs[i]),
      el("td", { class: "default" }, parameter.default),
      el("td", { class: "valid" }, parameter.valid),
      el("td", { class: "hint" }, parameter.description)))),
    el("p", { class: "hint" }, "And ", settings.constraints.join("; "), "."),
    el("div", { class: "actions" }, el("button", { type: "submit" }, "Save changes"),
      el("button", { type: "button", class: "quiet", onclick: () => {
        for (const [i, input] of inputs.entries()) {
          input.value = settings.parameters[i].default;
        }
      } }, "Back to the defaults")),
    outcome);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    changeScoring(settings, inputs, form, outcome);
  });
  return el("section", { "data-page": "scoring" },
    el("h1", {}, `Adaptive scoring · ${namespace()}`),
    el("p", { class: "hint", id: "scoring-version" }, settings.version
      ? `Version ${settings.version}, changed by ${settings.changed_by}, `
        + `${when(settings.changed_at)}.`
      : "Version 0: the defaults, never changed."),
    el("p", { class: "hint" }, "Every recall blends each memory's adaptive score (its "
      + "usefulness to the agent, recency and access frequency) into its score: raw × "
      + "(blend_base_factor + blend_boost_factor × adaptive). A change reaches every worker "
      + "within seconds; changing it takes an admin key."),
    form,
    el("h2", {}, "History"),
    history.versions.length ? el("table", { class: "versions", id: "scoring-history" },
      el("tr", {}, ["version", "when", "by", "changes"].map((h) => el("th", {}, h))),
      history.versions.map((version) => el("tr", { "data-version": version.version },
        el("td", {}, version.version), el("td", {}, when(version.changed_at)),
        el("td", {}, version.changed_by),
        el("td", { class: "changes" }, Object.entries(version.changes)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([name, value]) => `${name} = ${value}`).join(", ")))))
      : el("p", { class: "hint" }, "Never changed."));
}

// The parameters whose value the form changed, sent as one change of the version shown; the
// page is drawn again once the worker has applied it.
async function changeScoring(settings, inputs, form, outcome) {
  const changes = {};
  for (const [i, input] of inputs.entries()) {
    const value = Number(input.value);
    if (value !== settings.parameters[i].value) changes[input.name] = value;
  }
  if (!Object.keys(changes).length) {
    outcome.replaceChildren("Nothing changed.");
    outcome.className = "outcome";
    return;
  }
  for (const button of form.querySelectorAll("button")) button.disabled = true;
  try {
    const sent = await api("/v1/memory-scoring/config", {}, { method: "PUT", body: {
      namespace: namespace(), changes, expected_version: settings.version } });
    outcome.replaceChildren(`Change sent (event ${sent.event_id}); waiting for it to be `
      + "applied…");
    outcome.className = "outcome waiting";
    const version = await scoringApplied(settings.version);
    await render();
    const shown = $("scoring-outcome");
    shown.replaceChildren(`Applied: the config is at version ${version}.`);
    shown.className = "outcome applied";
  } catch (error) {
    const problems = error instanceof ApiError ? error.answer.problems || [] : [];
    outcome.replaceChildren(problems.length ? "The change was refused:" : error.message,
      problems.length ? el("ul", { class: "problems" }, problems.map((problem) =>
        el("li", {}, problem))) : null);
    outcome.className = "outcome error";
    for (const button of form.querySelectorAll("button")) button.disabled = false;
  }
}

async function scoringApplied(before) {
  const deadline = Date.now() + APPLY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    const { version } = await api("/v1/memory-scoring/config");
    if (version > before) return version;
  }
  throw new ApiError(`Not applied within ${APPLY_TIMEOUT_MS / 1000}s: is the worker consuming?`);
}

// -- consolidation reports -----------------------------------------------------------------

async function reportsPage() {
  const { reports, records: names } = await api("/v1/consolidation/reports");
  return el("section", { "data-page": "reports" }, el("h1", {}, "Consolidation reports"),
    reports.length ? el("div", {}, reports.map((report) => reportCard(report, names)))
      : el("p", { class: "hint" }, "No consolidation has run in this namespace yet."));
}

function reportCard(report, names) {
  return el("article", { class: "report", "data-report-id": report.report_id },
    el("h3", {}, `${when(report.finished_at)} · ${report.reason}`),
    fieldsTable([
      ["report", report.report_id], ["memories looked at", report.memories],
      ["clusters", report.clusters.length],
      ["new", el("div", { "data-field": "new" }, recordList(report.new_ids, names))],
      ["superseded", el("div", { "data-field": "superseded" },
        recordList(report.merged_ids, names))],
      ["published", report.announced_at ? when(report.announced_at) : "not yet"],
      ["timings", Object.entries(report.timings)
        .map(([phase, s]) => `${phase} ${Number(s).toFixed(2)}s`).join(" · ")],
    ]),
    report.clusters.length ? el("div", {}, el("h4", {}, "Merged"),
      el("ol", { class: "clusters" }, report.clusters.map((cluster) => el("li", {
        class: "cluster" },
      el("div", {}, cluster.new_id ? namedLink(cluster.new_id, names) : "a cluster",
        cluster.review_state ? badge(cluster.review_state) : null,
      el("span", { class: "hint" }, ` from ${(cluster.members || []).length} memories:`)),
      recordList(cluster.members || [], names))))) : null);
}

// -- documents -----------------------------------------------------------------------------

const documentLink = (id) => el("a", { href: `#/documents/${encodeURIComponent(id)}`,
  class: "document-link" }, id);

// `#/documents`: every document indexed; `#/documents/<doc id>`: one, its chunks in order.
async function documentsPage(docId, params) {
  if (docId) return documentPage(docId);
  const deleted = params.get("deleted") === "true";
  const listing = await api("/v1/documents", deleted ? { include_deleted: "true" } : {});
  return el("section", { "data-page": "documents" },
    el("h1", {}, `Documents · ${listing.namespace}`),
    el("p", { class: "hint" }, "Documents indexed for the context pack's documents section, "
      + "each cut into chunks by its headings; `memstream docs sync` keeps a directory "
      + "indexed."),
    el("nav", { class: "filters", id: "document-filter" },
      el("a", { href: "#/documents", class: deleted ? "" : "active" }, "indexed"),
      el("a", { href: "#/documents?deleted=true", class: deleted ? "active" : "",
        "data-filter": "deleted" }, "with deleted")),
    listing.documents.length ? el("table", { class: "documents" },
      el("thead", {}, el("tr", {}, ["document", "title", "repo", "chunks", "version",
        "updated", "deleted"].map((h) => el("th", {}, h)))),
      el("tbody", {}, listing.documents.map((doc) => el("tr", { "data-doc-id": doc.doc_id },
        el("td", {}, documentLink(doc.doc_id)),
        el("td", {}, doc.title ?? "—"),
        el("td", {}, doc.repo ?? "—"),
        el("td", { class: "number" }, doc.chunks),
        el("td", { class: "number" }, doc.version),
        el("td", { class: "when" }, when(doc.updated)),
        el("td", { class: "when" }, doc.deleted ? when(doc.deleted) : "—")))))
      : el("p", { class: "hint", id: "documents-empty" }, "No documents indexed yet."));
}

async function documentPage(docId) {
  const shown = await api(`/v1/documents/${encodeURIComponent(docId)}`);
  const doc = shown.document;
  return el("section", { "data-page": "document" },
    el("h1", {}, doc.doc_id, " ", doc.deleted ? badge("deleted", "deprecated") : null),
    fieldsTable([["title", doc.title], ["repo", doc.repo],
      ["type", doc.content_type], ["version", doc.version], ["chunks", doc.chunks],
      ["updated", when(doc.updated)], ["deleted", doc.deleted ? when(doc.deleted) : null]]),
    el("h2", {}, "Chunks"),
    shown.chunks.length ? el("ol", { class: "chunks" }, shown.chunks.map((chunk) => el("li", {
      class: "chunk", "data-record-id": chunk.record_id },
      el("div", { class: "chunk-head" },
        el("span", { class: "heading-path" }, chunk.heading_path.join(" > ") || "(before "
          + "the first heading)"), " ",
        el("span", { class: "hint tokens" }, `${chunk.token_count} tokens`), " ",
        recordLink(chunk.record_id, "record")),
      el("pre", { class: "chunk-text" }, chunk.text))))
      : el("p", { class: "hint", id: "chunks-empty" }, "No chunk: the document was deleted."),
    el("h2", {}, "Versions"),
    el("table", { class: "versions" },
      el("thead", {}, el("tr", {}, ["version", "change", "chunks", "embedded", "kept",
        "removed", "applied"].map((h) => el("th", {}, h)))),
      el("tbody", {}, shown.versions.map((v) => el("tr", {},
        el("td", { class: "number" }, v.version), el("td", {}, v.change),
        el("td", { class: "number" }, v.chunks), el("td", { class: "number" }, v.added),
        el("td", { class: "number" }, v.kept), el("td", { class: "number" }, v.removed),
        el("td", { class: "when" }, when(v.applied_at)))))));
}

// -- gaps ----------------------------------------------------------------------------------

const GAP_STATUSES = ["open", "resolved", "all"];

async function gapsPage(_, params) {
  const status = GAP_STATUSES.includes(params.get("status")) ? params.get("status") : "open";
  const cursor = params.get("cursor") || "";
  // The page's size: the route's default unless the address names one.
  const limit = params.get("limit") || "";
  const listing = await api("/v1/gaps", { status, cursor, limit });
  const answering = [...new Set(listing.groups.flatMap((group) =>
    group.resolved_by.map((resolution) => resolution.record_id)))];
  // The memories that answered, named by their text; one the key may not see by its id.
  const names = answering.length ? Object.fromEntries((await api("/v1/records",
    { id: answering })).records.map((record) => [record.record_id, record])) : {};
  const link = (changes) => {
    const wanted = new URLSearchParams({ status, ...(limit ? { limit } : {}) });
    for (const [name, value] of Object.entries(changes)) {
      if (value) wanted.set(name, value); else wanted.delete(name);
    }
    return `#/gaps?${wanted}`;
  };
  return el("section", { "data-page": "gaps" }, el("h1", {}, `Gaps · ${listing.namespace}`),
    el("p", { class: "hint" }, "What agents needed and memory did not hold, grouped by "
      + "question, the most recently met first: recalls that showed nothing (implicit) and "
      + "gaps agents named when they rated what they were given (explicit). A gap is resolved "
      + "once a later memory answers its question."),
    el("nav", { class: "filters", id: "gap-status" }, GAP_STATUSES.map((name) => el("a", {
      href: link({ status: name, cursor: "" }), class: name === status ? "active" : "",
      "data-status": name }, name))),
    listing.groups.length ? el("div", {}, listing.groups.map((group) => gapCard(group, names)))
      : el("p", { class: "hint", id: "gaps-empty" }, cursor ? "No more gaps."
        : { open: "No open gaps: memory held what was asked.",
          resolved: "No gap has been resolved yet.", all: "No gaps met yet." }[status]),
    el("p", { class: "pages" },
      cursor ? el("a", { href: link({ cursor: "" }) }, "Most recent") : null,
      listing.next ? el("a", { href: link({ cursor: listing.next }), id: "gaps-more" },
        "More") : null));
}

function gapCard(group, names) {
  const agents = group.agents.length ? group.agents.join(", ") : "keys bound to no agent";
  return el("article", { class: "card gap", "data-group-id": group.group_id },
    el("h3", {}, el("span", { class: "question" }, group.question), " ",
      badge(group.status, group.status)),
    el("p", { class: "hint met" }, `Met ${plural(group.times, "time")} by ${agents}, first `
      + `${when(group.first_seen)}, last ${when(group.last_seen)} · `
      + group.sources.join(" and ")),
    group.resolved_by.length ? el("div", { class: "answered" }, "Answered by ",
      el("ul", { class: "links" }, group.resolved_by.map((resolution) => el("li", {},
        namedLink(resolution.record_id, names),
        el("span", { class: "hint" }, ` relevance ${resolution.relevance}`))))) : null,
    el("table", { class: "gaps" },
      el("thead", {}, el("tr", {}, ["asked", "agent", "source", "times", "last met", "answered by"]
        .map((h) => el("th", {}, h)))),
      el("tbody", {}, group.gaps.map((gap) => el("tr", { "data-gap-id": gap.gap_id },
        el("td", {}, el("div", { class: "gap-text" }, gap.text),
          gap.query && gap.query !== gap.text
            ? el("div", { class: "hint" }, `searched: ${gap.query}`) : null),
        el("td", {}, gap.agent_id ?? "none"),
        el("td", {}, gap.source),
        el("td", { class: "number" }, gap.times),
        el("td", { class: "when" }, when(gap.last_seen)),
        el("td", {}, gap.resolved_by ? namedLink(gap.resolved_by, names)
          : el("span", { class: "hint" }, "not yet")))))),
    group.gap_count > group.gaps.length ? el("p", { class: "hint" },
      `and ${plural(group.gap_count - group.gaps.length, "more gap")}`) : null);
}

// -- planning ------------------------------------------------------------------------------

const planningItemLink = (repo, id) => el("a", {
  href: `#/planning-item/${encodeURIComponent(id)}?${new URLSearchParams({ repo })}`,
  class: "planning-item" }, id);

function degradedNote(answer) {
  return answer.degraded.length ? el("p", { class: "hint degraded", id: "planning-degraded" },
    `The file could not be read (${answer.degraded_why}): the items as last read.`) : null;
}

async function planningPage(_, params) {
  const repo = params.get("repo") || "";
  const form = el("form", { class: "search", id: "planning-form" },
    el("label", {}, "repository", el("input", { name: "repo", value: repo, required: true })),
    el("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/planning?${new URLSearchParams({ repo: form.elements.repo.value })}`;
  });
  const page = el("section", { "data-page": "planning" }, el("h1", {}, "Planning"),
    el("p", { class: "hint" }, "A repository's Beads work items, read from its "
      + ".beads/issues.jsonl with the claims, closes and follow-ups of runs not written back "
      + "yet: ready is open with no open blocker."), form);
  if (!repo) return page;
  const listing = await api("/v1/planning/items", { repo });
  page.append(el("div", { id: "planning-items" }, degradedNote(listing), listing.items.length
    ? el("table", { class: "planning" },
      el("tr", {}, ["item", "status", "priority", "ready", "blockers", "title"]
        .map((h) => el("th", {}, h))),
      listing.items.map((item) => el("tr", { "data-item-id": item.id },
        el("td", {}, planningItemLink(repo, item.id)), el("td", {}, badge(item.status,
          item.status)),
        el("td", { class: "number" }, `P${item.priority}`),
        el("td", { class: "ready" }, item.ready ? "ready" : ""),
        el("td", { class: "blockers" }, item.blockers.map((id) => planningItemLink(repo, id))),
        el("td", { class: "title" }, item.title))))
    : el("p", { class: "hint" }, "No items.")));
  return page;
}

async function planningItemPage(itemId, params) {
  const repo = params.get("repo") || "";
  const shown = await api(`/v1/planning/items/${encodeURIComponent(itemId)}`, { repo });
  const { item } = shown;
  return el("section", { "data-page": "planning-item" },
    el("h1", {}, `${item.id} · ${item.title}`, " ", badge(item.status, item.status)),
    degradedNote(shown),
    fieldsTable([["repository", el("a", { href: `#/planning?${new URLSearchParams({ repo })}` },
      repo)], ["priority", `P${item.priority}`], ["type", item.issue_type],
    ["ready", item.ready ? "yes" : "no"], ["assignee", item.assignee || "none"],
    ["parent", item.parent ? planningItemLink(repo, item.parent) : "none"],
    ["close reason", item.close_reason || "—"], ["updated", when(item.updated_at)]]),
    item.description ? el("p", { class: "text", id: "planning-description" },
      item.description) : null,
    item.acceptance_criteria ? el("div", {}, el("h2", {}, "Acceptance criteria"),
      el("p", { class: "text", id: "planning-criteria" }, item.acceptance_criteria)) : null,
    el("h2", {}, `Blockers (${shown.blockers.length})`), shown.blockers.length
      ? el("ul", { class: "links", id: "planning-blockers" }, shown.blockers.map((blocker) =>
        el("li", { "data-item-id": blocker.id }, planningItemLink(repo, blocker.id), " ",
          badge(blocker.status || "elsewhere", blocker.open ? "open" : blocker.status || ""),
          ` ${blocker.kind}: ${blocker.title || "not in this file"}`)))
      : el("p", { class: "hint" }, "None."),
    el("h2", {}, `Ready siblings (${shown.ready_siblings.length})`), shown.ready_siblings.length
      ? el("ul", { class: "links", id: "planning-siblings" }, shown.ready_siblings.map(
        (sibling) => el("li", { "data-item-id": sibling.id }, planningItemLink(repo, sibling.id),
          ` P${sibling.priority} ${sibling.title}`)))
      : el("p", { class: "hint" }, "None."));
}

// -- graph ---------------------------------------------------------------------------------

async function graphPage(_, params) {
  const from = params.get("from") || "";
  const depth = params.get("depth") || "1";
  const asOf = params.get("as_of") || "";
  // Entities are drawn beside the memories unless turned off.
  const withEntities = params.get("entities") !== "false";
  const form = el("form", { class: "search", id: "graph-form" },
    el("label", {}, "around", el("input", { name: "from", value: from,
      placeholder: "a record id, or entity:name (blank: the whole graph)" })),
    choice("depth", ["1", "2", "3"], depth, null),
    el("label", {}, "as of (UTC)", el("input", { name: "as_of", type: "datetime-local",
      value: asOf })),
    el("label", {}, el("input", { name: "entities", type: "checkbox", value: "true",
      checked: withEntities }), " entities"),
    el("button", { type: "submit" }, "Draw"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (value) wanted.set(name, value);
    if (!wanted.has("entities")) wanted.set("entities", "false");
    if (!wanted.get("from")) wanted.delete("depth");
    location.hash = `#/graph?${wanted}`;
  });
  const when = asOf ? { as_of: asOf } : {};
  let nodes;
  let edges;
  let summary;
  if (from) {
    const around = await api("/v1/graph/neighbours", { from, depth, ...when });
    const shown = around.nodes.filter((node) => withEntities || node.type === "record");
    const kept = new Set(shown.map((node) => node.id));
    nodes = shown.map((node) => (node.type === "entity"
      ? { id: node.id, entity: true, name: node.name, kind: node.entity_kind,
        records: node.records }
      : { ...node, record_id: node.record_id, review_state: "approved" }));
    edges = around.edges.filter((edge) => kept.has(edge.source) && kept.has(edge.target));
    summary = `${shown.length} nodes within ${depth} hop${depth === "1" ? "" : "s"} of ${from}`
      + (around.truncated ? " · cut at the most one answer shows" : "");
  } else {
    const graph = await api("/v1/graph", { limit: params.get("limit") || "300", ...when,
      ...(withEntities ? { entities: "true" } : {}) });
    nodes = [...graph.nodes.map((node) => ({ ...node, id: node.record_id })),
      ...(graph.entities || []).map((entity) => ({ id: `entity:${entity.key}`, entity: true,
        name: entity.name, kind: entity.entity_kind, records: entity.records }))];
    edges = [...graph.edges, ...(graph.mentions || [])];
    summary = `${graph.nodes.length} memories, ${graph.edges.length} links`
      + (withEntities ? ` · ${(graph.entities || []).length} entities two or more mention` : "")
      + ` · ${graph.unresolved_links} unresolved wiki-links`
      + ` · ${graph.related_outside} related ids outside the graph`
      + (graph.truncated ? " · cut at the newest memories" : "");
  }
  if (asOf) summary += ` · as of ${asOf.replace("T", " ")} UTC`;
  const width = 1100;
  const height = 640;
  const position = layout(nodes, edges, width, height);
  const canvas = svg("svg", { id: "graph", viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-label": "memory graph" });
  for (const edge of edges) {
    const [a, b] = [position.get(edge.source), position.get(edge.target)];
    if (!a || !b) continue;
    canvas.append(svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y,
      class: `edge ${edgeClass(edge.relation)}` }));
  }
  for (const node of nodes) {
    const { x, y } = position.get(node.id);
    const label = node.entity ? node.name : labelOf(node, GRAPH_LABEL_WORDS, GRAPH_LABEL_CHARS);
    const group = svg("g", { class: node.entity ? "node entity" : `node ${node.review_state}`,
      tabindex: 0, [node.entity ? "data-entity" : "data-record-id"]: node.entity
        ? node.id.slice("entity:".length) : node.record_id,
      transform: `translate(${x} ${y})` },
    svg("title", {}, node.entity
      ? `${node.name} (${node.kind}, mentioned by ${node.records})`
      : `${labelOf(node)} (${node.memory_type || node.kind}, ${node.review_state}) · `
        + node.record_id),
    node.entity ? svg("rect", { x: -6, y: -6, width: 12, height: 12, class: "entity" })
      : svg("circle", { r: 9, fill: TYPE_COLOURS[node.memory_type] || OTHER_COLOUR }),
    node.review_state === "draft" ? svg("circle", { r: 13, class: "ring" }) : null,
    svg("text", x + GRAPH_LABEL_ROOM > width ? { x: -16, y: 4, "text-anchor": "end" }
      : { x: 16, y: 4 }, label));
    // A record opens its page; an entity draws the graph around it.
    const open = () => {
      location.hash = node.entity
        ? `#/graph?${new URLSearchParams({ from: node.id, depth: "1", ...when })}`
        : `#/record/${encodeURIComponent(node.record_id)}`;
    };
    group.addEventListener("click", open);
    group.addEventListener("keydown", (event) => { if (event.key === "Enter") open(); });
    canvas.append(group);
  }
  const types = [...new Set(nodes.filter((node) => !node.entity)
    .map((node) => node.memory_type || "other"))].sort();
  return el("section", { "data-page": "graph" }, el("h1", {}, "Graph"), form,
    el("p", { class: "hint", id: "graph-summary" }, summary),
    el("ul", { class: "legend" }, types.map((type) => el("li", {},
      svg("svg", { width: 14, height: 14 }, svg("circle", { cx: 7, cy: 7, r: 6,
        fill: TYPE_COLOURS[type] || OTHER_COLOUR })), ` ${type}`)),
    el("li", { class: "draft" }, svg("svg", { width: 20, height: 20 },
      svg("circle", { cx: 10, cy: 10, r: 5, fill: OTHER_COLOUR }),
      svg("circle", { cx: 10, cy: 10, r: 8, class: "ring" })), " draft, awaiting review"),
    withEntities ? el("li", {}, svg("svg", { width: 14, height: 14 },
      svg("rect", { x: 1, y: 1, width: 12, height: 12, class: "entity" })),
    " entity (a name records mention)") : null,
    el("li", {}, el("span", { class: "line related" }), " related"),
    el("li", {}, el("span", { class: "line wiki_link" }), " wiki-link"),
    withEntities ? el("li", {}, el("span", { class: "line mentions" }), " mentions") : null),
    nodes.length ? canvas : el("p", { class: "hint" }, from ? "Nothing around it."
      : "No memories yet."));
}

// How a link is drawn: a related id and a wiki-link as such, a record and an entity it names
// (either way) as a mention, two entities a sentence relates ("uses", "depends on" …) as a
// relation.
function edgeClass(relation) {
  if (relation === "related" || relation === "wiki_link") return relation;
  return relation === "mentions" || relation === "mentioned_by" ? "mentions" : "relation";
}

// A small force layout (Fruchterman-Reingold): nodes repel, links pull, the whole cools
// down; it starts from a circle, so the same graph is drawn the same way every time.
function layout(nodes, edges, width, height, iterations = 250) {
  const margin = 30;
  const n = nodes.length;
  const k = Math.sqrt(((width - 2 * margin) * (height - 2 * margin)) / Math.max(n, 1)) * 0.75;
  const points = nodes.map((node, i) => ({
    id: node.id,
    x: width / 2 + (width / 3) * Math.cos((2 * Math.PI * i) / Math.max(n, 1)),
    y: height / 2 + (height / 3) * Math.sin((2 * Math.PI * i) / Math.max(n, 1)),
  }));
  const index = new Map(points.map((point, i) => [point.id, i]));
  const links = edges.map((edge) => [index.get(edge.source), index.get(edge.target)]);
  let temperature = width / 8;
  for (let step = 0; step < iterations; step++) {
    const dx = new Float64Array(n);
    const dy = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        const x = points[i].x - points[j].x;
        const y = points[i].y - points[j].y;
        const d = Math.max(Math.hypot(x, y), 0.01);
        const force = (k * k) / d;
        dx[i] += (x / d) * force; dy[i] += (y / d) * force;
        dx[j] -= (x / d) * force; dy[j] -= (y / d) * force;
      }
    }
    for (const [a, b] of links) {
      const x = points[a].x - points[b].x;
      const y = points[a].y - points[b].y;
      const d = Math.max(Math.hypot(x, y), 0.01);
      const force = (d * d) / k;
      dx[a] -= (x / d) * force; dy[a] -= (y / d) * force;
      dx[b] += (x / d) * force; dy[b] += (y / d) * force;
    }
    for (let i = 0; i < n; i++) {
      // A little gravity keeps unlinked nodes from drifting to the edges.
      dx[i] += (width / 2 - points[i].x) * 0.05 * k / 10;
      dy[i] += (height / 2 - points[i].y) * 0.05 * k / 10;
      const d = Math.max(Math.hypot(dx[i], dy[i]), 0.01);
      const move = Math.min(d, temperature);
      points[i].x = Math.min(width - margin, Math.max(margin, points[i].x + (dx[i] / d) * move));
      points[i].y = Math.min(height - margin, Math.max(margin, points[i].y + (dy[i] / d) * move));
    }
    temperature = Math.max(temperature * 0.97, 0.5);
  }
  return new Map(points.map((point) => [point.id, point]));
}
