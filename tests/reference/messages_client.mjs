// The Messages API as Anthropic's official client (the `@anthropic-ai/sdk`
// npm package) sees it: create; the stream helper's events in Anthropic's
// order; a forced tool_use (tool_choice {type: "tool"}) whose input ajv
// validates against the tool's input_schema, its thinking and call sent back
// with a tool_result (the follow-up's prompt taken from the prefix cache);
// countTokens; auth by x-api-key (the SDK's default) and by Bearer (an auth
// token), a wrong key refused with authentication_error; a bad field refused
// with invalid_request_error naming it. The model is random: checks are of
// shapes, orders and constraints, never of what the text says.
//   node messages_client.mjs BASE_URL API_KEY MODEL_ID
// Prints one line per check; exits 1 on the first failure, with what differed.
import Anthropic from "@anthropic-ai/sdk";
import Ajv from "ajv";

const [base, key, modelId] = process.argv.slice(2);
const options = { baseURL: base, maxRetries: 0, timeout: 120000 };
const client = new Anthropic({ ...options, apiKey: key });

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}

async function refused(promise, status, type, what, test = () => true) {
  try {
    await promise;
    check(false, what);
  } catch (e) {
    const body = e.error;  // the SDK's: the error body as sent
    check(e.status === status && body?.type === "error" && body.error?.type === type && test(body.error), what,
          { status: e.status, body });
  }
}

const user = (text) => ({ role: "user", content: text });
const greedy = { model: modelId, temperature: 0 };

// create: Anthropic's message object.
const made = await client.messages.create({ ...greedy, max_tokens: 16, system: "Be brief.",
                                            messages: [user("Say hello.")] });
check(made.type === "message" && made.role === "assistant" && made.id.startsWith("msg_") && made.model === modelId,
      "create: a message", made);
check(Array.isArray(made.content) && made.content.every((b) => ["text", "thinking", "tool_use"].includes(b.type)),
      "create: content blocks", made.content);
check(["end_turn", "max_tokens"].includes(made.stop_reason) && made.stop_sequence === null,
      "create: stop_reason end_turn or max_tokens", made.stop_reason);
const u = made.usage;
check(u.input_tokens + u.cache_read_input_tokens > 0 && u.output_tokens > 0 && u.cache_creation_input_tokens === 0,
      "create: usage", u);

// The stream: message_start, each block's start / deltas / stop, message_delta, message_stop.
const stream = client.messages.stream({ ...greedy, max_tokens: 24, messages: [user("Count to three.")] });
const events = [];
for await (const e of stream) events.push(e);
const final = await stream.finalMessage();
const types = events.map((e) => e.type);
check(types[0] === "message_start" && types.at(-2) === "message_delta" && types.at(-1) === "message_stop",
      "stream: message_start first, message_delta and message_stop last", types);
let open = -1, next = 0, order = true;
for (const e of events.slice(1, -2)) {
  if (e.type === "content_block_start") order &&= open === -1 && e.index === next, open = next++;
  else if (e.type === "content_block_delta") order &&= e.index === open;
  else if (e.type === "content_block_stop") order &&= e.index === open, open = -1;
  else order &&= e.type === "ping";
}
check(order && open === -1, "stream: each block started, its deltas, stopped, one at a time", types);
check(events.at(-2).delta.stop_reason === final.stop_reason && final.usage.output_tokens > 0 &&
      final.content.length === types.filter((t) => t === "content_block_start").length,
      "stream: the final message the helper built", final);

// A forced call, held to its input_schema; its thinking shown with a signature.
const weather = { type: "object", additionalProperties: false, required: ["city"],
                  properties: { city: { enum: ["Paris", "Rome"] } } };
const tools = [{ name: "get_weather", description: "Weather in a city.", input_schema: weather }];
const ask = [user("Weather in Paris?")];
const forced = { ...greedy, max_tokens: 160, tools, thinking: { type: "enabled", budget_tokens: 32 } };
const call = await client.messages.create({ ...forced, tool_choice: { type: "tool", name: "get_weather" },
                                            messages: ask });
const use = call.content.find((b) => b.type === "tool_use");
check(call.stop_reason === "tool_use" && use && use.name === "get_weather" && use.id.startsWith("toolu_"),
      "tool_choice tool: a tool_use block", call);
const ajv = new Ajv({ strict: false });
check(ajv.validate(weather, use.input), "tool_use: its input valid for input_schema (ajv)", use.input);
check(call.content.filter((b) => b.type === "thinking").every((b) => typeof b.signature === "string" &&
      b.signature.length > 0), "thinking: each block signed", call.content);

// countTokens: the same prompt the call's usage counted.
const counted = await client.messages.countTokens({ model: modelId, tools, messages: ask,
                                                    thinking: forced.thinking, tool_choice: { type: "auto" } });
check(counted.input_tokens === call.usage.input_tokens + call.usage.cache_read_input_tokens,
      "countTokens: the prompt's tokens", { counted, usage: call.usage });

// The tool_result follow-up, the whole conversation sent back: its prompt
// begins with the call's prompt and output, from the prefix cache.
const follow = await client.messages.create({ ...forced, max_tokens: 40, messages: [
  ...ask, { role: "assistant", content: call.content },
  { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "Sunny, 21 C." }] }] });
const fu = follow.usage;
check(follow.type === "message" && fu.cache_read_input_tokens > 0, "tool_result follow-up: served from the cache", fu);
// The engine keeps the sliding-window layers' KV of prompts, not of what was
// generated: the reuse reaches the call's prompt (its whole 16-token blocks).
const inputOf = (usage) => usage.input_tokens + usage.cache_read_input_tokens;
check(fu.cache_read_input_tokens > fu.input_tokens && fu.cache_read_input_tokens >= inputOf(call.usage) - 15,
      `tool_result follow-up: ${fu.cache_read_input_tokens} of its ${inputOf(fu)} input tokens from the cache ` +
      `(the call's prompt: ${inputOf(call.usage)})`, { call: call.usage, follow: fu });
// A third turn, the conversation sent back again: all of the follow-up's prompt from the cache.
const third = await client.messages.create({ ...forced, max_tokens: 40, messages: [
  ...ask, { role: "assistant", content: call.content },
  { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "Sunny, 21 C." }] },
  { role: "assistant", content: follow.content.length ? follow.content : "..." }, user("Thanks.")] });
check(third.usage.cache_read_input_tokens >= inputOf(fu) - 15,
      `third turn: ${third.usage.cache_read_input_tokens} of its ${inputOf(third.usage)} input tokens from the ` +
      `cache (the follow-up's prompt: ${inputOf(fu)})`, { follow: fu, third: third.usage });

// Auth: the SDK's x-api-key above; an auth token as Bearer; a wrong key.
const bearer = new Anthropic({ ...options, apiKey: null, authToken: key });
check((await bearer.messages.countTokens({ model: modelId, messages: ask })).input_tokens > 0,
      "auth: Authorization: Bearer (an auth token) is accepted too");
const wrong = new Anthropic({ ...options, apiKey: "wrong-key" });
await refused(wrong.messages.create({ ...greedy, max_tokens: 4, messages: ask }), 401, "authentication_error",
              "auth: a wrong x-api-key refused with authentication_error");

// A field out of range: invalid_request_error naming it.
await refused(client.messages.create({ ...greedy, max_tokens: 4, top_k: -1, messages: ask }), 400,
              "invalid_request_error", "a bad top_k: invalid_request_error naming it",
              (e) => e.message.includes("top_k"));
await refused(client.messages.create({ model: "claude-sonnet-4-5", max_tokens: 4, messages: ask }), 404,
              "not_found_error", "another model: not_found_error");
