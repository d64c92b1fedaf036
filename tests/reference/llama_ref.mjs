// Drives llama.cpp (the prebuilt CPU build inside the npm package
// node-llama-cpp) as a reference engine for tps.
//
//   node llama_ref.mjs check MODEL.gguf
//     Loads the file, checks llama.cpp sees a gpt-oss model, tokenizes a
//     string and evaluates a few tokens; prints a JSON summary to stdout.
//     Exit 0 on success; on failure one line "llama_ref: ..." on stderr, exit 1.
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

const [command, ...args] = process.argv.slice(2);
try {
  if (command === "check" && args.length === 1) await check(args[0]);
  else fail("usage: node llama_ref.mjs check MODEL.gguf");
} catch (e) {
  fail(e.message);
}
