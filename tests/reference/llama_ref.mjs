// Drives llama.cpp (the prebuilt CPU build inside the npm package
// node-llama-cpp) as a reference engine for tps.
//
//   node llama_ref.mjs check MODEL.gguf
//     Loads the file, checks llama.cpp sees a gpt-oss model, tokenizes a
//     string and evaluates a few tokens; prints a JSON summary to stdout.
//     Exit 0 on success; on failure one line "llama_ref: ..." on stderr, exit 1.
//
//   node llama_ref.mjs score MODEL.gguf IDS_FILE [TOP_K] [THREADS]
//     Teacher forcing: feeds the ids (white-space separated) and prints, for
//     every position i, the log-probability of ids[i + 1] and the TOP_K most
//     likely next tokens with their log-probabilities (natural log, over the
//     whole vocabulary, from llama.cpp's raw logits), as JSON -- the same
//     shape as `tpsrun score --json`. llama.cpp's defaults otherwise (flash
//     attention auto, F16 KV cache); TPS_LLAMA_FLASH_ATTENTION=off turns
//     flash attention off, to see how far llama.cpp moves on its own.
//
//   node llama_ref.mjs bench MODEL.gguf PROMPT_FILE THREADS GEN_TOKENS
//     Prefill tokens/s over the prompt (its text, tokenized by llama.cpp) and
//     greedy decode tokens/s over GEN_TOKENS, as JSON, with the CPU model.
import { readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function fail(message) {
  process.stderr.write(`llama_ref: ${message}\n`);
  process.exit(1);
}

async function check(modelPath) {
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  let model;
  try {
    model = await llama.loadModel({ modelPath });
  } catch (e) {
    fail(`llama.cpp cannot load ${modelPath}: ${e.message}`);
  }
  const meta = model.fileInfo.metadata;
  const arch = meta.general?.architecture;
  if (arch !== "gpt-oss") fail(`${modelPath}: llama.cpp sees architecture '${arch}', not gpt-oss`);
  const hp = meta["gpt-oss"];
  const ids = Array.from(model.tokenize("Hello, world!"));
  const context = await model.createContext({ contextSize: 256, threads: 1 });
  const sequence = context.getSequence();
  const generated = [];
  for await (const token of sequence.evaluate(ids, { temperature: 0 })) {
    generated.push(token);
    if (generated.length >= 4) break;
  }
  const summary = {
    loaded: true,
    architecture: arch,
    block_count: hp.block_count,
    expert_count: hp.expert_count,
    embedding_length: hp.embedding_length,
    n_vocab: model.fileInsights?.vocabularySize ?? meta.tokenizer?.ggml?.tokens?.length,
    tokens_of_hello_world: ids,
    greedy_continuation: generated,
  };
  await context.dispose();
  await model.dispose();
  process.stdout.write(JSON.stringify(summary) + "\n");
}

async function score(modelPath, idsPath, topK, threads) {
  const ids = readFileSync(idsPath, "utf8").trim().split(/\s+/).map(Number);
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({ contextSize: Math.max(256, ids.length + 8), threads,
    flashAttention: process.env.TPS_LLAMA_FLASH_ATTENTION === "off" ? false : "auto" });
  const sequence = context.getSequence();
  const t0 = performance.now();
  const results = await sequence.controlledEvaluate(
    ids.map((id) => [id, { generateNext: { logits: true } }]));
  const seconds = (performance.now() - t0) / 1000;
  const positions = [];
  for (let i = 0; i + 1 < ids.length; ++i) {
    const logits = results[i]?.next?.logits;
    if (!logits) fail(`no logits for position ${i}`);
    let max = -Infinity;
    for (const v of logits.values()) max = Math.max(max, v);
    let sum = 0;
    for (const v of logits.values()) sum += Math.exp(v - max);
    const lse = max + Math.log(sum);
    const top = [];
    for (const [id, v] of logits) {  // sorted by logit, highest first
      if (top.length >= topK) break;
      top.push([id, v - lse]);
    }
    positions.push({ pos: i, next: ids[i + 1], next_logprob: (logits.get(ids[i + 1]) ?? -Infinity) - lse, top });
  }
  await context.dispose();
  await model.dispose();
  process.stdout.write(JSON.stringify({ engine: "llama.cpp (node-llama-cpp 3.22.1)", model: modelPath,
    tokens: ids.length, seconds, positions }) + "\n");
}

async function bench(modelPath, promptPath, threads, genTokens) {
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const t0 = performance.now();
  const model = await llama.loadModel({ modelPath });
  const loadSeconds = (performance.now() - t0) / 1000;
  const ids = Array.from(model.tokenize(readFileSync(promptPath, "utf8")));
  const context = await model.createContext({ contextSize: ids.length + genTokens + 16, threads,
    batchSize: 512 });
  const sequence = context.getSequence();
  // Prefill: the prompt, asking for the next token only after the last one.
  const items = ids.map((id, i) => (i + 1 === ids.length ? [id, { generateNext: { token: true } }] : id));
  const t1 = performance.now();
  const out = await sequence.controlledEvaluate(items);
  const prefillSeconds = (performance.now() - t1) / 1000;
  let next = out[ids.length - 1].next.token;
  // Decode: one token at a time, greedy.
  const t2 = performance.now();
  for (let i = 0; i < genTokens; ++i) {
    const r = await sequence.controlledEvaluate([[next, { generateNext: { token: true } }]]);
    next = r[0].next.token;
  }
  const decodeSeconds = (performance.now() - t2) / 1000;
  const cpu = readFileSync("/proc/cpuinfo", "utf8").match(/model name\s*:\s*(.*)/)?.[1];
  process.stdout.write(JSON.stringify({ engine: "llama.cpp (node-llama-cpp 3.22.1)", cpu, threads,
    load_seconds: loadSeconds, prompt_tokens: ids.length,
    prefill_tokens_per_s: ids.length / prefillSeconds,
    generated_tokens: genTokens, decode_tokens_per_s: genTokens / decodeSeconds }) + "\n");
  await context.dispose();
  await model.dispose();
}

const [command, ...args] = process.argv.slice(2);
try {
  if (command === "check" && args.length === 1) await check(args[0]);
  else if (command === "score" && args.length >= 2)
    await score(args[0], args[1], Number(args[2] ?? 5), Number(args[3] ?? 1));
  else if (command === "bench" && args.length === 4)
    await bench(args[0], args[1], Number(args[2]), Number(args[3]));
  else fail("usage: node llama_ref.mjs check MODEL.gguf | score MODEL.gguf IDS_FILE [TOP_K] " +
            "[THREADS] | bench MODEL.gguf PROMPT_FILE THREADS GEN_TOKENS");
} catch (e) {
  fail(e.message);
}
