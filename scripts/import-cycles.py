#!/usr/bin/env python3
"""Prints the import cycles of a Rust crate's src/ and fails on any, at two grains: between its
files, and between its top-level entries (each file counted as the folder or file directly
under src/ that holds it: `plan/admission.rs` is `plan/`, `credential_loop.rs` and
`credential_loop/` are one entry, `lib.rs` is itself). The second makes the order of the
folders a layering: no folder may reach one that reaches it back, even through files that form
no cycle among themselves.

A file depends on another when its production code (everything outside `#[cfg(test)]` items)
names a path into the other's module: `use crate::a::b`, `crate::a::f()`, `super::x`, or a
`mod` declaration's child naming its parent. Paths resolve to the longest module prefix that is
a file (`crate::credentials::Keyring`, re-exported by `credentials/mod.rs`, is that file). Test
code may reach anywhere: it is not part of the layering, whether an item under `#[cfg(test)]`
or a whole file declared so (`#[cfg(test)] mod tests;`), with the files below it.

With `--max-entries N`, also fails on a folder of a SRC_DIR that holds more than N entries
(files and folders): a floor of the layering that a reader must take in at once.

Usage: scripts/import-cycles.py [--max-entries N] [SRC_DIR ...]   (default: src). Exit 1 when
any SRC_DIR has a cycle or, with --max-entries, a folder over N entries.
"""

import pathlib
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")
# A module file declared only for tests: `#[cfg(test)]`, other attributes, `mod name;`.
TEST_MOD = re.compile(
    r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;"
)


def module_of(src: pathlib.Path, file: pathlib.Path) -> tuple:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_comments_and_strings(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'r(#*)".*?"\1', '""', text, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text, flags=re.S)


def without_test_items(text: str) -> str:
    """Drops every item that follows a `#[cfg(test)]` attribute (a block or a line)."""
    out, i = [], 0
    for match in re.finditer(r"#\[cfg\(test\)\]", text):
        if match.start() < i:
            continue
        out.append(text[i : match.start()])
        j = match.end()
        depth, started = 0, False
        while j < len(text):
            c = text[j]
            if c == "{":
                depth, started = depth + 1, True
            elif c == "}":
                depth -= 1
                if started and depth == 0:
                    j += 1
                    break
            elif c == ";" and not started:
                j += 1
                break
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def expand_use_groups(text: str) -> list:
    """`use crate::{a::b, c}` → ["crate::a::b", "crate::c"], recursively."""
    paths = []
    for match in re.finditer(r"\buse\s+((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{", text):
        prefix, j, depth = match.group(1), match.end(), 1
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        inner = text[match.end() : j - 1]
        paths.extend(expand_group(prefix, inner))
    return paths


def expand_group(prefix: str, inner: str) -> list:
    items, depth, start = [], 0, 0
    for k, c in enumerate(inner):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(inner[start:k])
            start = k + 1
    items.append(inner[start:])
    paths = []
    for item in (x.strip() for x in items):
        if not item:
            continue
        nested = re.match(r"^([A-Za-z_][A-Za-z0-9_:]*)::\{(.*)\}$", item, re.S)
        if nested:
            paths.extend(expand_group(f"{prefix}::{nested.group(1)}", nested.group(2)))
        else:
            name = re.split(r"\s+as\s+", item)[0].strip()
            paths.append(prefix if name == "self" else f"{prefix}::{name}")
    return paths


def resolve(path: str, here: tuple, modules: dict):
    parts = path.split("::")
    head, rest = parts[0], parts[1:]
    if head == "crate":
        base = ()
    elif head == "self":
        base = here
    else:  # super, possibly repeated
        base = here[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    full = base + tuple(rest)
    for n in range(len(full), -1, -1):
        if full[:n] in modules:
            return modules[full[:n]]
    return None


def file_graph(src: pathlib.Path) -> dict:
    """Each file of `src` to the files its production code names."""
    files = sorted(src.rglob("*.rs"))
    modules = {module_of(src, f): f for f in files}
    texts = {f: strip_comments_and_strings(f.read_text()) for f in files}
    tests = set()
    for file, text in texts.items():
        here = module_of(src, file)
        tests.update(here + (m.group(1),) for m in TEST_MOD.finditer(text))
    graph = {f: set() for f in files}
    for file in files:
        here = module_of(src, file)
        if any(here[: len(t)] == t for t in tests):
            continue
        text = without_test_items(texts[file])
        paths = expand_use_groups(text)
        paths += [m.group(1) + m.group(2) for m in PATH.finditer(text) if not m.group(2).endswith("{")]
        for path in paths:
            target = resolve(path, here, modules)
            # A module's own children are below it: a parent naming its child is a downward edge.
            if target and target != file:
                graph[file].add(target)
    # A `mod.rs` declares its children; a child naming its parent's items is the only upward
    # edge that can close a circle with it, which the graph already holds.
    return graph


def entry_of(src: pathlib.Path, file: pathlib.Path) -> str:
    """The top-level entry of src/ that holds `file`: `name/` for a folder (and for `name.rs`
    beside its folder `name/`), else the file's own name."""
    module = module_of(src, file)
    if not module:
        return file.name
    return f"{module[0]}/" if (src / module[0]).is_dir() else f"{module[0]}.rs"


def entry_graph(src: pathlib.Path, graph: dict) -> tuple:
    """The file graph collapsed to top-level entries, and for each edge between two entries
    the file edges that make it."""
    entries, because = {}, {}
    for file, targets in graph.items():
        a = entry_of(src, file)
        entries.setdefault(a, set())
        for target in targets:
            b = entry_of(src, target)
            entries.setdefault(b, set())
            if a != b:
                entries[a].add(b)
                because.setdefault((a, b), []).append((file, target))
    return entries, because


def check(src: pathlib.Path) -> int:
    graph = file_graph(src)
    failed = 0
    cycles = strongly_connected(graph)
    if not cycles:
        print(f"import-cycles: no cycle between the {plural(len(graph), 'file')} of {src}/")
    for component in cycles:
        failed = 1
        names = sorted(str(f.relative_to(src)) for f in component)
        print(f"import-cycles: {len(names)} files reach each other: {', '.join(names)}")
        for f in sorted(component):
            inside = sorted(str(t.relative_to(src)) for t in graph[f] if t in component)
            print(f"  {f.relative_to(src)} -> {', '.join(inside)}")
    entries, because = entry_graph(src, graph)
    cycles = strongly_connected(entries)
    if not cycles:
        print(f"import-cycles: no cycle between the {plural(len(entries), 'top-level entry')} of {src}/")
    for component in cycles:
        failed = 1
        names = sorted(component)
        print(f"import-cycles: {len(names)} top-level entries reach each other: {', '.join(names)}")
        for a in names:
            for b in sorted(t for t in entries[a] if t in component):
                edges = sorted(because[(a, b)])
                via = ", ".join(f"{f.relative_to(src)} -> {t.relative_to(src)}" for f, t in edges)
                print(f"  {a} -> {b}: {via}")
    return failed


def plural(n: int, noun: str) -> str:
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun[:-1]}ies" if noun.endswith("y") else f"{n} {noun}s"


def crowded(src: pathlib.Path, limit: int) -> int:
    """Prints each folder of `src` (itself included) holding more than `limit` entries."""
    failed = 0
    for folder in [src, *sorted(p for p in src.rglob("*") if p.is_dir())]:
        entries = [p for p in folder.iterdir() if p.is_dir() or p.suffix == ".rs"]
        if len(entries) > limit:
            failed = 1
            print(f"import-cycles: {folder}/ holds {len(entries)} entries, over {limit}")
    return failed


def main() -> int:
    args, limit = sys.argv[1:], None
    if args[:1] == ["--max-entries"] and len(args) > 1:
        limit, args = int(args[1]), args[2:]
    dirs = [pathlib.Path(d) for d in args] or [pathlib.Path("src")]
    failed = max(check(src) for src in dirs)
    if limit is not None:
        failed = max([failed] + [crowded(src, limit) for src in dirs])
    return failed


def strongly_connected(graph: dict) -> list:
    """Tarjan's algorithm; only components of two nodes or more (self-edges are dropped)."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
