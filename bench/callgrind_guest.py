#!/usr/bin/env python3
"""Names the guest's compiled code in a callgrind profile of test-host.

Wasmtime's compiled guest code is anonymous memory to callgrind (`???:0x…`). Run
test-host with POLICY_HOST_PERF_MAP=1 and wasmtime writes /tmp/perf-PID.map,
one `START SIZE NAME` line per compiled function; this joins the two and prints,
per guest function, the events callgrind recorded (self cost), sorted by the
event given, with the guest's totals first (docs/performance.md; its first use:
bench/results/guest-instructions.md).

Run callgrind with --dump-instr=yes --compress-pos=no: the costs are then read per
instruction address and each address is named by the map. Without it, callgrind's own
notion of a function (code entered by a call) is used, and for compiled guest code it
is wrong: much of a guest's cost lands on the trampoline that entered it (on
2026-12-04, 1.3M of a large settings document's 2.4M instructions).

Usage: callgrind_guest.py CALLGRIND_OUT PERF_MAP [EVENT] [ROWS]
  EVENT: a callgrind event name (Ir, I1mr, ILmr, ...; default I1mr)
  ROWS:  how many functions to print (default 30)
"""

import bisect
import re
import subprocess
import sys


def read_map(path):
    """(starts, entries): the perf map's functions, sorted by start address."""
    entries = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split(" ", 2)
            if len(parts) == 3:
                entries.append((int(parts[0], 16), int(parts[1], 16), parts[2]))
    entries.sort()
    return [e[0] for e in entries], entries


def name_of(address, starts, entries):
    i = bisect.bisect_right(starts, address) - 1
    if i >= 0 and address < entries[i][0] + entries[i][1]:
        return entries[i][2], entries[i][1]
    return None, 0


def add(per_function, name, size, values):
    """Adds one cost line's `values` to function `name` (its size first, then the events).
    Callgrind leaves out a line's trailing zero events, so lines differ in length."""
    total = per_function.setdefault(name, [size])
    total.extend([0] * (len(values) + 1 - len(total)))
    for k, v in enumerate(values):
        total[k + 1] += v


def per_address(out, starts, entries):
    """(events, per_function) from a profile written with --dump-instr=yes
    --compress-pos=no, or None when it was not: every cost line's address named by the map.
    The line after a `calls=` line is the call's inclusive cost, not the caller's own."""
    events, per_function, positions, after_call = None, {}, None, False
    with open(out, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("positions:"):
                positions = line.split()[1:]
            elif line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("calls="):
                after_call = True
            elif line[:2] == "0x" and positions and positions[0] == "instr":
                cells = line.split()
                if after_call:
                    after_call = False
                    continue
                name, size = name_of(int(cells[0], 16), starts, entries)
                if name is None:
                    continue
                values = [int(v) for v in cells[len(positions):]]
                add(per_function, name, size, values)
    if positions is None or positions[0] != "instr":
        return None
    return events, per_function


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out, perf_map = argv[1], argv[2]
    event = argv[3] if len(argv) > 3 else "I1mr"
    rows_wanted = int(argv[4]) if len(argv) > 4 else 30
    starts, entries = read_map(perf_map)
    read = per_address(out, starts, entries)
    if read is None:
        print("(no --dump-instr=yes --compress-pos=no: callgrind's functions, which charge "
              "guest code to the trampoline that entered it)", file=sys.stderr)
        events, per_function = per_function_of(out, event, starts, entries)
    else:
        events, per_function = read
    report(events, per_function, event, rows_wanted)


def per_function_of(out, event, starts, entries):
    """(events, per_function) by callgrind_annotate's functions."""
    text = subprocess.run(
        ["callgrind_annotate", f"--sort={event}", out],
        capture_output=True, text=True, check=True,
    ).stdout
    events = None
    per_function = {}
    for line in text.splitlines():
        if line.startswith("Events shown:"):
            events = line.split(":", 1)[1].split()
            continue
        match = re.search(r"\?\?\?:0x([0-9a-f]+)", line)
        if not match or events is None:
            continue
        # a cell is "N (P%)", or "0" or "." for nothing
        prefix = line[: line.index("???:")]
        cells = re.findall(r"[\d,]+ \(\s*[\d.]+%\)|(?:(?<=\s)|^)(?:0|\.)(?=\s|$)", prefix)
        values = [int(c.split(" ")[0].replace(",", "")) if c != "." else 0 for c in cells]
        if len(values) != len(events):
            sys.exit(f"cannot read the events of: {line}")
        name, size = name_of(int(match.group(1), 16), starts, entries)
        if name is None:
            continue
        add(per_function, name, size, values)
    if events is None:
        sys.exit(f"{out}: no events in callgrind_annotate's output")
    return events, per_function


def report(events, per_function, event, rows_wanted):
    """The guest's totals, then the functions by `event`."""
    for v in per_function.values():
        v.extend([0] * (len(events) + 1 - len(v)))
    column = events.index(event)
    sums = [sum(v[k + 1] for v in per_function.values()) for k in range(len(events))]
    print("guest code, all functions: " + ", ".join(f"{e} {s:,}" for e, s in zip(events, sums)))
    print(f"{event:>10} {'Ir':>10} {'size (B)':>9}  function")
    ordered = sorted(per_function.items(), key=lambda kv: kv[1][column + 1], reverse=True)
    for name, v in ordered[:rows_wanted]:
        ir = v[events.index("Ir") + 1] if "Ir" in events else 0
        print(f"{v[column + 1]:>10,} {ir:>10,} {v[0]:>9,}  {name}")


if __name__ == "__main__":
    main(sys.argv)
