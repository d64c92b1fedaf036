// Encodes every string of a JSON array with tiktoken's o200k_base (the
// tokenizer gpt-oss was trained with; o200k_harmony has the same ranks and
// pattern) and prints the id arrays as JSON. Special tokens are not parsed:
// tps's own tests cover those.
//   node tiktoken_encode.mjs CORPUS.json
import { readFileSync } from "node:fs";
import { get_encoding } from "tiktoken";

const docs = JSON.parse(readFileSync(process.argv[2], "utf8"));
const enc = get_encoding("o200k_base");
const out = docs.map((d) => Array.from(enc.encode_ordinary(d)));
enc.free();
process.stdout.write(JSON.stringify(out));
