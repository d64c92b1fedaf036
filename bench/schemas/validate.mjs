// Structured outputs over a directory of real-world JSON Schemas (such as
// JSONSchemaBench's data/Github_* and data/Snowplow, which are not kept
// here): each schema sent as response_format to a running `tpsrun serve`,
// and each answer that finished judged by ajv (draft 7 / 2019 / 2020 as the
// schema says, with ajv-formats). Prints what was served, refused (with the
// most common reasons), finished and valid.
//   node bench/schemas/validate.mjs BASE_URL API_KEY MODEL DIR [COUNT] [SEED]
// BASE_URL without /v1; COUNT schemas drawn from DIR by a seeded shuffle.
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(new URL("../../tests/reference/", import.meta.url));
const OpenAI = require("openai").default;
const Ajv = require("ajv").default;
const Ajv2019 = require("ajv/dist/2019").default;
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;

const [base, key, model, dir, count = "100", seed = "1"] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0, timeout: 300000 });

let state = Number(seed) >>> 0;
const random = () => ((state = (state * 1664525 + 1013904223) >>> 0) / 2 ** 32);
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
for (let i = files.length - 1; i > 0; --i) {
  const j = Math.floor(random() * (i + 1));
  [files[i], files[j]] = [files[j], files[i]];
}

function validator(schema) {
  const draft = String(schema.$schema || "");
  const Kind = draft.includes("2020-12") ? Ajv2020 : draft.includes("2019-09") ? Ajv2019 : Ajv;
  const ajv = new Kind({ strict: false, allErrors: false, validateSchema: false });
  addFormats(ajv);
  return ajv.compile(schema);
}

const tally = { sent: 0, served: 0, refused: 0, finished: 0, valid: 0, unjudged: 0 };
const reasons = new Map();
for (const f of files.slice(0, Number(count))) {
  let schema;
  try {
    schema = JSON.parse(readFileSync(join(dir, f), "utf8"));
  } catch {
    continue;
  }
  ++tally.sent;
  let r;
  try {
    r = await client.chat.completions.create({
      model, max_tokens: 400, temperature: 0.7, seed: 1,
      messages: [{ role: "user", content: "Give an example JSON value." }],
      response_format: { type: "json_schema", json_schema: { name: "x", schema } },
    });
  } catch (e) {
    if (e.status !== 400) throw e;
    ++tally.refused;
    const why = String(e.error?.message ?? e.message).replace(/^.*?schema at [^:]*: /, "").slice(0, 60);
    reasons.set(why, (reasons.get(why) ?? 0) + 1);
    continue;
  }
  ++tally.served;
  if (r.choices[0].finish_reason !== "stop") continue;
  ++tally.finished;
  let check;
  try {
    check = validator(schema);
  } catch {
    ++tally.unjudged;  // ajv cannot compile it (remote $ref, ...)
    continue;
  }
  const text = r.choices[0].message.content;
  if (check(JSON.parse(text))) ++tally.valid;
  else console.log(`INVALID ${f}: ${text.slice(0, 200)} ${JSON.stringify(check.errors).slice(0, 300)}`);
}
console.log(JSON.stringify(tally));
for (const [why, n] of [...reasons].sort((a, b) => b[1] - a[1]).slice(0, 10)) console.log(`${n}\t${why}`);
