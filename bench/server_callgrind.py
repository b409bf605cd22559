#!/usr/bin/env python3
"""Per request, what the real policy-server executed for one module, from callgrind dumps.

bench/policy_server.sh (`server_profile`, section `profile` of `make bench`) runs
policy-server under `valgrind --tool=callgrind --cache-sim=yes`, sends N identical
requests to one module, and dumps the counters after each module's requests. Each dump
is read here: its totals, and the part spent in the WebAssembly code wasmtime compiled
(anonymous memory, callgrind's object `???`) apart from the server's own code (hyper,
tokio, wasmtime, the host capabilities). Instructions (Ir) and first-level
instruction-cache misses (I1mr) are the figures that do not move with the machine's
load: a fresh instance per request pays for every distinct line of code it runs.

Usage: server_callgrind.py REQUESTS DUMP...
Prints one JSON object per dump: {"label", "ir", "i1mr", "wasm_ir", "wasm_i1mr",
"server_ir", "server_i1mr"}, each per request.
"""

import json
import re
import sys

# `ob=(3) /lib/libc.so.6` names object 3; `ob=(3)` refers to it later (also cob=, jump=).
NAMED = re.compile(r"(c?ob|jump|jcnd)=\((\d+)\)(?: (.*))?$")


def read_dump(path):
    """(label, events, summary, costs by object): self costs, calls' inclusive costs left out."""
    label, events, summary = path, None, None
    names, current, after_call = {}, None, False
    costs = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:"):
                summary = [int(x) for x in line.split()[1:]]
            elif line.startswith("desc: Trigger:"):
                label = line.split("Trigger:", 1)[1].strip().removeprefix("dump ")
            elif (named := NAMED.match(line)) is not None:
                kind, number, name = named.groups()
                if name is not None:
                    names[number] = name
                if kind == "ob":
                    current = names.get(number, number)
            elif line.startswith("calls="):
                after_call = True
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                if after_call:  # the inclusive cost of the call just named
                    after_call = False
                    continue
                values = [int(x) for x in line.split()[1:]]
                total = costs.setdefault(current, [0] * len(events))
                for i, value in enumerate(values):
                    total[i] += value
    if events is None or summary is None:
        sys.exit(f"{path}: not a callgrind dump")
    return label, events, summary, costs


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    requests = int(sys.argv[1])
    for path in sys.argv[2:]:
        label, events, summary, costs = read_dump(path)
        ir, i1mr = events.index("Ir"), events.index("I1mr")
        wasm = costs.get("???", [0] * len(events))
        server = [sum(c[i] for o, c in costs.items() if o != "???") for i in range(len(events))]
        print(json.dumps({
            "label": label,
            "ir": summary[ir] // requests,
            "i1mr": summary[i1mr] // requests,
            "wasm_ir": wasm[ir] // requests,
            "wasm_i1mr": wasm[i1mr] // requests,
            "server_ir": server[ir] // requests,
            "server_i1mr": server[i1mr] // requests,
        }))


if __name__ == "__main__":
    main()
