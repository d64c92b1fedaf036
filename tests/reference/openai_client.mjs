// The server as OpenAI's official client (the `openai` npm package) sees it.
//   node openai_client.mjs BASE_URL API_KEY MODEL_ID
// Prints one line per check; exits 1 on the first failure, with what differed.
import Ajv from "ajv";
import addFormats from "ajv-formats";
import OpenAI from "openai";

import { base, check, client, modelId } from "./client_check.mjs";

const user = (text) => [{ role: "user", content: text }];
// Greedy, so that the same request gives the same text whenever it runs.
const greedy = { model: modelId, temperature: 0, max_tokens: 24 };

// Models.
const models = await client.models.list();
check(models.data.some((m) => m.id === modelId), "GET /v1/models lists the model", models.data);

// Chat, plain.
const plain = await client.chat.completions.create({ ...greedy, messages: user("Say hello.") });
const c0 = plain.choices[0];
check(plain.object === "chat.completion" && c0.message.role === "assistant", "chat: a chat.completion", plain);
check(["stop", "length", "tool_calls"].includes(c0.finish_reason), "chat: a finish reason", c0.finish_reason);
check(plain.usage.prompt_tokens > 0 && plain.usage.completion_tokens > 0 &&
      plain.usage.total_tokens === plain.usage.prompt_tokens + plain.usage.completion_tokens,
      "chat: usage adds up", plain.usage);
check(plain.usage.prompt_tokens_details.cached_tokens >= 0, "chat: usage reports cached prompt tokens");

// Chat, streamed: the same text, chunk by chunk, with usage at the end.
const stream = await client.chat.completions.create({
  ...greedy, messages: user("Say hello."), stream: true, stream_options: { include_usage: true } });
let streamed = "", reasoning = "", roles = 0, finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  ++chunks;
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    if (choice.delta.role) ++roles;
    streamed += choice.delta.content || "";
    reasoning += choice.delta.reasoning_content || "";
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
check(roles === 1 && chunks > 2, "stream: one role delta, several chunks", { roles, chunks });
check(streamed === (c0.message.content || "") && reasoning === (c0.message.reasoning_content || ""),
      "stream: the same text as the plain request", { streamed, plain: c0.message.content });
check(finish === c0.finish_reason && usage && usage.completion_tokens === plain.usage.completion_tokens,
      "stream: finish reason and usage at the end", { finish, usage });
// The second identical request reused the first one's prompt prefix.
check(usage.prompt_tokens_details.cached_tokens > 0, "stream: the repeated prompt came from the prefix cache", usage);

// The official stream helper accepts the chunks.
const helper = client.chat.completions.stream({ ...greedy, messages: user("Count to three.") });
const final = await helper.finalChatCompletion();
check(final.choices[0].message.role === "assistant", "stream helper: a final completion");

// Completions (a raw prompt): content to test stop strings and lengths on.
const text = (await client.completions.create({ ...greedy, prompt: "The quick brown fox", max_tokens: 32 }))
  .choices[0].text;
check(text.length > 4, "completions: text", text);
const stopAt = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 2);
const stopped = await client.completions.create({ ...greedy, prompt: "The quick brown fox", max_tokens: 32,
                                                  stop: [stopAt] });
check(stopped.choices[0].text === text.slice(0, text.indexOf(stopAt)) && stopped.choices[0].finish_reason === "stop",
      "stop: the text ends before the stop string", { text, stopAt, got: stopped.choices[0].text });
const short = await client.completions.create({ ...greedy, prompt: "The quick brown fox", max_tokens: 3 });
check(short.usage.completion_tokens <= 3, "max_tokens: at most 3 tokens", short.usage);

// Log-probabilities.
const lp = await client.chat.completions.create({ ...greedy, max_tokens: 40, messages: user("Hi"), logprobs: true,
                                                  top_logprobs: 3 });
const entries = lp.choices[0].logprobs.content;
check(Array.isArray(entries) && entries.every((e) => e.top_logprobs.length === 3 && e.logprob <= 0),
      "logprobs: each content token with its top 3", entries && entries.slice(0, 2));

// A tool-call round trip: tools offered, then the call and its result in the history.
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather in a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const first = await client.chat.completions.create({ ...greedy, messages: user("Weather in Paris?"), tools });
check(first.choices.length === 1, "tools: a request with functions is served");
const round = await client.chat.completions.create({ ...greedy, tools, messages: [
  ...user("Weather in Paris?"),
  { role: "assistant", content: null,
    tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
  { role: "tool", tool_call_id: "call_1", content: '{"sunny": true}' }] });
check(round.choices[0].message.role === "assistant", "tools: the call and its result fed back are served");

// Structured outputs. Left alone, the random-weight model never writes JSON:
// every answer that validates was held to its schema. ajv (an independent
// validator) judges each; the schemas are bounded (enums, bounded integers,
// short strings) so that the answer ends within max_tokens at temperature 1.
const ajv = new Ajv({ strict: false });
addFormats(ajv);
const answerSchema = { type: "object", additionalProperties: false, required: ["ok", "n", "color", "tag"],
  properties: { ok: { type: "boolean" }, n: { type: "integer", minimum: -5, maximum: 99 },
                color: { enum: ["red", "green", "blue"] }, tag: { type: "string", maxLength: 6 },
                when: { type: "string", format: "date" } } };
const validAnswer = ajv.compile(answerSchema);
const structured = { model: modelId, temperature: 1, max_tokens: 160, reasoning_effort: "low", messages: user("Fill the form.") };
const schemaFormat = { type: "json_schema", json_schema: { name: "form", strict: true, schema: answerSchema } };
for (const seed of [1, 2, 3]) {
  const r = await client.chat.completions.create({ ...structured, seed, response_format: schemaFormat });
  const c = r.choices[0];
  let parsed;
  try { parsed = JSON.parse(c.message.content); } catch (e) { parsed = e.message; }
  check(c.finish_reason === "stop" && validAnswer(parsed), `json_schema: seed ${seed} answers valid JSON`,
        { finish: c.finish_reason, content: c.message.content, errors: validAnswer.errors });
}
const streamedForm = await client.chat.completions.create({ ...structured, seed: 4, response_format: schemaFormat,
                                                             stream: true });
let formText = "";
for await (const chunk of streamedForm) for (const choice of chunk.choices) formText += choice.delta.content || "";
let formParsed;
try { formParsed = JSON.parse(formText); } catch (e) { formParsed = e.message; }
check(validAnswer(formParsed), "json_schema, streamed: the chunks make valid JSON", formText);
const completionForm = await client.completions.create({ model: modelId, temperature: 1, seed: 5, max_tokens: 80,
                                                          prompt: "Form:", response_format: schemaFormat });
let completionParsed;
try { completionParsed = JSON.parse(completionForm.choices[0].text); } catch (e) { completionParsed = e.message; }
check(validAnswer(completionParsed), "json_schema on completions: the raw text is the JSON",
      completionForm.choices[0].text);
// Strict tools: a forced call's arguments are valid for its function.
const strictTools = [
  { type: "function", function: { name: "add", strict: true, parameters: { type: "object", additionalProperties: false,
    required: ["a", "b"], properties: { a: { type: "integer", minimum: 0, maximum: 9 },
                                        b: { type: "integer", minimum: 0, maximum: 9 } } } } },
  { type: "function", function: { name: "lookup", strict: true, parameters: { type: "object",
    additionalProperties: false, required: ["key"], properties: { key: { enum: ["alpha", "beta"] } } } } }];
const validArgs = Object.fromEntries(strictTools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
for (const [choice, seed] of [["required", 6], [{ type: "function", function: { name: "lookup" } }, 7]]) {
  const r = await client.chat.completions.create({ ...structured, seed, tools: strictTools, tool_choice: choice });
  const c = r.choices[0];
  const call = c.message.tool_calls && c.message.tool_calls[0];
  let args;
  try { args = JSON.parse(call.function.arguments); } catch (e) { args = e.message; }
  check(c.finish_reason === "tool_calls" && call && validArgs[call.function.name] &&
        validArgs[call.function.name](args) && (choice === "required" || call.function.name === "lookup"),
        `strict tools, tool_choice ${JSON.stringify(choice)}: a call with valid arguments`, c.message);
}
// A schema keyword the engine cannot honour: refused by name, never ignored.
try {
  await client.chat.completions.create({ ...structured, response_format: { type: "json_schema", json_schema: {
    name: "x", schema: { type: "object", properties: { n: { type: "number", multipleOf: 3 } } } } } });
  check(false, "json_schema: an unsupported keyword is refused");
} catch (e) {
  check(e.status === 400 && /multipleOf/.test(e.error.message) &&
        e.error.param === "response_format.json_schema.schema",
        "json_schema: an unsupported keyword is a 400 naming it", { status: e.status, error: e.error });
}

// 8 clients at once get what each gets alone (greedy; batching changes nothing).
const prompts = Array.from({ length: 8 }, (_, i) => `Prompt number ${i}: tell me about ${["cats", "dogs", "rain", "tea"][i % 4]}`);
const alone = [];
for (const p of prompts) alone.push((await client.completions.create({ ...greedy, prompt: p })).choices[0].text);
const together = await Promise.all(prompts.map((p) => client.completions.create({ ...greedy, prompt: p })));
check(together.every((r, i) => r.choices[0].text === alone[i]), "8 concurrent clients: the texts of 8 alone",
      together.map((r, i) => [r.choices[0].text, alone[i]]).filter(([a, b]) => a !== b));

// A client that goes away mid-stream: the server goes on serving.
const abort = new AbortController();
const gone = await client.completions.create({ model: modelId, prompt: "Once upon a time", max_tokens: 400,
                                               stream: true }, { signal: abort.signal });
try {
  for await (const chunk of gone) { abort.abort(); }
} catch (e) { /* aborted, as meant */ }
const after = await client.completions.create({ ...greedy, prompt: "Still there?", max_tokens: 4 });
check(after.choices[0].text !== undefined, "disconnect: the next request is served");

// A wrong key.
const stranger = new OpenAI({ baseURL: base + "/v1", apiKey: "wrong", maxRetries: 0 });
try {
  await stranger.models.list();
  check(false, "auth: a wrong key is refused");
} catch (e) {
  check(e.status === 401 && e.error && e.error.type === "authentication_error", "auth: a wrong key gets 401",
        { status: e.status, error: e.error });
}
console.log("all checks passed");
