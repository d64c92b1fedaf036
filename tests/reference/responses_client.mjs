// The Responses API as OpenAI's official client (the `openai` npm package)
// sees it: multi-turn with previous_response_id (the second turn's prompt
// taken from the prefix cache), concurrent follow-ups to one response, a
// function tool round trip through function_call_output (stateful, and
// stateless with the reasoning and call items sent back, also as Codex does:
// the reasoning as encrypted_content alone), the stream helper's
// events in order, text.format json_schema judged by ajv, GET, DELETE,
// input_items, and 404s naming the id.
//   node responses_client.mjs BASE_URL API_KEY MODEL_ID
// Prints one line per check; exits 1 on the first failure, with what differed.
import Ajv from "ajv";
import { check, client, modelId } from "./client_check.mjs";

async function refused(promise, status, what, test) {
  try {
    await promise;
    check(false, what);
  } catch (e) {
    check(e.status === status && e.error && test(e.error), what, { status: e.status, error: e.error });
  }
}

// Greedy: the same request gives the same tokens whenever it runs.
const greedy = { model: modelId, temperature: 0, max_output_tokens: 24 };
const cached = (r) => r.usage.input_tokens_details.cached_tokens;

// Two turns: the second's prompt begins with the first's ids.
const first = await client.responses.create({ ...greedy, instructions: "Be brief.", input: "Say hello." });
check(first.object === "response" && first.id.startsWith("resp_") && first.output.length > 0,
      "create: a response with output items", first);
check(first.usage.input_tokens > 0 && first.usage.output_tokens > 0 &&
      first.usage.total_tokens === first.usage.input_tokens + first.usage.output_tokens, "create: usage adds up",
      first.usage);
const second = await client.responses.create({ ...greedy, instructions: "Be brief.", input: "And again.",
                                               previous_response_id: first.id });
// The first turn's prompt and all of its output (a message: nothing that
// harmony drops from a later prompt), then the new input.
check(first.output.every((item) => item.type === "message"), "the first turn's output is a message", first.output);
check(second.previous_response_id === first.id &&
      second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens,
      "previous_response_id: the second turn's prompt holds the first's prompt and output", second.usage);
check(cached(second) > 0, "previous_response_id: the second turn's prompt came from the prefix cache", second.usage);

// Two follow-ups to the same response at once: both answered from the same prefix.
const both = await Promise.all([0, 1].map((i) => client.responses.create({
  ...greedy, instructions: "Be brief.", input: `Follow-up ${i}.`, previous_response_id: first.id })));
check(both.every((r) => r.status !== "failed" && cached(r) > 0), "two concurrent follow-ups: both served from the cache",
      both.map((r) => r.usage));

// A function tool round trip: a strict tool, a forced call, its output fed back.
const ajv = new Ajv({ strict: false });
const weather = { type: "object", additionalProperties: false, required: ["city"],
                  properties: { city: { enum: ["Paris", "Rome"] } } };
const tools = [{ type: "function", name: "get_weather", description: "Weather in a city.", strict: true,
                 parameters: weather }];
const tooled = { model: modelId, temperature: 0, max_output_tokens: 160, reasoning: { effort: "low" }, tools };
const asked = await client.responses.create({ ...tooled, input: "Weather in Paris?", tool_choice: "required" });
const call = asked.output.find((i) => i.type === "function_call");
let args;
try { args = JSON.parse(call.arguments); } catch (e) { args = e.message; }
check(call && call.name === "get_weather" && call.call_id && ajv.validate(weather, args),
      "tools: a function_call item with valid arguments", asked.output);
const answered = await client.responses.create({ ...tooled, previous_response_id: asked.id,
  input: [{ type: "function_call_output", call_id: call.call_id, output: '{"sunny": true}' }] });
check(answered.status !== "failed" && cached(answered) > 0,
      "tools: function_call_output after previous_response_id is served from the cache", answered.usage);
const stateless = await client.responses.create({ ...tooled, input: [
  { role: "user", content: "Weather in Paris?" }, ...asked.output,
  { type: "function_call_output", call_id: call.call_id, output: '{"sunny": true}' }] });
check(stateless.status !== "failed", "tools: the same round trip stateless, reasoning and call items sent back");
// Codex's way: nothing stored, the reasoning carried as encrypted_content and
// sent back with no text of its own; the prompt is the one its text makes.
const sealedAsk = await client.responses.create({ ...tooled, input: "Weather in Paris?", tool_choice: "required",
                                                 store: false, include: ["reasoning.encrypted_content"] });
const sealed = sealedAsk.output.filter((i) => i.type === "reasoning");
check(sealed.length > 0 && sealed.every((i) => typeof i.encrypted_content === "string" && i.encrypted_content),
      "include reasoning.encrypted_content: each reasoning item carries it", sealedAsk.output);
const sealedCall = sealedAsk.output.find((i) => i.type === "function_call");
const sentBack = (items) => client.responses.create({ ...tooled, max_output_tokens: 8, store: false, input: [
  { role: "user", content: "Weather in Paris?" }, ...items,
  { type: "function_call_output", call_id: sealedCall.call_id, output: '{"sunny": true}' }] });
const [withText, blobOnly, noReasoning] = await Promise.all([
  sentBack(sealedAsk.output),
  sentBack(sealedAsk.output.map((i) => i.type !== "reasoning" ? i
    : { type: "reasoning", id: i.id, summary: [], encrypted_content: i.encrypted_content })),
  sentBack(sealedAsk.output.filter((i) => i.type !== "reasoning"))]);
check(blobOnly.usage.input_tokens === withText.usage.input_tokens &&
      noReasoning.usage.input_tokens < withText.usage.input_tokens,
      "encrypted_content sent back alone: the same prompt as the reasoning's text",
      [withText.usage, blobOnly.usage, noReasoning.usage]);
await refused(client.responses.create({ ...greedy, input: [
  { type: "reasoning", summary: [], encrypted_content: "gAAAA-not-ours" }] }), 400,
  "encrypted_content not made by tps is a 400 naming it", (e) => e.param === "input[0].encrypted_content");
await refused(client.responses.create({ ...greedy, input: [
  { type: "function_call_output", call_id: "call_nobody", output: "1" }] }), 400,
  "tools: an output for a call never made is a 400", (e) => /call_nobody/.test(e.message));

// The stream helper: the spec's events in order, numbered, and the same response as GET.
const stream = client.responses.stream({ ...tooled, input: "Weather in Rome?", tool_choice: "required" });
const events = [];
stream.on("event", (e) => events.push(e));
const streamed = await stream.finalResponse();
const types = events.map((e) => e.type);
const open = new Set();
let ordered = types[0] === "response.created" && types[1] === "response.in_progress" &&
              ["response.completed", "response.incomplete"].includes(types.at(-1));
events.forEach((e, i) => {
  ordered &&= e.sequence_number === i;
  if (e.type === "response.output_item.added") open.add(e.output_index);
  if (e.type === "response.output_item.done") ordered &&= open.delete(e.output_index);
  if (e.type.endsWith(".delta")) ordered &&= open.has(e.output_index);
});
check(ordered && open.size === 0, "stream: created, in_progress, items opened and closed, completed; numbered",
      types);
check(types.includes("response.reasoning_text.delta") && types.includes("response.function_call_arguments.delta") &&
      types.includes("response.function_call_arguments.done"), "stream: reasoning and argument deltas", types);
// (The helper adds parsed_arguments; the items' ids, types, texts and arguments compare.)
const shape = (r) => JSON.stringify(r.output.map((i) => [i.id, i.type, i.status, i.arguments,
                                                        (i.content || []).map((c) => c.text)]));
const kept = await client.responses.retrieve(streamed.id);
check(shape(kept) === shape(streamed), "stream: GET returns what the stream made", [shape(kept), shape(streamed)]);

// text.format json_schema: the answer is valid JSON for it (ajv judges).
const form = { type: "object", additionalProperties: false, required: ["ok", "n", "color"],
               properties: { ok: { type: "boolean" }, n: { type: "integer", minimum: 0, maximum: 99 },
                             color: { enum: ["red", "green", "blue"] } } };
const structured = await client.responses.create({ model: modelId, temperature: 0, max_output_tokens: 160,
  reasoning: { effort: "low" }, input: "Fill the form.",
  text: { format: { type: "json_schema", name: "form", strict: true, schema: form } } });
let parsed;
try { parsed = JSON.parse(structured.output_text); } catch (e) { parsed = e.message; }
check(structured.status === "completed" && ajv.validate(form, parsed), "text.format json_schema: valid JSON",
      { status: structured.status, text: structured.output_text, errors: ajv.errors });

// GET, input_items, DELETE; 404s name the id.
const got = await client.responses.retrieve(first.id);
check(got.id === first.id && shape(got) === shape(first), "GET: the stored response");
const items = await client.responses.inputItems.list(second.id);
check(items.data.length === 1 && items.data[0].content[0].text === "And again.", "input_items: the turn's input",
      items.data);
await client.responses.delete(first.id);
await refused(client.responses.retrieve(first.id), 404, "DELETE: then GET is a 404 naming the id",
              (e) => e.message.includes(first.id));
await refused(client.responses.create({ ...greedy, input: "x", previous_response_id: first.id }), 404,
              "a deleted previous_response_id is a 404 naming it",
              (e) => e.param === "previous_response_id" && e.message.includes(first.id));
await refused(client.responses.create({ ...greedy, input: "x", previous_response_id: "resp_unknown" }), 404,
              "an unknown previous_response_id is a 404 naming it", (e) => e.message.includes("resp_unknown"));
const unstored = await client.responses.create({ ...greedy, input: "x", store: false });
await refused(client.responses.retrieve(unstored.id), 404, "store: false is not stored", () => true);
// The second turn outlives the first's deletion: its own ids are kept.
const third = await client.responses.create({ ...greedy, input: "Once more.", previous_response_id: second.id });
check(third.status !== "failed" && cached(third) > 0, "a follow-up to a turn whose predecessor was deleted",
      third.usage);
console.log("all checks passed");
