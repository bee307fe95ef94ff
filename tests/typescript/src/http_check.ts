// A TypeScript program against the running worker, typed by the types openapi-typescript
// generated from its GET /v1/openapi.json: it writes a memory (waiting for the write's
// outcome), searches for it, reads the context pack for a task it answers and reads the
// record back. Every answer is held at run time against the schema the document declares for
// it (src/declared.ts); a drift fails the run (exit 1) with what drifted.
//
//   MEMSTREAM_URL=… MEMSTREAM_API_KEY=… MEMSTREAM_NAMESPACE=… node out/http_check.js DOCUMENT
import createClient from "openapi-fetch";
import type { Middleware } from "openapi-fetch";

import { Declared } from "./declared.js";
import type { Schemas } from "./declared.js";
import type { paths } from "./generated/memstream.js";

const WAIT_S = 30;

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function fail(message: string): never {
  throw new Error(message);
}

async function main(): Promise<void> {
  const documentPath = process.argv[2] ?? fail("usage: http_check.js DOCUMENT");
  const baseUrl = setting("MEMSTREAM_URL");
  const namespace = setting("MEMSTREAM_NAMESPACE");
  const declared = new Declared(documentPath);
  let checked = 0;

  const answersChecked: Middleware = {
    async onResponse({ request, response, schemaPath }) {
      const body: unknown = await response.clone().json();
      if (!response.ok) {
        fail(`${request.method} ${schemaPath} answered ${response.status}: ` +
          JSON.stringify(body));
      }
      declared.answer(request.method, schemaPath, response.status, body);
      checked += 1;
      return undefined;
    },
  };
  const api = createClient<paths>({
    baseUrl,
    headers: { Authorization: `Bearer ${setting("MEMSTREAM_API_KEY")}` },
  });
  api.use(answersChecked);

  const marker = `tsk${Date.now().toString(36)}`;
  const text = `The ${marker} release train leaves on Thursdays: the code freeze starts ` +
    `on Wednesday at noon, and hotfixes need two reviewers.`;
  const body: Schemas["MemoryWriteBody"] = {
    namespace, text, title: `The ${marker} release train`, memory_type: "decision",
    tags: ["release", marker], scope: "shared",
    source_ref: "tests/typescript/src/http_check.ts",
  };
  const written = await api.POST("/v1/memories", { params: { query: { wait: 10 } }, body });
  const outcome: Schemas["MemoryWritten"] = written.data ?? fail("no answer to the write");
  // A field with a default may be absent from an answer: its type says so.
  const recordId: string = outcome.record_id ??
    fail(`the write names no record: ${JSON.stringify(outcome)}`);
  const version: number | null | undefined = outcome.version;
  if (outcome.outcome !== "stored" || version !== 1) {
    fail(`the write was not stored as a new memory: ${JSON.stringify(outcome)}`);
  }

  const deadline = Date.now() + WAIT_S * 1000;
  let hit: Schemas["SearchHit"] | undefined;
  let searches = 0;
  while (hit === undefined) {
    if (Date.now() > deadline) fail(`search never found ${recordId}`);
    if (searches > 0) await new Promise((resolve) => setTimeout(resolve, 250));
    const found = await api.GET("/v1/search", {
      params: { query: { namespace, query: `when does the ${marker} code freeze start?`,
                         min_score: 0, limit: 10 } },
    });
    searches += 1;
    const answer: Schemas["SearchAnswer"] = found.data ?? fail("no answer to the search");
    hit = answer.hits.find((each) => each.record_id === recordId);
  }
  const relevance: number = hit.relevance;
  const tags: string[] = hit.tags;
  if (!hit.text.includes(marker) || !tags.includes(marker) || hit.title === null ||
      hit.memory_type !== "decision") {
    fail(`the hit is not the memory written: ${JSON.stringify(hit)}`);
  }

  const packed = await api.GET("/v1/context", {
    params: { query: { namespace, query: `plan the ${marker} release`, min_score: 0 } },
  });
  const pack: Schemas["ContextPack"] = packed.data ?? fail("no context pack");
  const items: Schemas["ContextItem"][] = Object.values(pack.sections).flat();
  const item = items.find((each) => each.record_id === recordId) ??
    fail(`the context pack does not hold ${recordId}: ${JSON.stringify(pack.sections)}`);
  const tokens: number = pack.tokens + item.token_cost;

  const read = await api.GET("/v1/records/{record_id}", {
    params: { path: { record_id: recordId }, query: { namespace } },
  });
  const lineage: Schemas["RecordLineage"] = read.data ?? fail("no record");
  console.log(JSON.stringify({
    record_id: recordId, version, searches, relevance, tokens,
    sections: Object.keys(pack.sections), lineage: Object.keys(lineage).sort(),
    answers_checked: checked,
  }));
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
  process.exit(1);
});
