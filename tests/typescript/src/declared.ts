// The answers' run-time check: each answer the server sends is held against the JSON Schema
// that GET /v1/openapi.json declares for it (the very document the types were generated
// from), so that an answer that drifts from its declaration fails the run, as the compiler
// fails a program that reads a field the declaration lacks.
import { readFileSync } from "node:fs";

import { Ajv2020 } from "ajv/dist/2020.js";
import type { ValidateFunction } from "ajv/dist/2020.js";
import formatsModule from "ajv-formats";

import type { components } from "./generated/memstream.js";

export type Schemas = components["schemas"];

// ajv-formats is CommonJS: its default export is the plugin itself at run time.
const addFormats = formatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

const DOCUMENT_ID = "memstream-openapi.json";

/** A JSON pointer's segment, as the fragment of a URI. */
function pointer(...segments: string[]): string {
  return segments
    .map((segment) => encodeURIComponent(segment.replaceAll("~", "~0").replaceAll("/", "~1")))
    .join("/");
}

export class AnswerDrift extends Error {
  override name = "AnswerDrift";
}

export class Declared {
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly document: { paths: Record<string, Record<string, unknown>> };

  constructor(documentPath: string) {
    this.document = JSON.parse(readFileSync(documentPath, "utf8"));
    // strict off: the document carries OpenAPI's own keywords (`example`) beside JSON Schema's.
    this.ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(this.ajv);
    this.ajv.addSchema(this.document, DOCUMENT_ID);
  }

  private validator(ref: string): ValidateFunction {
    let validate = this.compiled.get(ref);
    if (validate === undefined) {
      validate = this.ajv.compile({ $ref: `${DOCUMENT_ID}#/${ref}` });
      this.compiled.set(ref, validate);
    }
    return validate;
  }

  private holds(ref: string, what: string, value: unknown): void {
    const validate = this.validator(ref);
    if (!validate(value)) {
      const problems = (validate.errors ?? []).map(
        (error) => `${error.instancePath || "/"} ${error.message ?? "is invalid"}`,
      );
      throw new AnswerDrift(`${what} drifts from its declared schema: ${problems.join("; ")}`);
    }
  }

  /** The answer of `method path` (a route as the document names it) with this status. */
  answer(method: string, path: string, status: number, body: unknown): void {
    const operation = this.document.paths[path]?.[method.toLowerCase()] as
      | { responses?: Record<string, { content?: Record<string, unknown> }> }
      | undefined;
    const declared = operation?.responses?.[String(status)]?.content?.["application/json"];
    if (declared === undefined) {
      throw new AnswerDrift(`${method} ${path} answered ${status}, which it does not declare`);
    }
    const ref = pointer("paths", path, method.toLowerCase(), "responses", String(status),
      "content", "application/json", "schema");
    this.holds(ref, `the answer of ${method} ${path} (${status})`, body);
  }

  /** A value that should be the component schema `name` (an MCP tool's answer, say). */
  component<Name extends keyof Schemas>(name: Name, value: unknown): Schemas[Name] {
    this.holds(pointer("components", "schemas", name), `${name}`, value);
    return value as Schemas[Name];
  }
}
