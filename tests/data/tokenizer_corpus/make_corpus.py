#!/usr/bin/env python3
"""Writes the adversarial tokenizer test corpus (issue 53) into OUT_DIR, deterministically.

    python3 tests/data/tokenizer_corpus/make_corpus.py OUT_DIR [--big-mb N]

Python 3 standard library only. Every run writes byte-identical files (no hash seeds, no
`random`: the big document comes from a fixed 64-bit LCG).

Files written:
  corpus.jsonl        one JSON object per line, {"source", "title", "text"} as Asteria's corpus
                      builder writes them (scripts/corpus_to_jsonl.js); every "text" is valid
                      Unicode (no lone surrogates), written as raw UTF-8 (ensure_ascii=False).
                      Lines are separated by "\n" only; U+2028/U+2029/U+0085 inside a text are
                      written raw and are NOT line breaks for the reader.
                      The last document is `big_mix`, about --big-mb MB (default 10) in one text.
  raw/NN_name.bin     files whose bytes are not valid UTF-8 (plus two controls that are), one
                      document per file, for `encode.mjs --raw-files`.
  raw/expected.jsonl  for each raw file, in name order: {"file", "text"} where "text" is what a
                      WHATWG TextDecoder('utf-8') (fatal: false, ignoreBOM: false: node's default)
                      yields: each maximal subpart of an ill-formed sequence becomes one U+FFFD, and
                      ONE leading UTF-8 BOM (EF BB BF) is dropped. Computed here with Python's
                      'replace' error handler, which follows the same maximal-subpart practice.
  MANIFEST            file names, sizes and sha256, so two runs can be compared.
"""
import hashlib
import json
import os
import sys
import unicodedata

# --------------------------------------------------------------------------------------------
# Small documents: each one aims at one behaviour of a byte-level BPE tokenizer.
# --------------------------------------------------------------------------------------------

E_ACUTE_DECOMPOSED = "e\u0301"  # e + COMBINING ACUTE ACCENT; NFC makes it U+00E9

DOCS = [
    ("english", "The quick brown fox jumps over the lazy dog. It was the best of times, it was "
                "the worst of times; Mr. Smith paid $3.50 for 2 apples (and 1 pear)!"),
    ("contractions_lower", "it's isn't they're we've I'm you'll he'd she's can't won't "
                           "y'all o'clock rock'n'roll 's 't 're 've 'm 'll 'd"),
    ("contractions_upper", "IT'S ISN'T THEY'RE WE'VE I'M YOU'LL HE'D 'S 'T 'RE 'VE 'M 'LL 'D"),
    ("contractions_mixed", "It'S They'Re We'Ve I'M You'Ll He'D 'sTRING 'Tis 'ReAl"),
    ("contractions_curly", "it\u2019s they\u2019re we\u2019ve I\u2019m you\u2019ll he\u2019d "
                           "\u2018quoted\u2019 \u201cdouble\u201d IT\u2019S"),
    ("contractions_edges", "'s's''s ''' 'x ' s \"'s\" don''t 'S'S 'LL'll "
                           "it'\u017f ('\u017f: Unicode case folding makes it 's) 'K 'k"),
    ("vietnamese", "Ti\u1ebfng Vi\u1ec7t c\u00f3 nhi\u1ec1u d\u1ea5u: Ng\u01b0\u1eddi ta "
                   "n\u00f3i r\u1eb1ng h\u1ecdc, h\u1ecfi, ngh\u0129."),
    ("vietnamese_nfd", unicodedata.normalize(
        "NFD", "Ti\u1ebfng Vi\u1ec7t c\u00f3 nhi\u1ec1u d\u1ea5u: Ng\u01b0\u1eddi ta n\u00f3i")),
    ("devanagari", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e\u0964 "
                   "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e "
                   "\u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f \u0966\u0967\u0968\u0969"),
    ("e_acute", "caf\u00e9 vs cafe\u0301, r\u00e9sum\u00e9 vs re\u0301sume\u0301, "
                + E_ACUTE_DECOMPOSED * 5 + " \u00c5 vs A\u030a vs \u212b (Angstrom sign)"),
    ("combining_stack", "Z\u0334\u0321\u0359a\u0337l\u0336g\u0338o\u0335 t\u0303\u0304\u0305ext "
                        "\u0301leading-mark a\u0308\u0323 q\u0323\u0307"),
    ("chinese", "\u6c49\u5b57\u662f\u4e2d\u6587\u7684\u6587\u5b57\u3002\u4eca\u5929\u5929\u6c14"
                "\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u5427\uff01\u300c\u5f15\u53f7\u300d"),
    ("japanese", "\u3072\u3089\u304c\u306a\u3068\u30ab\u30bf\u30ab\u30ca\u3068\u6f22\u5b57\u3002"
                 "\u30c6\u30b9\u30c8\u3067\u3059\u3002\uff76\uff80\uff76\uff85 \u30fc\u30fb"
                 "\u304c \u304b\u3099"),
    ("korean", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4. \uc548\ub155\ud558\uc138\uc694!"),
    ("korean_jamo", unicodedata.normalize("NFD", "\ud55c\uad6d\uc5b4 \uc548\ub155") + " \u1100\u1161"),
    ("arabic", "\u0627\u0644\u0644\u063a\u0629 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 "
               "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627 \u0661\u0662\u0663 "
               "\u0627\u0644\u0633\u0644\u0627\u0645 \u0639\u0644\u064a\u0643\u0645\u061f"),
    ("hebrew", "\u05e2\u05b4\u05d1\u05b0\u05e8\u05b4\u05d9\u05ea \u05e9\u05dc\u05d5\u05dd "
               "\u05e2\u05d5\u05dc\u05dd"),
    ("bidi_marks", "abc \u200e\u05e9\u05dc\u05d5\u05dd\u200f def \u202aLRE\u202c \u2067iso\u2069"),
    ("emoji_basic", "I \u2764\ufe0f tokenizers \U0001F600\U0001F602\U0001F923 \u2600 \u263a\ufe0f"),
    ("emoji_zwj", "family \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 "
                  "couple \U0001F469\u200d\u2764\ufe0f\u200d\U0001F468 "
                  "tech \U0001F9D1\U0001F3FD\u200d\U0001F4BB"),
    ("emoji_skin", "\U0001F44D\U0001F3FB\U0001F44D\U0001F3FC\U0001F44D\U0001F3FD"
                   "\U0001F44D\U0001F3FE\U0001F44D\U0001F3FF \U0001F44B\U0001F3FD"),
    ("emoji_flags", "\U0001F1FA\U0001F1F8\U0001F1EF\U0001F1F5\U0001F1E9\U0001F1EA "
                    "\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F "
                    "1\ufe0f\u20e3 #\ufe0f\u20e3"),
    ("digits", "1234567890123 3.14159 1,000,000 -42 +7 1e10 6.022e23 0x1F 0b1010 007 "
               "2024-01-31 12:34:56 99.9% $1,234.56"),
    ("digits_unicode", "\u0661\u0662\u0663 \uff11\uff12\uff13 \u00b2\u00b3\u00b9 \u00bd\u00bc "
                       "\u2167\u216b \u0966\u0967 \U0001D7D8\U0001D7D9 \u2460\u2461"),
    ("long_number", "9" * 1000 + " " + "1234567890" * 50),
    ("spaces", "a  b   c    d     e" + " " * 40 + "f"),
    ("tabs_newlines", "a\tb\t\tc\n\nd\n\n\ne\t \t\nf"),
    ("crlf", "line one\r\nline two\r\n\r\nline four\rcr only\n\r\n"),
    ("trailing_spaces", "trailing   \nspaces   \n   leading\n  both  "),
    ("mixed_whitespace", " \t \n \r\n\u00a0\u3000\u2003x\u2028y\u2029z\u0085w\u000bv\u000cu "
                         "\ufeffbom\u200bzwsp\u180emvs\u2060wj"),
    ("code_python", "def f(x: int) -> int:\n    if x <= 1:\n        return x\n    return f(x - 1) + "
                    "f(x - 2)  # fib\n\nprint([f(i) for i in range(10)])\n"),
    ("code_cpp", "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\tfor (auto& x : v)"
                 " { x *= 2; }\n\treturn v[0] != 2 ? -1 : 0; // done\n}\n"),
    ("code_json", '{"key": "value", "n": [1, 2.5, -3e4], "nested": {"a": null, "b": true}}'),
    ("code_misc", "x+=1;y-=2;z**=3;a&&b||!c; a->b::c <=> d; $var @decorator `cmd` ~/path\\to\\file"),
    ("urls", "See https://example.com/path/to/page?query=1&x=y#frag and http://www.test.org:8080/ "
             "or mailto:user.name+tag@example.co.uk; ftp://a.b/c.txt"),
    ("special_token_text", "before<|endoftext|>after <|padding|> <|pad|>x <|endoftext <|im_start|>"
                           "user\n|||EMAIL_ADDRESS||| <|endoftext|><|endoftext|>"),
    ("empty", ""),
    ("whitespace_only", "   \n\t  \r\n  "),
    ("single_space", " "),
    ("single_newline", "\n"),
    ("single_letter", "a"),
    ("long_word", "a" * 5000),
    ("long_spaces", " " * 3000 + "x"),
    ("long_emoji", "\U0001F600" * 300),
    ("letters_misc", "\u01c5 \u00df \u0130 \u0131 \u03a3\u03c3\u03c2 \u041f\u0440\u0438\u0432\u0435\u0442 "
                     "\U0001D518\U0001D51E \u13a0\u13a1 \u02b0\u02b1 \u2c00 \u0e01\u0e34\u0e19"),
    ("unicode_versions", "Unicode 14 Toto \U0001E290\U0001E291; Unicode 15 Kawi \U00011F04\U00011F05 "
                         "Nag Mundari \U0001E4D0\U0001E4D1 CJK-H \U00031350\U00031351"),
    ("unassigned_private", "pua \ue000\uf8ff nonchar \ufdd0\ufffe\uffff max \U0010FFFF "
                           "unassigned \u0378\U0002FFFF"),
    ("controls", "nul\x00soh\x01del\x7fesc\x1b[0mbell\x07 c1\x80\x9f"),
    ("punctuation_runs", "!!! ??? ... --- ___ *** ### @@@ ((())) [[[]]] {{{}}} <<>> ''' \"\"\" "
                         "\u2026 \u2014\u2013 \u00bf\u00a1 \u3001\u3002"),
    ("symbols", "\u20ac100 \u00a3 \u00a5 \u20b9 \u00a9 \u00ae \u2122 \u00b0C \u2211 \u221e \u2248 "
                "\u2192 \u21d2 \u2713 \u2605 \u266a"),
    ("nfc_sensitive", "\u212b \u2126 \u0344 \u1e9b\u0323 \u00c7 C\u0327 \ufb01 \u2460 "
                      "\u0958 \u0915\u093c"),
]


class Lcg:
    """64-bit LCG (Knuth's MMIX constants): the same numbers on every Python."""

    def __init__(self, seed):
        self.state = seed

    def next(self, n):
        """An integer in [0, n)."""
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return (self.state >> 33) % n


LATIN_ONSETS = ["", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v",
                "w", "z", "br", "ch", "cl", "dr", "fl", "gr", "pl", "qu", "sh", "st", "str", "th",
                "tr"]
LATIN_NUCLEI = ["a", "e", "i", "o", "u", "y", "ai", "ea", "ee", "ie", "oo", "ou", "\u00e9",
                "\u00e8", "\u00fc", "\u00f6", "\u00e5", "\u00f1", "\u01b0\u1edd", "\u1ec7"]
LATIN_CODAS = ["", "", "n", "r", "s", "t", "ng", "ck", "ll", "rd", "st", "tion", "ment", "ing",
               "ed", "er", "\u00df"]
SUFFIXES = ["", "", "", "", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "\u2019s", ".",
            ",", "!", "?", ":", ";", ")", "\"", "...", "-"]
EMOJI = ["\U0001F600", "\U0001F44D", "\u2764\ufe0f", "\U0001F680", "\U0001F389",
         "\U0001F468\u200d\U0001F4BB", "\U0001F1EB\U0001F1F7", "\U0001F9D1\u200d\U0001F373"]
SKIN = ["", "", "\U0001F3FB", "\U0001F3FD", "\U0001F3FF"]


def generated_word(g):
    """A pseudo-word in one of several scripts, so the big document has many distinct words."""
    k = g.next(20)
    if k < 9:  # Latin, various casings and contraction/punctuation suffixes
        w = "".join(LATIN_ONSETS[g.next(len(LATIN_ONSETS))] + LATIN_NUCLEI[g.next(len(LATIN_NUCLEI))]
                    + LATIN_CODAS[g.next(len(LATIN_CODAS))] for _ in range(1 + g.next(3)))
        case = g.next(10)
        if case == 0:
            w = w.upper()
        elif case < 4:
            w = w[:1].upper() + w[1:]
        return w + SUFFIXES[g.next(len(SUFFIXES))]
    if k == 9:  # Cyrillic
        return "".join(chr(0x430 + g.next(32)) for _ in range(2 + g.next(8)))
    if k == 10:  # Greek
        return "".join(chr(0x3B1 + g.next(25)) for _ in range(2 + g.next(8)))
    if k == 11:  # Hangul syllables
        return "".join(chr(0xAC00 + g.next(11172)) for _ in range(1 + g.next(4)))
    if k == 12:  # CJK ideographs, no spaces between them in real text
        return "".join(chr(0x4E00 + g.next(400)) for _ in range(1 + g.next(6)))
    if k == 13:  # hiragana / katakana
        base = 0x3041 if g.next(2) else 0x30A1
        return "".join(chr(base + g.next(86)) for _ in range(2 + g.next(6)))
    if k == 14:  # Devanagari consonant + vowel sign
        return "".join(chr(0x915 + g.next(37)) + ["", "\u093e", "\u093f", "\u0940", "\u0941",
                                                  "\u0947", "\u094d"][g.next(7)]
                       for _ in range(1 + g.next(4)))
    if k == 15:  # Arabic
        return "".join(chr(0x627 + g.next(20)) for _ in range(2 + g.next(6)))
    if k == 16:  # numbers of every length, with separators sometimes
        n = "".join(chr(0x30 + g.next(10)) for _ in range(1 + g.next(15)))
        sep = g.next(6)
        if sep == 0 and len(n) > 3:
            n = n[:-3] + "," + n[-3:]
        elif sep == 1 and len(n) > 2:
            n = n[:2] + "." + n[2:]
        return n
    if k == 17:  # emoji, with a skin tone sometimes
        return EMOJI[g.next(len(EMOJI))] + SKIN[g.next(len(SKIN))]
    if k == 18:  # decomposed accents (NFC changes them)
        return "".join(chr(0x61 + g.next(26)) + ["\u0301", "\u0300", "\u0308", "\u0323"][g.next(4)]
                       for _ in range(1 + g.next(4)))
    return "".join(chr(0x21 + g.next(94)) for _ in range(1 + g.next(8)))  # ASCII soup


def big_document(size_bytes):
    """A deterministic mix of the small documents, their words and generated words in many
    scripts, about size_bytes UTF-8 bytes."""
    pieces = [text for _, text in DOCS if text and len(text) < 2000]
    words = []
    for p in pieces:
        words.extend(p.split(" "))
    seps = [" ", " ", " ", " ", " ", " ", "\n", "\n\n", "\t", "  ", "\r\n", ", ", ". ", "   \n"]
    g = Lcg(0x2545F4914F6CDD1D)
    out = []
    total = 0
    while total < size_bytes:
        k = g.next(100)
        if k < 2:
            chunk = pieces[g.next(len(pieces))]
        elif k < 40:
            chunk = words[g.next(len(words))]
        else:
            chunk = generated_word(g)
        chunk += seps[g.next(len(seps))]
        out.append(chunk)
        total += len(chunk.encode("utf-8"))
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Raw byte files: not valid UTF-8 (and two controls that are).
# --------------------------------------------------------------------------------------------

RAW = [
    ("valid_control", "Valid UTF-8: caf\u00e9 \U0001F600 \u6c49\u5b57.".encode("utf-8")),
    ("lone_continuation", b"abc\x80def \xbf \x80\x80\x80 end"),
    ("overlong_2byte", b"slash \xc0\xaf and nul \xc0\x80 and \xc1\xbf"),
    ("overlong_3byte", b"x\xe0\x80\xafy \xe0\x9f\xbf"),
    ("overlong_4byte", b"x\xf0\x80\x80\xafy \xf0\x8f\xbf\xbf"),
    ("truncated_mid", b"euro \xe2\x82 then ascii; emoji \xf0\x9f\x98 then more; \xc3 x"),
    ("truncated_at_end", b"ends with a cut euro \xe2\x82"),
    ("surrogate_high", b"high \xed\xa0\x80 surrogate"),
    ("surrogate_low", b"low \xed\xbf\xbf surrogate"),
    ("surrogate_pair_cesu", b"cesu \xed\xa0\xbd\xed\xb8\x80 pair"),
    ("above_max", b"above \xf4\x90\x80\x80 max, \xf5\x80\x80\x80, \xf8\x88\x80\x80\x80"),
    ("invalid_lead_bytes", b"ff \xff fe \xfe c0 \xc0 c1 \xc1 f5 \xf5 end"),
    ("mixed_valid_invalid", "d\u00e9j\u00e0 ".encode("utf-8") + b"\xe9t\xe9 " +
        "\u4f60\u597d".encode("utf-8")[:-1] + b" ok " + "\U0001F44D".encode("utf-8")[1:]),
    ("bom_leading", b"\xef\xbb\xbfBOM then text"),
    ("bom_twice", b"\xef\xbb\xbf\xef\xbb\xbftwo BOMs"),
    ("bom_middle", b"text \xef\xbb\xbf middle BOM"),
    ("all_bytes", bytes(range(256))),
    ("latin1_text", "Na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u00fcber stra\u00dfe".encode("latin-1")),
    ("valid_empty", b""),
]


def whatwg_decode(data):
    """What node's `new TextDecoder('utf-8').decode(data)` returns (see module doc)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------

def main(argv):
    args = list(argv)
    big_mb = 10.0
    if "--big-mb" in args:
        i = args.index("--big-mb")
        big_mb = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    out_dir = args[0]
    raw_dir = os.path.join(out_dir, "raw")
    os.makedirs(raw_dir, exist_ok=True)

    docs = list(DOCS) + [("big_mix", big_document(int(big_mb * 1_000_000)))]
    names = [n for n, _ in docs]
    assert len(set(names)) == len(names), "duplicate document names"
    with open(os.path.join(out_dir, "corpus.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for name, text in docs:
            text.encode("utf-8")  # raises on a lone surrogate
            f.write(json.dumps({"source": "adversarial", "title": name, "text": text},
                               ensure_ascii=False) + "\n")

    expected = []
    for i, (name, data) in enumerate(RAW):
        fname = "%02d_%s.bin" % (i, name)
        with open(os.path.join(raw_dir, fname), "wb") as f:
            f.write(data)
        expected.append({"file": fname, "text": whatwg_decode(data)})
    with open(os.path.join(raw_dir, "expected.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for e in expected:
            f.write(json.dumps(e, ensure_ascii=True) + "\n")

    lines = []
    for root, _, files in sorted(os.walk(out_dir)):
        for fn in sorted(files):
            if fn == "MANIFEST":
                continue
            p = os.path.join(root, fn)
            with open(p, "rb") as f:
                data = f.read()
            lines.append("%s %d %s" % (os.path.relpath(p, out_dir), len(data),
                                       hashlib.sha256(data).hexdigest()))
    with open(os.path.join(out_dir, "MANIFEST"), "w") as f:
        f.write("\n".join(lines) + "\n")
    sys.stderr.write("make_corpus: %d documents, %d raw files in %s\n"
                     % (len(docs), len(RAW), out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
