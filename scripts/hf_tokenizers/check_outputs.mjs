#!/usr/bin/env node
// Checks what `encode.mjs --decode --write-input` wrote (used by smoke.sh).
//
//   node check_outputs.mjs OUTPUT VOCAB_SIZE [--nfc] [--expect-input EXPECTED_JSONL]
//                          [--titles CORPUS_JSONL] [--allow-mismatch]
//
// OUTPUT        the ids file; OUTPUT.input.jsonl and OUTPUT.decoded.jsonl beside it.
// VOCAB_SIZE    every id must be an integer in [0, VOCAB_SIZE).
// --nfc         the tokenizer has an NFC normalizer: decode(encode(x)) is compared with
//               x.normalize("NFC"), and documents that NFC changes are listed.
// --expect-input  each line {"text"} must equal the encoded text (OUTPUT.input.jsonl) exactly,
//               and each line's "file" is used as the document's name (raw files).
// --titles      a corpus JSONL whose "title" fields name the documents in messages.
// --allow-mismatch  report round-trip mismatches but exit 0.
//
// Every document must have ids (no null: an id the library could not find), only the empty
// text may have none, and decode(encode(x)) must equal x (or NFC(x)). Exits 1 otherwise.
import fs from 'node:fs';

const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  if (i < 0) return null;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const has = (name) => {
  const i = args.indexOf(name);
  if (i < 0) return false;
  args.splice(i, 1);
  return true;
};
const nfc = has('--nfc');
const allowMismatch = has('--allow-mismatch');
const expectFile = flag('--expect-input');
const titlesFile = flag('--titles');
if (args.length !== 2) {
  process.stderr.write('usage: node check_outputs.mjs OUTPUT VOCAB_SIZE [--nfc] ' +
                       '[--expect-input F] [--titles F] [--allow-mismatch]\n');
  process.exit(2);
}
const [out, vocabSizeArg] = args;
const vocabSize = Number(vocabSizeArg);

const lines = (f) => fs.readFileSync(f, 'utf8').split('\n').filter((l) => l.length > 0);
const ids = lines(out).map((l) => JSON.parse(l));
const inputs = lines(out + '.input.jsonl').map((l) => JSON.parse(l).text);
const decoded = lines(out + '.decoded.jsonl').map((l) => JSON.parse(l).text);
let names = inputs.map((_, i) => `#${i}`);
if (titlesFile) names = lines(titlesFile).map((l, i) => `#${i} ${JSON.parse(l).title}`);
const expected = expectFile ? lines(expectFile).map((l) => JSON.parse(l)) : null;
if (expected) names = expected.map((e, i) => `#${i} ${e.file}`);

const show = (s) => JSON.stringify(s.length > 80 ? s.slice(0, 80) + '…' : s);
const firstDiff = (a, b) => {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) ++i;
  return i;
};

let failures = 0;
const fail = (msg) => {
  ++failures;
  process.stdout.write(`FAIL ${msg}\n`);
};

if (ids.length !== inputs.length || decoded.length !== inputs.length) {
  fail(`${ids.length} id lines, ${inputs.length} inputs, ${decoded.length} decoded`);
}
if (expected && expected.length !== inputs.length) fail(`${expected.length} expected texts`);

let mismatches = 0;
let normalizedDocs = 0;
for (let i = 0; i < inputs.length; ++i) {
  const a = ids[i];
  if (!Array.isArray(a) || a.some((x) => !Number.isInteger(x) || x < 0 || x >= vocabSize)) {
    fail(`${names[i]}: ids not all integers in [0, ${vocabSize})`);
    continue;
  }
  if (a.length === 0 && inputs[i].length !== 0) fail(`${names[i]}: no ids for a non-empty text`);
  if (expected && expected[i].text !== inputs[i]) {
    const k = firstDiff(expected[i].text, inputs[i]);
    fail(`${names[i]}: TextDecoder gave ${show(inputs[i].slice(k))}, Python expected ` +
         `${show(expected[i].text.slice(k))} (from code unit ${k})`);
  }
  let want = inputs[i];
  if (nfc) {
    const n = want.normalize('NFC');
    if (n !== want) {
      ++normalizedDocs;
      process.stdout.write(`note ${names[i]}: NFC changes the text, so decode gives NFC(x)\n`);
    }
    want = n;
  }
  if (decoded[i] !== want) {
    ++mismatches;
    const k = firstDiff(decoded[i], want);
    const msg = `${names[i]}: decode(encode(x)) != ${nfc ? 'NFC(x)' : 'x'} from code unit ${k}: ` +
                `got ${show(decoded[i].slice(k))}, want ${show(want.slice(k))}`;
    if (allowMismatch) process.stdout.write(`mismatch ${msg}\n`);
    else fail(msg);
  }
}
const tokens = ids.reduce((s, a) => s + (Array.isArray(a) ? a.length : 0), 0);
process.stdout.write(`${out}: ${inputs.length} documents, ${tokens} tokens, ` +
                     `${mismatches} round-trip mismatches, ${normalizedDocs} changed by NFC, ` +
                     `${failures} failures\n`);
process.exit(failures === 0 ? 0 : 1);
