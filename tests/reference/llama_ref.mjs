#!/usr/bin/env node
// llama_ref.mjs -- llama.cpp as a reference engine for tps.
//
// Runs the prebuilt CPU llama.cpp that ships inside the npm package
// node-llama-cpp (pinned in package.json next to this file; nothing is built
// and no GPU is used) and prints JSON on stdout. llama.cpp's own log goes to
// stderr only with --verbose; otherwise its warnings go into check's JSON and
// its errors into the failure message. On any failure -- a file llama.cpp
// refuses, or llama.cpp aborting the process on a failed assertion -- one
// line "llama_ref: <what failed>" on stderr and exit status 1 (the work runs
// in a child process so that even an abort ends that way).
//
//   node llama_ref.mjs check MODEL.gguf [--threads N] [--verbose]
//     Loads the file, checks llama.cpp sees a gpt-oss model, tokenizes two
//     strings with llama.cpp's tokenizer, evaluates "Hello, world!" and
//     prints the top-5 next tokens, the file's hyperparameters as llama.cpp
//     reads them and llama.cpp's warnings about the file.
//
//   node llama_ref.mjs score MODEL.gguf --ids FILE [--top K] [--threads N]
//        [--ctx N] [--batch N] [--flash-attn auto|on|off] [--kv-type T]
//        [--check-probs | --fast] [--no-mmap] [--verbose]
//     Teacher forcing. FILE holds token ids separated by white space. All of
//     them go to llama.cpp in one evaluation (split into --batch sized
//     batches), asking for the logits at every position. For each position i
//     in 0..n-2 (the distribution of token i+1 given tokens 0..i) it prints
//     {"pos": i, "next": ids[i+1], "next_logprob": log p(ids[i+1]),
//      "top": [[id, logprob], ...K entries, most likely first]}.
//     Log-probs are natural-log softmax over the whole vocabulary, computed
//     here in double precision from llama.cpp's raw float32 logits; ties are
//     broken by the lower id. --check-probs also asks node-llama-cpp for its
//     own (float32) probabilities and reports the largest |difference| from
//     our top-K log-probs. --fast fetches only the top-K logits and
//     llama.cpp's float32 normalizer: ~6x quicker, log-probs off by up to
//     ~4e-4 nats. The output has the shape of `tpsrun score --json`.
//
//   node llama_ref.mjs bench MODEL.gguf --threads N --prompt-tokens P
//        --gen-tokens G [--prompt-ids FILE] [--repetitions R] [--batch N]
//        [--flash-attn auto|on|off] [--no-warmup] [--no-mmap]
//     Prefill tokens/s over a P-token prompt of fixed ids (or the ids in
//     --prompt-ids FILE) and decode tokens/s over G greedy tokens, as JSON
//     with the node-llama-cpp version, llama.cpp's release and the CPU model.
//     Prefill time runs from handing over the prompt to having the first
//     token (so it is also the time to first token); decode is G single-token
//     evaluations after that, each feeding back the greedy token. Defaults:
//     P 128, G 32, one repetition (medians reported when more), one warm-up
//     token first. node-llama-cpp adds ~3 ms per decode call (the tiny model
//     decodes at ~300 tokens/s), which is noise at real model sizes.
//
//   node llama_ref.mjs sweep MODEL.gguf --threads N --ctx C --chunk B
//        --gen-tokens G [--batch N] [--flash-attn M] [--kv-type T]
//     Speed against the KV cache's depth, as `tpsrun sweep` and llama.cpp's
//     llama-sweep-bench measure it, in one context of C positions: at each
//     depth (0, then after every chunk) G single-token evaluations of fixed
//     ids (decode at that depth), then the next chunk of B fixed ids
//     (prefill at that depth), until the next round would not fit. One JSON
//     object, its "rows" in `tpsrun sweep --json`'s fields (n_kv, pp_tokens,
//     pp_seconds, pp_tokens_per_s, tg_tokens, ...). Defaults: C 4096, B 512,
//     G 16.
//
// Positional forms kept for existing callers (tests/llama_parity_test.cpp,
// tests/CMakeLists.txt, bench/e2e):
//   score MODEL.gguf IDS_FILE [TOP_K] [THREADS]
//   bench MODEL.gguf PROMPT_TEXT_FILE THREADS GEN_TOKENS  (text tokenized by llama.cpp)
//
// Defaults and what the options mean (they are llama.cpp context settings):
//   --threads N       1. llama.cpp's n_threads and n_threads_batch. Passed
//                     exactly (node-llama-cpp's own cap on threads is lifted).
//                     Results do not depend on it (1 and 2 threads: identical).
//   --ctx N           score: max(256, number of ids); check: 256; bench:
//                     P + G + 16. llama.cpp may round it up to a multiple of 256.
//                     It never changes results as long as every token fits
//                     (no context shift happens; we refuse if they do not fit).
//   --batch N         512, or the context size if smaller. node-llama-cpp
//                     sets llama.cpp's n_batch and n_ubatch both to it, so
//                     it is how many tokens one forward pass (graph) holds.
//                     Measured: with flash attention on, results depend on it
//                     (on tiny, 64 ids scored with batch <= 32 vs >= 64 differ
//                     by a median 0.009, at most 0.05 nats -- llama.cpp's CPU
//                     flash-attention kernel works differently on more rows);
//                     with flash attention off, batch size changes nothing.
//   --flash-attn M    auto (llama.cpp's default; on the CPU backend it turns
//                     flash attention on for gpt-oss). on/off force it. The
//                     environment variable TPS_LLAMA_FLASH_ATTENTION=off|on
//                     does the same when the flag is absent (older callers).
//   --kv-type T       f16 (llama.cpp's default), or f32/q8_0 etc.: the KV
//                     cache element type (node-llama-cpp marks the option
//                     experimental). Measured: with flash attention on, f32
//                     gives exactly the f16 results (the kernel works in f16
//                     either way); with it off, f32 removes a rounding.
//                     "--flash-attn off --kv-type f32" is llama.cpp's most
//                     exact setting: tps (tpsrun score --yarn-truncate, 2026-11-22)
//                     matched it to 1.2e-6 nats on the tiny preset and to a
//                     median 9e-7 on small (one position 0.02: a Q8_0 rounding
//                     flip), against a median 0.036 with llama.cpp's defaults.
//   --no-mmap         read the file into memory instead of mapping it.
//   seeds             irrelevant: score reads logits before any sampling, and
//                     bench decodes greedily (temperature 0).
// Things node-llama-cpp does not expose and therefore stay llama.cpp's
// defaults: weight repacking (the CPU backend repacks MXFP4/Q8_0 weights into
// its CPU_REPACK or, on CPUs with AMX, AMX buffers at load), NUMA policy,
// activation quantization (matmul inputs are rounded to Q8_0 on the CPU).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const NLC_VERSION = (() => {
  try {
    const url = new URL("./node_modules/node-llama-cpp/package.json", import.meta.url);
    return JSON.parse(readFileSync(url, "utf8")).version;
  } catch {
    return "unknown";
  }
})();
const ENGINE = `llama.cpp via node-llama-cpp ${NLC_VERSION}`;

function fail(message) {
  process.stderr.write(`llama_ref: ${String(message).replace(/\s*\n\s*/g, " | ")}\n`);
  process.exit(1);
}

// ---------------------------------------------------------------- llama.cpp

// llama.cpp's log lines, kept so that warnings can go into `check`'s JSON and
// errors into the failure message (node-llama-cpp's own error for a file
// llama.cpp refuses is just "Failed to load model"; the reason is in the log).
const logLines = { warn: [], error: [], flashAttention: [] };

async function openLlama(verbose) {
  return getLlama({
    gpu: false,
    build: "never",        // prebuilt binaries only; never compile llama.cpp
    maxThreads: 0,         // no cap: --threads N means N
    logLevel: verbose ? LlamaLogLevel.debug : LlamaLogLevel.info,
    logger: (level, message) => {
      const line = message.replace(/\n$/, "");
      // "llama_context: flash_attn = disabled" / "resolve_fused_ops: Flash Attention enabled"
      const fa = line.match(/flash[_ ]attn\s*=\s*(enabled|disabled)|Flash Attention (?:was auto, set to )?(enabled|disabled)/i);
      if (fa) logLines.flashAttention.push((fa[1] ?? fa[2]).toLowerCase());
      if (level === LlamaLogLevel.warn) logLines.warn.push(line);
      if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) logLines.error.push(line);
      // Errors are not printed: they end up in the one-line failure message.
      if (verbose) process.stderr.write(`[llama.cpp ${level}] ${line}\n`);
    },
  });
}

async function loadModel(llama, modelPath, { mmap = true, flashAttn = "auto" } = {}) {
  try {
    return await llama.loadModel({
      modelPath,
      gpuLayers: 0,
      useMmap: mmap,
      defaultContextFlashAttention: flashAttn,
    });
  } catch (e) {
    // node-llama-cpp opens the file twice (a dry run to size memory, then the
    // real load), so llama.cpp's errors come twice.
    const errors = [...new Set(logLines.error)];
    throw new Error(`llama.cpp cannot load ${modelPath}: ${e.message}${errors.length ? ": " + errors.join(" | ") : ""}`);
  }
}

function flashAttnOption(value) {
  const v = value ?? process.env.TPS_LLAMA_FLASH_ATTENTION ?? "auto";
  if (v === "auto") return "auto";
  if (v === "on" || v === "true" || v === "1") return true;
  if (v === "off" || v === "false" || v === "0") return false;
  fail(`--flash-attn must be auto, on or off, not '${v}'`);
}

async function createContext(model, { contextSize, batchSize, threads, flashAttn, kvType }) {
  const options = {
    contextSize,
    threads: { ideal: threads, min: threads },
    flashAttention: flashAttn,
    ignoreMemorySafetyChecks: true,  // node-llama-cpp's estimates are for GPUs
  };
  if (batchSize) options.batchSize = batchSize;
  if (kvType) {
    options.experimentalKvCacheKeyType = kvType.toUpperCase();
    options.experimentalKvCacheValueType = kvType.toUpperCase();
  }
  try {
    return await model.createContext(options);
  } catch (e) {
    throw new Error(`llama.cpp cannot create a context: ${e.message} ${logLines.error.join(" | ")}`);
  }
}

// The settings a run used. node-llama-cpp only knows the flash-attention
// setting asked for; llama.cpp resolves "auto" itself and says what it chose
// in its log ("... Flash Attention enabled"), which is reported alongside.
function settingsOf(context, requestedFlashAttn, kvType) {
  const said = logLines.flashAttention.at(-1);
  return {
    threads: context.idealThreads,
    context_size: context.contextSize,
    batch_size: context.batchSize,
    flash_attention: requestedFlashAttn === "auto" ? "auto" : requestedFlashAttn ? "on" : "off",
    flash_attention_llama_cpp_says: said ?? null,
    kv_cache_type: kvType ?? "f16",
  };
}

// ---------------------------------------------------------------- logprobs

// Log-softmax (natural log, double precision) of one position's logits, an
// iterable of [id, logit] over the whole vocabulary. Returns the top-K
// [id, logprob] pairs (highest first, ties to the lower id), the log-prob of
// `wanted` (null when not asked) and the vocabulary size seen.
function logSoftmaxTop(logits, k, wanted) {
  let max = -Infinity, n = 0;
  for (const [, v] of logits) { if (v > max) max = v; ++n; }
  let sum = 0;
  const top = [];  // kept sorted, at most k long
  let wantedLogit = -Infinity;
  for (const [id, v] of logits) {
    sum += Math.exp(v - max);
    if (id === wanted) wantedLogit = v;
    if (top.length < k || v > top[top.length - 1][1] ||
        (v === top[top.length - 1][1] && id < top[top.length - 1][0])) {
      let j = top.length;
      while (j > 0 && (top[j - 1][1] < v || (top[j - 1][1] === v && top[j - 1][0] > id))) --j;
      top.splice(j, 0, [id, v]);
      if (top.length > k) top.pop();
    }
  }
  const lse = max + Math.log(sum);
  return {
    top: top.map(([id, v]) => [id, v - lse]),
    wantedLogprob: wanted == null ? null : wantedLogit - lse,
    nVocab: n,
  };
}

// Teacher-forced evaluation: every id goes into the sequence in one
// controlledEvaluate call (node-llama-cpp splits it into batches of the
// context's batch size and keeps the KV cache between them); positions in
// `wantPositions` ask for their logits ("generateNext: {logits: true}",
// the raw pre-sampling logits of the whole vocabulary; the sampler chain is
// plain greedy, which changes no logit). Each position's result is reduced as
// soon as it arrives (onTokenResult) and its 201,088-entry map dropped; peak
// memory still grows with the positions of one batch (about 1 GB for 255).
//
// fast: instead ask only for the top-K logits and the wanted token's
// ("logits: {filter: {tokens, includeTop}}") plus llama.cpp's normalizer
// ("totalLogitWeight" = sum of exp(logit - max), summed in float32). About 6x
// quicker, but that float32 sum is off by up to ~4e-4 nats (measured on tiny).
async function teacherForce(sequence, ids, wantPositions, k, { checkProbs = false, fast = false } = {}) {
  const want = new Set(wantPositions);
  const reduced = new Map();
  let worstProbDiff = 0;
  const ask = (i) => {
    const wanted = i + 1 < ids.length ? [ids[i + 1]] : [];
    return fast
      ? { logits: { filter: { tokens: wanted, includeTop: k } }, totalLogitWeight: true, token: true }
      : { logits: true, probabilities: checkProbs, token: true };
  };
  const items = ids.map((id, i) => (want.has(i) ? [id, { generateNext: ask(i) }] : id));
  await sequence.controlledEvaluate(items, {
    onTokenResult(index, output) {
      const next = output.next;
      if (!next?.logits) return;
      const wanted = index + 1 < ids.length ? ids[index + 1] : null;
      let r;
      if (fast) {
        const top = [...next.logits].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, k);
        const lse = top[0][1] + Math.log(next.totalLogitWeight);
        r = {
          top: top.map(([id, v]) => [id, v - lse]),
          wantedLogprob: wanted == null ? null : next.logits.get(wanted) - lse,
          nVocab: null,
        };
      } else {
        r = logSoftmaxTop(next.logits, k, wanted);
      }
      r.greedy = next.token;
      if (checkProbs && next.probabilities) {
        for (const [id, lp] of r.top) {
          const p = next.probabilities.get(id);
          worstProbDiff = Math.max(worstProbDiff, Math.abs(Math.log(p) - lp));
        }
      }
      reduced.set(index, r);
      delete next.logits;
      delete next.probabilities;
    },
  });
  for (const i of want) if (!reduced.has(i)) throw new Error(`llama.cpp returned no logits for position ${i}`);
  return { reduced, worstProbDiff: checkProbs && !fast ? worstProbDiff : null };
}

// ---------------------------------------------------------------- check

async function check(modelPath, opts) {
  const t0 = performance.now();
  const llama = await openLlama(opts.verbose);
  const model = await loadModel(llama, modelPath);
  const loadSeconds = (performance.now() - t0) / 1000;
  const meta = model.fileInfo.metadata;
  const arch = meta.general?.architecture;
  if (arch !== "gpt-oss") throw new Error(`${modelPath}: llama.cpp sees architecture '${arch}', not gpt-oss`);
  const hp = meta[arch] ?? {};

  const strings = ["Hello, world!", "<|start|>user<|message|>Hi<|end|>"];
  const tokensOf = {};
  for (const s of strings) tokensOf[s] = Array.from(model.tokenize(s, true));  // special tokens parsed

  const context = await createContext(model, { contextSize: 256, threads: opts.threads, flashAttn: "auto" });
  const sequence = context.getSequence();
  const ids = tokensOf["Hello, world!"];
  const { reduced, worstProbDiff } = await teacherForce(sequence, ids, [ids.length - 1], 5, { checkProbs: true });
  const last = reduced.get(ids.length - 1);

  const summary = {
    loaded: true,
    architecture: arch,
    engine: ENGINE,
    llama_cpp_release: llama.llamaCppRelease.release,
    name: meta.general?.name,
    type_description: model.typeDescription,
    file_size_bytes: model.fileInsights.modelSize,
    n_params: model.fileInsights.totalParameters,
    block_count: hp.block_count,
    embedding_length: hp.embedding_length,
    feed_forward_length: hp.expert_feed_forward_length ?? hp.feed_forward_length,
    head_count: hp.attention?.head_count,
    head_count_kv: hp.attention?.head_count_kv,
    sliding_window: hp.attention?.sliding_window,
    expert_count: hp.expert_count,
    expert_used_count: hp.expert_used_count,
    context_length: hp.context_length,
    rope_scaling: hp.rope?.scaling?.type,
    n_vocab: last.nVocab,
    n_vocab_metadata: meta.tokenizer?.ggml?.tokens?.length,
    bos: model.tokens.bos, eos: model.tokens.eos, eot: model.tokens.eot,
    flash_attention_supported: model.flashAttentionSupported,
    settings: settingsOf(context, "auto"),
    tokens_of: tokensOf,
    first_logits_top5: last.top,
    first_greedy_token: last.greedy,
    probabilities_vs_logsoftmax_max_abs_diff: worstProbDiff,
    load_seconds: loadSeconds,
    seconds: (performance.now() - t0) / 1000,
    llama_warnings: logLines.warn,
  };
  await context.dispose();
  await model.dispose();
  // Compact JSON on one line: CTest looks for "architecture":"gpt-oss".
  process.stdout.write(JSON.stringify(summary) + "\n");
}

// ---------------------------------------------------------------- score

function readIds(path) {
  const text = readFileSync(path, "utf8").trim();
  const ids = text === "" ? [] : text.split(/\s+/).map((w) => {
    if (!/^\d+$/.test(w)) fail(`${path}: '${w}' is not a token id`);
    return Number(w);
  });
  return ids;
}

async function score(modelPath, opts) {
  const ids = readIds(opts.ids);
  if (ids.length < 2) throw new Error(`${opts.ids}: need at least 2 ids to score, got ${ids.length}`);
  const contextSize = opts.ctx ?? Math.max(256, ids.length);
  if (contextSize < ids.length) throw new Error(`--ctx ${contextSize} is smaller than the ${ids.length} ids`);
  const flashAttn = flashAttnOption(opts.flashAttn);

  const llama = await openLlama(opts.verbose);
  const model = await loadModel(llama, modelPath, { mmap: opts.mmap, flashAttn });
  const nVocab = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length;
  for (const id of ids) if (nVocab && id >= nVocab) throw new Error(`id ${id} is outside the ${nVocab}-token vocabulary`);
  const context = await createContext(model, {
    contextSize, batchSize: opts.batch, threads: opts.threads, flashAttn, kvType: opts.kvType });
  const sequence = context.getSequence();

  const t0 = performance.now();
  const wanted = ids.slice(0, -1).map((_, i) => i);
  const { reduced, worstProbDiff } = await teacherForce(sequence, ids, wanted, opts.top,
    { checkProbs: opts.checkProbs, fast: opts.fast });
  const seconds = (performance.now() - t0) / 1000;

  const positions = wanted.map((i) => {
    const r = reduced.get(i);
    return { pos: i, next: ids[i + 1], next_logprob: r.wantedLogprob, top: r.top };
  });
  const out = {
    engine: ENGINE,
    llama_cpp_release: llama.llamaCppRelease.release,
    model: modelPath,
    tokens: ids.length,
    n_vocab: reduced.get(0).nVocab ?? nVocab,
    settings: { ...settingsOf(context, flashAttn, opts.kvType), logprobs: opts.fast ? "fast (float32 normalizer)" : "exact (float64 log-softmax)" },
    seconds,
    positions,
  };
  if (worstProbDiff != null) out.probabilities_vs_logsoftmax_max_abs_diff = worstProbDiff;
  await context.dispose();
  await model.dispose();
  process.stdout.write(JSON.stringify(out) + "\n");
}

// ---------------------------------------------------------------- bench

// The fixed prompt: ordinary (non-special) ids spread over the vocabulary by
// a fixed stride, the same recipe tests/llama_parity_test.cpp uses. On random
// weights the content does not matter for speed; being fixed, it routes to
// the same experts every run.
function fixedPromptIds(n) {
  return Array.from({ length: n }, (_, i) => (i * 7919 + 13) % 199998);
}

function cpuModel() {
  try {
    return readFileSync("/proc/cpuinfo", "utf8").match(/model name\s*:\s*(.*)/)?.[1] ?? cpus()[0]?.model;
  } catch {
    return cpus()[0]?.model;
  }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function bench(modelPath, opts) {
  const flashAttn = flashAttnOption(opts.flashAttn);
  const t0 = performance.now();
  const llama = await openLlama(opts.verbose);
  const model = await loadModel(llama, modelPath, { mmap: opts.mmap, flashAttn });
  const loadSeconds = (performance.now() - t0) / 1000;

  let ids;
  if (opts.promptText) ids = Array.from(model.tokenize(readFileSync(opts.promptText, "utf8")));
  else if (opts.promptIds) ids = readIds(opts.promptIds);
  else ids = fixedPromptIds(opts.promptTokens);
  if (ids.length < 1) throw new Error("the prompt is empty");
  const gen = opts.genTokens;
  const context = await createContext(model, {
    contextSize: opts.ctx ?? ids.length + gen + 16, batchSize: opts.batch,
    threads: opts.threads, flashAttn, kvType: opts.kvType });
  if (context.contextSize < ids.length + gen + 1)
    throw new Error(`the context (${context.contextSize} tokens) cannot hold ${ids.length} prompt + ${gen} generated tokens`);
  const sequence = context.getSequence();

  // Greedy: temperature 0 makes node-llama-cpp's sampler chain plain argmax.
  const ask = { generateNext: { token: true, options: { temperature: 0 } } };
  if (opts.warmup) {  // one token through the graph: allocations, first page faults
    await sequence.controlledEvaluate([[ids[0], ask]]);
    await sequence.clearHistory();
  }
  const runs = [];
  for (let rep = 0; rep < opts.repetitions; ++rep) {
    if (rep > 0) await sequence.clearHistory();
    // Prefill: the whole prompt; logits (and a sampled token) only at its end.
    const items = ids.map((id, i) => (i + 1 === ids.length ? [id, ask] : id));
    const t1 = performance.now();
    const out = await sequence.controlledEvaluate(items);
    const prefillSeconds = (performance.now() - t1) / 1000;
    let next = out[ids.length - 1]?.next?.token;
    if (next == null) throw new Error("llama.cpp returned no token after the prompt");
    // Decode: G single-token evaluations, each feeding back the greedy token.
    const generated = [next];
    const t2 = performance.now();
    for (let i = 0; i < gen; ++i) {
      const r = await sequence.controlledEvaluate([[next, ask]]);
      next = r[0]?.next?.token;
      if (next == null) throw new Error(`llama.cpp returned no token at decode step ${i}`);
      generated.push(next);
    }
    const decodeSeconds = (performance.now() - t2) / 1000;
    runs.push({
      prefill_seconds: prefillSeconds,
      prefill_tokens_per_s: ids.length / prefillSeconds,
      decode_seconds: decodeSeconds,
      decode_tokens_per_s: gen > 0 ? gen / decodeSeconds : null,
      first_generated: generated.slice(0, 8),
    });
  }
  const out = {
    engine: ENGINE,
    node_llama_cpp_version: NLC_VERSION,
    llama_cpp_release: llama.llamaCppRelease.release,
    cpu: cpuModel(),
    logical_cpus: cpus().length,
    model: modelPath,
    threads: opts.threads,
    settings: settingsOf(context, flashAttn, opts.kvType),
    load_seconds: loadSeconds,
    prompt_tokens: ids.length,
    generated_tokens: gen,
    repetitions: opts.repetitions,
    // Medians over the repetitions (each also listed under "runs").
    prefill_tokens_per_s: median(runs.map((r) => r.prefill_tokens_per_s)),
    time_to_first_token_s: median(runs.map((r) => r.prefill_seconds)),
    decode_tokens_per_s: gen > 0 ? median(runs.map((r) => r.decode_tokens_per_s)) : null,
    peak_rss_mib: process.resourceUsage().maxRSS / 1024,
    runs,
  };
  await context.dispose();
  await model.dispose();
  process.stdout.write(JSON.stringify(out) + "\n");
}

// ---------------------------------------------------------------- sweep

async function sweep(modelPath, opts) {
  const flashAttn = flashAttnOption(opts.flashAttn);
  const llama = await openLlama(opts.verbose);
  const model = await loadModel(llama, modelPath, { mmap: opts.mmap, flashAttn });
  const ctx = opts.ctx ?? 4096, chunk = opts.chunk, gen = opts.genTokens;
  if (chunk + gen > ctx) throw new Error(`--ctx ${ctx} cannot hold one --chunk ${chunk} and --gen-tokens ${gen}`);
  const context = await createContext(model, {
    contextSize: ctx, batchSize: opts.batch, threads: opts.threads, flashAttn, kvType: opts.kvType });
  if (context.contextSize < ctx) throw new Error(`llama.cpp made a context of ${context.contextSize} tokens, not ${ctx}`);
  const sequence = context.getSequence();
  const ids = fixedPromptIds(ctx);
  const ask = { generateNext: { token: true, options: { temperature: 0 } } };
  const rows = [];
  for (let at = 0; at + gen + chunk <= ctx;) {
    const nKv = at;
    const t0 = performance.now();
    for (let i = 0; i < gen; ++i) await sequence.controlledEvaluate([[ids[at++], ask]]);
    const tg = (performance.now() - t0) / 1000;
    const items = ids.slice(at, at + chunk).map((id, i) => (i + 1 === chunk ? [id, ask] : id));
    const t1 = performance.now();
    await sequence.controlledEvaluate(items);
    const pp = (performance.now() - t1) / 1000;
    at += chunk;
    rows.push({ n_kv: nKv, pp_tokens: chunk, pp_seconds: pp, pp_tokens_per_s: chunk / pp,
                tg_tokens: gen, tg_seconds: tg, tg_tokens_per_s: gen / tg });
    if (opts.verbose) process.stderr.write(JSON.stringify(rows.at(-1)) + "\n");
  }
  const out = {
    engine: ENGINE,
    node_llama_cpp_version: NLC_VERSION,
    llama_cpp_release: llama.llamaCppRelease.release,
    cpu: cpuModel(),
    model: modelPath,
    threads: opts.threads,
    settings: settingsOf(context, flashAttn, opts.kvType),
    rows,
  };
  await context.dispose();
  await model.dispose();
  process.stdout.write(JSON.stringify(out) + "\n");
}

// ---------------------------------------------------------------- command line

const USAGE =
  "usage: node llama_ref.mjs check MODEL.gguf [--threads N] [--verbose]\n" +
  "       node llama_ref.mjs score MODEL.gguf --ids FILE [--top K] [--threads N] [--ctx N] [--batch N]\n" +
  "                          [--flash-attn auto|on|off] [--kv-type f16|f32|q8_0] [--check-probs | --fast] [--no-mmap]\n" +
  "       node llama_ref.mjs bench MODEL.gguf --threads N --prompt-tokens P --gen-tokens G\n" +
  "                          [--prompt-ids FILE] [--repetitions R] [--batch N] [--flash-attn M] [--no-warmup]\n" +
  "       node llama_ref.mjs sweep MODEL.gguf --threads N --ctx C --chunk B --gen-tokens G [--batch N]\n" +
  "                          [--flash-attn M] [--kv-type T]\n" +
  "       (also: score MODEL IDS_FILE [TOP_K] [THREADS]; bench MODEL PROMPT_TEXT_FILE THREADS GEN_TOKENS)";

function positiveInt(name, value, { allowZero = false } = {}) {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < (allowZero ? 0 : 1)) fail(`${name} must be a ${allowZero ? "non-negative" : "positive"} integer, not '${value}'`);
  return n;
}

function parseCommandLine(argv) {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(USAGE + "\n");
    process.exit(command ? 0 : 1);
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      allowPositionals: true,
      options: {
        ids: { type: "string" },
        top: { type: "string" },
        threads: { type: "string", short: "t" },
        ctx: { type: "string" },
        batch: { type: "string" },
        "flash-attn": { type: "string" },
        "kv-type": { type: "string" },
        "check-probs": { type: "boolean" },
        fast: { type: "boolean" },
        "no-mmap": { type: "boolean" },
        "prompt-tokens": { type: "string" },
        chunk: { type: "string" },
        "gen-tokens": { type: "string" },
        "prompt-ids": { type: "string" },
        repetitions: { type: "string" },
        "no-warmup": { type: "boolean" },
        verbose: { type: "boolean", short: "v" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (e) {
    fail(`${e.message} (--help prints the usage)`);
  }
  const { values: v, positionals: p } = parsed;
  if (v.help) { process.stdout.write(USAGE + "\n"); process.exit(0); }
  if (p.length < 1) fail(`${command}: no model file given (--help prints the usage)`);
  const opts = {
    model: p[0],
    verbose: !!v.verbose,
    threads: positiveInt("--threads", v.threads) ?? 1,
    ctx: positiveInt("--ctx", v.ctx),
    batch: positiveInt("--batch", v.batch),
    flashAttn: v["flash-attn"],
    kvType: v["kv-type"],
    mmap: !v["no-mmap"],
    checkProbs: !!v["check-probs"],
    fast: !!v.fast,
  };
  if (command === "check") {
    if (p.length !== 1) fail("check takes one model file (--help prints the usage)");
  } else if (command === "score") {
    // Positional form: score MODEL IDS_FILE [TOP_K] [THREADS]
    if (p.length > 4) fail("score: too many arguments (--help prints the usage)");
    opts.ids = v.ids ?? p[1];
    opts.top = positiveInt("--top", v.top ?? p[2]) ?? 5;
    if (p[3] !== undefined && v.threads === undefined) opts.threads = positiveInt("THREADS", p[3]);
    if (!opts.ids) fail(`score: no ids file (--ids FILE) (--help prints the usage)`);
  } else if (command === "bench") {
    if (p.length === 4) {
      // Positional form: bench MODEL PROMPT_TEXT_FILE THREADS GEN_TOKENS
      opts.promptText = p[1];
      opts.threads = positiveInt("THREADS", p[2]);
      opts.genTokens = positiveInt("GEN_TOKENS", p[3], { allowZero: true });
    } else if (p.length === 1) {
      opts.promptIds = v["prompt-ids"];
      opts.promptTokens = positiveInt("--prompt-tokens", v["prompt-tokens"]) ?? 128;
      opts.genTokens = positiveInt("--gen-tokens", v["gen-tokens"], { allowZero: true }) ?? 32;
    } else {
      fail("bench takes MODEL alone with flags, or MODEL PROMPT_TEXT_FILE THREADS GEN_TOKENS (--help prints the usage)");
    }
    opts.repetitions = positiveInt("--repetitions", v.repetitions) ?? 1;
    opts.warmup = !v["no-warmup"];
  } else if (command === "sweep") {
    if (p.length !== 1) fail("sweep takes one model file (--help prints the usage)");
    opts.chunk = positiveInt("--chunk", v.chunk) ?? 512;
    opts.genTokens = positiveInt("--gen-tokens", v["gen-tokens"]) ?? 16;
  } else {
    fail(`unknown command '${command}' (--help prints the usage)`);
  }
  return { command, opts };
}

// llama.cpp stops the whole process on a failed GGML_ASSERT (for example a
// gpt-oss file without gpt-oss.expert_count), which no try/catch sees. So the
// work runs in a child process; this parent turns a crash into the usual one
// line, quoting what llama.cpp printed before dying.
async function runAsChild(argv) {
  const verbose = argv.includes("--verbose") || argv.includes("-v");
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), ...argv], {
    env: { ...process.env, LLAMA_REF_CHILD: "1" },
    stdio: ["ignore", "inherit", "pipe"],
  });
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => child.kill(sig));
  let err = "";
  child.stderr.on("data", (chunk) => {
    if (verbose) process.stderr.write(chunk);
    if (err.length < 1 << 20) err += chunk;
  });
  const [code, signal] = await new Promise((resolve) => child.on("close", (c, s) => resolve([c, s])));
  if (code === 0) {
    if (!verbose) process.stderr.write(err);
    process.exit(0);
  }
  const lines = err.split("\n").map((l) => l.trim()).filter(Boolean);
  const ours = lines.find((l) => l.startsWith("llama_ref: "));
  if (ours && !signal) {
    process.stderr.write(ours + "\n");
  } else {
    const cause = lines.findLast((l) => /GGML_ASSERT|GGML_ABORT|error|terminate|what\(\)/i.test(l)) ?? lines.at(-1) ??
      "(nothing on stderr)";
    process.stderr.write(`llama_ref: the llama.cpp process died (${signal ?? `exit status ${code}`}): ${cause}\n`);
  }
  process.exit(1);
}

if (process.env.LLAMA_REF_CHILD !== "1") await runAsChild(process.argv.slice(2));
// Only the child loads llama.cpp: importing node-llama-cpp takes ~1.5 s.
const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
const { command, opts } = parseCommandLine(process.argv.slice(2));
try {
  if (command === "check") await check(opts.model, opts);
  else if (command === "score") await score(opts.model, opts);
  else if (command === "sweep") await sweep(opts.model, opts);
  else await bench(opts.model, opts);
  process.exit(0);  // node-llama-cpp can keep worker handles alive after dispose
} catch (e) {
  fail(e?.message ?? String(e));
}
