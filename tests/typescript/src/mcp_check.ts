// A session over MCP from TypeScript, with the official SDK's client over streamable HTTP:
// agent A (MEMSTREAM_API_KEY) wakes, remembers a personal memory and a shared one, recalls
// them, rates what it recalled, sleeps with a handoff and wakes again to that handoff; agent B
// (MEMSTREAM_OTHER_KEY, the same namespace) recalls and reads, and never sees A's personal
// memory (docs/mcp.md). `wake` answers the HTTP API's Woke, held at run time against the
// document's schema and typed by the generated types; the tools' own answers are declared
// here (zod), their types inferred from those declarations, and each answer is parsed by
// them: an answer that drifts fails the run (exit 1).
//
//   MEMSTREAM_MCP_URL=… MEMSTREAM_API_KEY=… MEMSTREAM_OTHER_KEY=… MEMSTREAM_NAMESPACE=…
//   node out/mcp_check.js DOCUMENT
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";

import { AnswerDrift, Declared } from "./declared.js";
import type { Schemas } from "./declared.js";

const WAIT_S = 30;

// What `remember` answers (docs/mcp.md#what-a-write-answers).
const Written = z.object({
  outcome: z.enum(["stored", "restated", "refused", "dead_lettered", "pending", "updated",
                   "proposed", "unchanged"]),
  event_id: z.string(),
  record_id: z.string().optional(),
  version: z.number().int().optional(),
  reason: z.string().optional(),
  note: z.string().optional(),
});
const Recalled = z.object({
  hits: z.array(z.object({
    record_id: z.string(),
    title: z.string().nullable(),
    text: z.string(),
    relevance: z.number(),
    memory_type: z.string().nullable(),
    tags: z.array(z.string()),
    scope: z.string(),
    confidence: z.number(),
    created_at: z.string(),
  })),
  namespace_holds_records: z.boolean().nullable(),
});
const Rated = z.object({ event_id: z.string(), rated: z.number().int() });
const Slept = z.object({
  session_id: z.string(),
  handoff_record_id: z.string().nullable(),
  handoff: Written.nullable(),
});
const Read = z.object({
  records: z.array(z.object({ record_id: z.string(), text: z.string() })),
  not_found: z.array(z.string()),
});

type Written = z.infer<typeof Written>;
type Recalled = z.infer<typeof Recalled>;

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function fail(message: string): never {
  throw new Error(message);
}

class Agent {
  private constructor(readonly name: string, private readonly client: Client,
                      private readonly declared: Declared) {}

  static async connect(name: string, url: string, key: string, namespace: string,
                       declared: Declared): Promise<Agent> {
    const client = new Client({ name: `memstream-ts-check-${name}`, version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(url), {
      requestInit: {
        headers: { Authorization: `Bearer ${key}`, "X-Memstream-Namespace": namespace },
      },
    }));
    return new Agent(name, client, declared);
  }

  /** A tool's structured answer, parsed by its declaration. */
  async call<T>(tool: string, shape: z.ZodType<T>, args: Record<string, unknown>): Promise<T> {
    const result = await this.client.callTool({ name: tool, arguments: args });
    if (result.isError) fail(`${this.name}: ${tool} failed: ${JSON.stringify(result.content)}`);
    const parsed = shape.safeParse(result.structuredContent);
    if (!parsed.success) {
      const problems = parsed.error.issues.map(
        (issue) => `/${issue.path.join("/")} ${issue.message}`);
      throw new AnswerDrift(`${this.name}: the answer of ${tool} drifts from its declaration: ` +
        problems.join("; "));
    }
    return parsed.data;
  }

  async wake(task: string): Promise<Schemas["Woke"]> {
    const result = await this.client.callTool({ name: "wake", arguments: { task } });
    if (result.isError) fail(`${this.name}: wake failed: ${JSON.stringify(result.content)}`);
    return this.declared.component("Woke", result.structuredContent);
  }

  async remember(text: string, scope: "personal" | "shared"): Promise<string> {
    const written: Written = await this.call("remember", Written, {
      text, scope, memory_type: "decision", tags: ["ts-check"] });
    if (written.outcome !== "stored" || written.record_id === undefined) {
      fail(`${this.name}: the memory was not stored: ${JSON.stringify(written)}`);
    }
    return written.record_id;
  }

  async recall(query: string): Promise<Recalled> {
    return this.call("recall", Recalled, { query, min_score: 0, limit: 20 });
  }

  /** Recalls until `done` holds of the answer, or fails after WAIT_S. */
  async recallUntil(query: string, done: (answer: Recalled) => boolean): Promise<Recalled> {
    const deadline = Date.now() + WAIT_S * 1000;
    for (;;) {
      const answer = await this.recall(query);
      if (done(answer)) return answer;
      if (Date.now() > deadline) {
        fail(`${this.name}: recall never found it: ${JSON.stringify(answer)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  async tools(): Promise<Set<string>> {
    return new Set((await this.client.listTools()).tools.map((tool) => tool.name));
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

function ids(answer: Recalled): string[] {
  return answer.hits.map((hit) => hit.record_id);
}

async function main(): Promise<void> {
  const documentPath = process.argv[2] ?? fail("usage: mcp_check.js DOCUMENT");
  const url = setting("MEMSTREAM_MCP_URL");
  const namespace = setting("MEMSTREAM_NAMESPACE");
  const declared = new Declared(documentPath);
  const a = await Agent.connect("A", url, setting("MEMSTREAM_API_KEY"), namespace, declared);
  const b = await Agent.connect("B", url, setting("MEMSTREAM_OTHER_KEY"), namespace, declared);
  const marker = `tsm${Date.now().toString(36)}`;
  const tools = await a.tools();
  for (const tool of ["wake", "remember", "recall", "rate_memories", "sleep", "get_memories"]) {
    if (!tools.has(tool)) fail(`the server has no tool ${tool}`);
  }

  const woke = await a.wake(`plan the ${marker} migration`);
  if (woke.handoff !== null) fail(`a first wake has a handoff: ${JSON.stringify(woke.handoff)}`);
  const sessionId: string = woke.session_id;
  const personal = await a.remember(
    `My own ${marker} note: the migration's dry run needs the read replica paused first.`,
    "personal");
  const shared = await a.remember(
    `Team decision on the ${marker} migration: it runs on Sunday nights, never on weekdays.`,
    "shared");
  const query = `what must happen before the ${marker} migration dry run?`;
  const recalled = await a.recallUntil(
    query, (answer) => [personal, shared].every((id) => ids(answer).includes(id)));
  const mine = recalled.hits.find((hit) => hit.record_id === personal);
  if (mine?.scope !== "personal" || !mine.text.includes(marker)) {
    fail(`A's own memory is not as written: ${JSON.stringify(mine)}`);
  }
  const rated = await a.call("rate_memories", Rated, {
    ratings: [{ memory_id: personal, useful: true }, { memory_id: shared, useful: false }] });
  if (rated.rated !== 2) fail(`rated ${rated.rated}, not 2`);
  const slept = await a.call("sleep", Slept, {
    session_id: sessionId, summary: `Planned the ${marker} migration's dry run.`,
    next_steps: [`Pause the ${marker} read replica`] });
  if (slept.session_id !== sessionId || slept.handoff?.outcome !== "stored" ||
      slept.handoff_record_id === null) {
    fail(`the sleep's handoff was not stored: ${JSON.stringify(slept)}`);
  }

  const deadline = Date.now() + WAIT_S * 1000;
  let handoff: Schemas["Handoff"] | null = null;
  let again: Schemas["Woke"] | undefined;
  while (handoff === null) {
    if (Date.now() > deadline) fail("the next wake never answered the handoff");
    again = await a.wake(`continue the ${marker} migration`);
    handoff = again.handoff;
    if (handoff === null) await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const nextSteps: string[] = handoff.next_steps;
  if (handoff.record_id !== slept.handoff_record_id || handoff.session_id !== sessionId ||
      nextSteps[0] !== `Pause the ${marker} read replica`) {
    fail(`the handoff is not the one slept: ${JSON.stringify(handoff)}`);
  }

  // Agent B, of the same namespace: the shared memory, never A's personal one.
  const bWoke = await b.wake(`the ${marker} migration dry run`);
  if (bWoke.handoff !== null || JSON.stringify(bWoke).includes("read replica")) {
    fail(`B's wake shows A's memory: ${JSON.stringify(bWoke)}`);
  }
  const seen = await b.recallUntil(query, (answer) => ids(answer).includes(shared));
  if (ids(seen).includes(personal) || ids(seen).includes(slept.handoff_record_id) ||
      JSON.stringify(seen).includes("read replica")) {
    fail(`B recalls A's personal memory: ${JSON.stringify(seen)}`);
  }
  const read = await b.call("get_memories", Read, { record_ids: [personal, shared] });
  if (read.records.map((record) => record.record_id).join() !== shared ||
      read.not_found.join() !== personal) {
    fail(`B reads A's personal memory: ${JSON.stringify(read)}`);
  }
  await a.close();
  await b.close();
  console.log(JSON.stringify({
    session_id: sessionId, personal, shared, handoff: handoff.record_id, rated: rated.rated,
    a_recalled: ids(recalled).length, b_recalled: ids(seen).length,
    b_not_found: read.not_found,
  }));
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
  process.exit(1);
});
