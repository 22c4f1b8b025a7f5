#!/usr/bin/env node
// Encodes a corpus with Hugging Face's own JavaScript tokenizer, as the reference that Asteria's
// C++ tokenizers are compared against (issue 53).
//
//   node encode.mjs TOKENIZER INPUT OUTPUT [options]
//   node encode.mjs TOKENIZER OUTPUT [options] --raw-files FILE...
//
// TOKENIZER  a tokenizer.json file, or a folder holding tokenizer.json and, optionally,
//            tokenizer_config.json (a lone file gets the config {}).
// INPUT      JSONL: one object per line with a string field "text" (Asteria's corpus format,
//            scripts/corpus_to_jsonl.js); other fields are ignored. Lines are split on "\n"
//            only; each line must be valid UTF-8 (refused otherwise: use --raw-files).
// OUTPUT     one line per document, in input order: a JSON array of the token ids.
//
// Options
//   --add-special-tokens  encode with add_special_tokens: true (default false). It only matters
//                         for a TemplateProcessing / Bert / Roberta post_processor; the ByteLevel
//                         post_processor (OLMo-1) and a null one (OLMo-2) never add a token, and
//                         tokenizer_config.json's add_bos_token / add_eos_token are NOT applied by
//                         this library (see README.md).
//   --decode              also write OUTPUT.decoded.jsonl: per document {"text": decode(ids)},
//                         with skip_special_tokens false and clean_up_tokenization_spaces false
//                         (as the Rust library's decode; the JS default would apply transformers'
//                         clean-up, " ." -> ".", unless the config says false). An empty id list
//                         decodes to "" (the library throws on it).
//   --write-input         also write OUTPUT.input.jsonl: per document {"text": the string that was
//                         encoded} (for --raw-files: the TextDecoder's output, below).
//   --repeat N            run the timed encode loop N times (default 1); ids come from the first.
//   --raw-files FILE...   (last option; every argument after it is a file) each FILE is one
//                         document of raw bytes, decoded as `new TextDecoder("utf-8")` does by
//                         default (fatal: false, ignoreBOM: false; WHATWG Encoding Standard):
//                           * ONE leading UTF-8 BOM (EF BB BF) is removed; a later one stays U+FEFF;
//                           * each maximal subpart of an ill-formed sequence becomes ONE U+FFFD:
//                             a lead byte C2-DF takes 1 continuation byte 80-BF; E0 takes A0-BF
//                             then 80-BF; E1-EC and EE-EF take 80-BF twice; ED takes 80-9F (no
//                             surrogates) then 80-BF; F0 takes 90-BF then 80-BF twice; F1-F3 take
//                             80-BF three times; F4 takes 80-8F then 80-BF twice. A byte that does
//                             not fit ends the sequence: one U+FFFD for the lead byte and the
//                             continuation bytes accepted so far, and that byte is read again as
//                             the start of what follows. 80-BF alone, C0, C1 and F5-FF are one
//                             U+FFFD each; a sequence cut by the end of the file is one U+FFFD.
//                             So overlong C0 AF -> 2 x U+FFFD, E0 80 AF -> 3, F0 80 80 AF -> 4,
//                             a UTF-8-encoded surrogate ED A0 80 -> 3, F4 90 80 80 -> 4, E2 82 +
//                             ASCII -> 1 (and the ASCII byte).
//                         The U+FFFD characters are then tokenized like any other text (bytes
//                         EF BF BD for a byte-level BPE). A "\uD800" escape (lone surrogate) in a
//                         JSONL text is kept as is by JSON.parse and becomes EF BF BD when the
//                         ByteLevel pre-tokenizer UTF-8-encodes it (TextEncoder).
//
// Prints to stderr: documents, UTF-8 bytes of the encoded texts, tokens, seconds, documents/s
// and MB/s (1 MB = 1e6 bytes) of the encode loop only: `tokenizer.encode` over every document,
// after the files are read, the JSON parsed and the tokenizer built, and before ids are written.
// Single-threaded (node runs the loop on one thread).
//
// Why @huggingface/tokenizers and not @huggingface/transformers: transformers 4.3.2's
// AutoTokenizer / PreTrainedTokenizer is a wrapper around this same `Tokenizer` class from
// @huggingface/tokenizers (its src/tokenization_utils.js imports it), so the ids are the ones it
// would give; but every import path of transformers (the dist bundle, or src/tokenization_utils.js
// through utils/tensor.js -> backends/onnx.js) loads onnxruntime-node's native binding and
// sharp's libvips at import time (~475 MB installed), and its from_pretrained goes through the hub
// file cache. @huggingface/tokenizers is pure JavaScript with no dependencies, and needs no
// network at run time: it is built here from the JSON files directly.
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Tokenizer } from '@huggingface/tokenizers';

function die(msg) {
  process.stderr.write(`encode.mjs: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { addSpecial: false, decode: false, writeInput: false, repeat: 1, rawFiles: null };
  const pos = [];
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--add-special-tokens') opts.addSpecial = true;
    else if (a === '--decode') opts.decode = true;
    else if (a === '--write-input') opts.writeInput = true;
    else if (a === '--repeat') {
      opts.repeat = Number(argv[++i]);
      if (!Number.isInteger(opts.repeat) || opts.repeat < 1) die('--repeat needs an integer >= 1');
    } else if (a === '--raw-files') {
      opts.rawFiles = argv.slice(i + 1);
      if (opts.rawFiles.length === 0) die('--raw-files needs at least one file');
      break;
    } else if (a.startsWith('--')) die(`unknown option ${a}`);
    else pos.push(a);
  }
  const want = opts.rawFiles ? 2 : 3;
  if (pos.length !== want) {
    die('usage: node encode.mjs TOKENIZER INPUT OUTPUT [--add-special-tokens] [--decode] ' +
        '[--write-input] [--repeat N]\n' +
        '       node encode.mjs TOKENIZER OUTPUT [options] --raw-files FILE...');
  }
  opts.tokenizer = pos[0];
  opts.input = opts.rawFiles ? null : pos[1];
  opts.output = pos[pos.length - 1];
  return opts;
}

function loadTokenizer(p) {
  let jsonPath = p;
  let config = {};
  if (fs.statSync(p).isDirectory()) {
    jsonPath = path.join(p, 'tokenizer.json');
    const cfg = path.join(p, 'tokenizer_config.json');
    if (fs.existsSync(cfg)) config = JSON.parse(fs.readFileSync(cfg, 'utf8'));
  }
  return new Tokenizer(JSON.parse(fs.readFileSync(jsonPath, 'utf8')), config);
}

function readJsonl(file) {
  const buf = fs.readFileSync(file);
  const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const texts = [];
  let start = 0;
  let lineNo = 0;
  while (start < buf.length) {
    let end = buf.indexOf(0x0a, start);
    if (end < 0) end = buf.length;
    ++lineNo;
    const bytes = buf.subarray(start, end);
    start = end + 1;
    if (bytes.length === 0) continue;
    let line;
    try {
      line = strict.decode(bytes);
    } catch {
      die(`${file}:${lineNo}: not valid UTF-8 (use --raw-files for such documents)`);
    }
    let doc;
    try {
      doc = JSON.parse(line);
    } catch (e) {
      die(`${file}:${lineNo}: ${e.message}`);
    }
    if (typeof doc?.text !== 'string') die(`${file}:${lineNo}: no string field "text"`);
    texts.push(doc.text);
  }
  return texts;
}

function readRaw(files) {
  const decoder = new TextDecoder('utf-8'); // node's default: fatal false, ignoreBOM false
  return files.map((f) => decoder.decode(fs.readFileSync(f)));
}

function writeLines(file, lines) {
  const fd = fs.openSync(file, 'w');
  try {
    for (const line of lines) fs.writeSync(fd, line + '\n');
  } finally {
    fs.closeSync(fd);
  }
}

const opts = parseArgs(process.argv.slice(2));
const tokenizer = loadTokenizer(opts.tokenizer);
const texts = opts.rawFiles ? readRaw(opts.rawFiles) : readJsonl(opts.input);
const encodeOptions = { add_special_tokens: opts.addSpecial };

let bytes = 0;
for (const t of texts) bytes += Buffer.byteLength(t, 'utf8');

let ids = null;
for (let r = 0; r < opts.repeat; ++r) {
  const out = new Array(texts.length);
  const t0 = performance.now();
  for (let i = 0; i < texts.length; ++i) out[i] = tokenizer.encode(texts[i], encodeOptions).ids;
  const sec = (performance.now() - t0) / 1000;
  if (ids === null) ids = out;
  let tokens = 0;
  for (const a of out) tokens += a.length;
  process.stderr.write(
    `encode.mjs: pass ${r + 1}/${opts.repeat}: ${texts.length} documents, ${bytes} bytes, ` +
    `${tokens} tokens in ${sec.toFixed(3)} s: ${(texts.length / sec).toFixed(1)} documents/s, ` +
    `${(bytes / 1e6 / sec).toFixed(3)} MB/s\n`);
}

writeLines(opts.output, ids.map((a) => JSON.stringify(a)));
if (opts.decode) {
  const decodeOptions = { skip_special_tokens: false, clean_up_tokenization_spaces: false };
  writeLines(opts.output + '.decoded.jsonl', ids.map((a) =>
    JSON.stringify({ text: a.length === 0 ? '' : tokenizer.decode(a, decodeOptions) })));
}
if (opts.writeInput) {
  writeLines(opts.output + '.input.jsonl', texts.map((t) => JSON.stringify({ text: t })));
}
