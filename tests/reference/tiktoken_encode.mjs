// The reference side of tests/tokenizer_parity_test.cpp: encodes text with
// tiktoken's o200k_base (the tokenizer gpt-oss was trained with; o200k_harmony
// has the same ranks and split pattern). Special tokens are not parsed: tps's
// own tests cover those.
//   node tiktoken_encode.mjs CORPUS.json [COUNT SEED]
// CORPUS.json is a JSON array of strings. Prints one JSON object:
//   documents: the ids of each string;
//   whole:     the ids of all strings joined with "\n" (one long text);
//   random:    COUNT generated strings (seeded, so a failure can be replayed)
//              with their ids, as [{text, ids}] -- mixtures of the characters
//              where regex engines and Unicode tables tend to disagree.
import { readFileSync } from "node:fs";
import { get_encoding } from "tiktoken";

const [corpusPath, countArg = "0", seedArg = "1"] = process.argv.slice(2);
const docs = JSON.parse(readFileSync(corpusPath, "utf8"));
const enc = get_encoding("o200k_base");
const ids = (text) => Array.from(enc.encode_ordinary(text));

// mulberry32: a small seeded generator (Math.random cannot be seeded).
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Pieces the generated strings are made of: cased letters and contractions
// (the pattern's (?i:'s|...) suffix), digits of several scripts (\p{N} runs
// of three), every kind of white space and line break, combining marks
// (\p{M} belongs to words), titlecase and modifier letters, case-folding
// oddities, CJK, RTL scripts, emoji sequences, control characters.
const pool = [
  ..."abcdefghijklmnopqrstuvwxyz", ..."ABCDEFGHIJKLMNOPQRSTUVWXYZ", ..."0123456789",
  "the", " the", "The", "HELLO", "world", " 123", "4567",
  "'", "'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'lL",
  "'d", "'D", "\u2019s", "'x", "'\u017f", "'\u212a",
  " ", " ", " ", "  ", "    ", "\t", "\t\t", "\n", "\n", "\n\n", "\r\n", "\r", "\u000b", "\f",
  "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u1680", "\u180e", "\u2009", "\u202f",
  "\u200b", "\u200c", "\u200d", "\ufeff", "\u0000", "\u0001", "\u007f",
  ..."!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~", "/", "//", "...", "->", "==", "::",
  "é", "e\u0301", "\u0301", "\u0308", "\u20d7", "Z\u0353\u0351", "ñ", "Ö",
  "क", "ि", "्", "ष", "हिन्दी", "\u093f", "\u0903", "த", "ா", "்",
  "ǅ", "ǈ", "ʰ", "ˇ", "ſ", "\u212a", "ß", "ẞ", "İ", "ı", "ﬁ", "Σ", "ς", "Ω",
  "東", "京", "で", "す", "ア", "ｱ", "한", "국", "。", "，",
  "ا", "ل", "ع", "ر", "ب", "ש", "ל", "ו", "ם", "\u200f",
  "١", "٢", "٣", "२", "३", "௧", "１", "２", "²", "³", "½", "Ⅻ", "ⅻ", "〇",
  "€", "$", "£", "∑", "∫", "≤", "→", "π", "∞", "©", "®", "™", "°",
  "🤖", "👍", "👍🏽", "🇺🇸", "🇯🇵", "👨\u200d👩\u200d👧", "❤\ufe0f", "🏳\ufe0f\u200d🌈", "✨", "𝔘", "𠜎",
];

function randomText(next) {
  const n = 1 + Math.floor(next() * 24);
  let s = "";
  for (let i = 0; i < n; ++i) s += pool[Math.floor(next() * pool.length)];
  return s;
}

const next = generator(Number(seedArg));
const random = [];
for (let i = 0; i < Number(countArg); ++i) {
  const text = randomText(next);
  random.push({ text, ids: ids(text) });
}

const out = { documents: docs.map(ids), whole: ids(docs.join("\n")), random };
enc.free();
process.stdout.write(JSON.stringify(out));
