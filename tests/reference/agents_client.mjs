// OpenAI's Agents SDK (the `@openai/agents` npm package) against tps over
// the Responses API: an agent with a strict function tool, its call forced
// (toolChoice 'required') within a 600-token budget, the reasoning before
// the call included. The run must complete: the tool ran with arguments
// valid for its parameters, and no response ended incomplete (the SDK
// fails a run on "response.incomplete"). The SDK then sends the tool's
// output back with tool_choice reset to auto, and the server's --grammar
// holds the final answer, so the random model's turn ends.
//   node agents_client.mjs BASE_URL MODEL_ID
// Prints one line per check; exits 1 on the first failure, with what differed.
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";

const [base, modelId] = process.argv.slice(2);

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}

setDefaultOpenAIClient(new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 300000 }));
setOpenAIAPI("responses");
setTracingDisabled(true);  // loopback only: no traces uploaded

const calls = [];
const weather = tool({
  name: "get_weather",
  description: "The weather in a city.",
  strict: true,
  parameters: { type: "object", additionalProperties: false, required: ["city"],
                properties: { city: { type: "string", enum: ["Paris", "Rome", "Oslo"] } } },
  execute: async (input) => {
    calls.push(input);
    return `Sunny in ${input.city}.`;
  },
});
const agent = new Agent({
  name: "Weather",
  instructions: "Answer with the weather tool.",
  model: modelId,
  tools: [weather],
  modelSettings: { toolChoice: "required", maxTokens: 600 },
});

let result;
try {
  result = await run(agent, "What is the weather in Paris?", { maxTurns: 6 });
} catch (e) {
  check(false, "the run completes", String(e?.stack ?? e));
}
check(calls.length >= 1 && ["Paris", "Rome", "Oslo"].includes(calls[0].city),
      "the strict tool ran with arguments valid for its parameters", calls);
const items = result.newItems.map((i) => i.type);
check(items.includes("tool_call_item") && items.includes("tool_call_output_item"),
      "the run's items hold the call and its output", items);
check(typeof result.finalOutput === "string" && result.finalOutput.length > 0, "the run has a final output",
      result.finalOutput);
const usage = result.state.usage;
check(result.rawResponses.every((r) => r.usage.outputTokens <= 600),
      `each response within maxTokens (${result.rawResponses.map((r) => r.usage.outputTokens).join(", ")} tokens)`);
console.log(`ok: ${result.rawResponses.length} responses, ${usage.inputTokens} input and ${usage.outputTokens} output tokens`);
