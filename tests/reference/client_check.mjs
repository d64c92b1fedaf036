// What the official-client checks (openai_client.mjs, responses_client.mjs)
// share: their arguments, the client, and the check that prints one line and
// exits 1 on the first failure.
//   node SCRIPT.mjs BASE_URL API_KEY MODEL_ID
import OpenAI from "openai";

export const [base, key, modelId] = process.argv.slice(2);
export const client = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0, timeout: 120000 });

export function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}
