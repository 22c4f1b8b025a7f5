#!/usr/bin/python3
"""The size limits of src/ (ctest: source.sizes): no file over 500 lines, no function over 80.

A function is a brace block opened at namespace or class scope after a parameter list (its
qualifiers, trailing return type or constructor initializers between): free functions, member
functions in and out of their class, constructors. Lambdas and local blocks count toward the
function they are in. Comments, strings and raw strings are blanked first, so braces in them do
not count. Exits non-zero naming each file and function over its limit.

usage: check_source_sizes.py [SRC_DIR]   (default: the src/ beside this script's folder)
"""
import pathlib
import re
import sys

MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 80


def blank_comments_and_strings(src):
    out, i, n = [], 0, len(src)
    keep_newlines = lambda text: re.sub(r"[^\n]", " ", text)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i) + 2
        elif src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            delim = re.match(r'R"([^(]*)\(', src[i:]).group(1)
            j = src.find(")" + delim + '"', i) + len(delim) + 2
        elif src[i] in "\"'" and not (src[i] == "'" and i > 0 and src[i - 1].isalnum()):   # 1'000 digit separators
            j = i + 1
            while src[j] != src[i]:
                j += 2 if src[j] == "\\" else 1
            j += 1
        else:
            out.append(src[i])
            i += 1
            continue
        out.append(keep_newlines(src[i:j]))
        i = j
    return "".join(out)


FUNCTION_HEAD = re.compile(r"\)\s*(const|override|final|noexcept|mutable|->[^;{]*|\s)*$|\)\s*:[^;]*[)}]\s*$")


def functions(path):
    """(lines, first line, head) of each function body in the file."""
    text = blank_comments_and_strings(path.read_text())
    stack, found, line, head_start = [], [], 1, 0
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            head = re.sub(r"\s+", " ", text[head_start:i]).strip()
            if any(kind == "function" for kind, _, _ in stack):
                kind = "block"
            elif re.search(r"\bnamespace\b[^;]*$", head) or head.endswith('extern "C"'):
                kind = "namespace"
            elif re.search(r"\b(class|struct|union|enum)\b[^;()]*$", head):
                kind = "class"
            elif FUNCTION_HEAD.search(head):
                kind = "function"
            else:
                kind = "block"
            stack.append((kind, line, head))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, first, head = stack.pop()
                if kind == "function":
                    found.append((line - first + 1, first, head))
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
    return found


def main():
    src = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "src"
    bad = 0
    for path in sorted(p for p in src.rglob("*") if p.suffix in (".cpp", ".hpp", ".cu", ".cuh", ".h")):
        rel = path.relative_to(src.parent)
        lines = path.read_text().count("\n")
        if lines > MAX_FILE_LINES:
            print(f"check_source_sizes: {rel}: {lines} lines (at most {MAX_FILE_LINES}: take a concept out into its own file)")
            bad += 1
        for n, first, head in functions(path):
            if n > MAX_FUNCTION_LINES:
                name = head[-100:].lstrip()
                print(f"check_source_sizes: {rel}:{first}: a function of {n} lines (at most {MAX_FUNCTION_LINES}): {name}")
                bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
