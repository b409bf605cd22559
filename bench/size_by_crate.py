#!/usr/bin/env python3
"""Code size of a wasm module by crate, from its name section: `make bench`'s size table.

Usage: size_by_crate.py MODULE.wasm [TOP]. The module must keep its name section (the raw cargo
build does; for the shipped size run `wasm-opt -Os -g`, which optimises the same way and keeps
names). Each function body's size goes to the crate its symbol belongs to: the first path segment
of a Rust symbol (legacy `_ZN…` or v0 `_R…` mangling, or already demangled), the self type's crate
for `<T as Trait>::f` impls; symbols that are not Rust (libc, the wasm runtime) count as `[other]`.
Prints a markdown table, largest first, the rest summed in one line.
"""
import re
import sys


def leb(data, i):
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def name_of(data, i):
    n, i = leb(data, i)
    return data[i:i + n].decode("utf-8", "replace"), i + n


def sections(data):
    i = 8
    while i < len(data):
        sid = data[i]
        size, i = leb(data, i + 1)
        yield sid, data[i:i + size]
        i += size


def imported_functions(payload):
    count, i = leb(payload, 0)
    funcs = 0
    for _ in range(count):
        _, i = name_of(payload, i)
        _, i = name_of(payload, i)
        kind = payload[i]
        i += 1
        if kind == 0:  # function: type index
            _, i = leb(payload, i)
            funcs += 1
        elif kind == 1:  # table: reftype, limits
            i += 1
            flags, i = leb(payload, i)
            _, i = leb(payload, i)
            if flags & 1:
                _, i = leb(payload, i)
        elif kind == 2:  # memory: limits
            flags, i = leb(payload, i)
            _, i = leb(payload, i)
            if flags & 1:
                _, i = leb(payload, i)
        elif kind == 3:  # global: valtype, mutability
            i += 2
        else:
            raise ValueError(f"unknown import kind {kind}")
    return funcs


def body_sizes(payload):
    count, i = leb(payload, 0)
    sizes = []
    for _ in range(count):
        size, j = leb(payload, i)
        sizes.append(size + (j - i))
        i = j + size
    return sizes


def function_names(payload):
    names, i = {}, len("name") + 1
    while i < len(payload):
        sub = payload[i]
        size, i = leb(payload, i + 1)
        if sub == 1:
            count, j = leb(payload, i)
            for _ in range(count):
                idx, j = leb(payload, j)
                names[idx], j = name_of(payload, j)
        i += size
    return names


LEGACY = re.compile(r"^_?_ZN(\d+)")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def crate_of(symbol):
    m = LEGACY.match(symbol)
    if m:
        n = int(m.group(1))
        first = symbol[m.end():m.end() + n]
        rest = symbol[m.end():]
        drop = re.match(r"4core3ptr\d+drop_in_place\$LT\$(?:\$RF\$|\$BP\$)*(?:mut\$u20\$|dyn\$u20\$)?", rest)
        if first == "core" and drop:  # drop glue: the dropped type's crate
            inner = IDENT.match(rest[drop.end():])
            if inner and len(inner.group(0)) > 1:
                return inner.group(0)
        if first.startswith("_$LT$"):  # <Type as Trait>::f: the type's crate, else the trait's
            inner = first[len("_$LT$"):]
            while inner.startswith(("$RF$", "$BP$", "mut$u20$", "dyn$u20$")):
                inner = inner.split("$", 2)[-1] if inner.startswith("$") else inner.split("$u20$", 1)[1]
            ident = IDENT.match(inner)
            if ident and len(ident.group(0)) > 1 and ".." in inner.split("$u20$as$u20$")[0]:
                return ident.group(0)
            if "$u20$as$u20$" in first:
                return IDENT.match(first.split("$u20$as$u20$", 1)[1]).group(0)
            return ident.group(0) if ident else "[other]"
        return first or "[other]"
    if symbol.startswith("_R"):  # v0: the crate is the first identifier after its disambiguator
        m = re.search(r"C(?:s[0-9a-zA-Z]*_)?(\d+)", symbol)
        if m:
            start = m.end()
            return symbol[start:start + int(m.group(1))]
    text = symbol.lstrip("<&")
    text = text[len("dyn "):] if text.startswith("dyn ") else text
    if "::" in text:
        m = IDENT.match(text)
        if m:
            return m.group(0)
    return "[other]"


def main():
    data = open(sys.argv[1], "rb").read()
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    imports, sizes, names = 0, [], {}
    for sid, payload in sections(data):
        if sid == 2:
            imports = imported_functions(payload)
        elif sid == 10:
            sizes = body_sizes(payload)
        elif sid == 0 and payload[1:5] == b"name":
            names = function_names(payload)
    if not names:
        sys.exit(f"{sys.argv[1]}: no name section")
    by_crate = {}
    for k, size in enumerate(sizes):
        crate = crate_of(names.get(imports + k, ""))
        by_crate[crate] = by_crate.get(crate, 0) + size
    total = sum(sizes)
    ranked = sorted(by_crate.items(), key=lambda kv: -kv[1])
    print("| crate | code bytes | share |")
    print("|---|---:|---:|")
    for crate, size in ranked[:top]:
        print(f"| {crate} | {size} | {100 * size / total:.1f} % |")
    rest = ranked[top:]
    if rest:
        print(f"| {len(rest)} others | {sum(s for _, s in rest)} | {100 * sum(s for _, s in rest) / total:.1f} % |")
    print(f"| all code (of {len(data)} bytes in the module) | {total} | 100 % |")


if __name__ == "__main__":
    main()
