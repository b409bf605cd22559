#!/usr/bin/env python3
"""The policy module's writable statics (`.data` after `WRITABLE_PAGE`, and `.bss`) span no
more 4 KiB pages than their size needs.

Why: a fresh instance reads each writable page before writing it, and the kernel then copies
the page and interrupts the policy server's other CPUs to flush their TLBs, once per page and
request. `WRITABLE_PAGE` (wasm/src/lib.rs) is a never-touched, page-aligned static placed first
among the writable statics so that the others start on a page boundary; a dependency linked
before it, or writable statics outgrowing a page, would bring the extra interrupt back
silently (bench/results/policy-server.md measured it: about 10 % of a
one-image request's CPU).

How: reads the sections' addresses from wasm-ld's map of the module, which `make policy.wasm`
writes beside the build (the Makefile's POLICY_MAP): the module checked is the one shipped.

Usage: python3 scripts/writable-page.py MAP, from the repository root (`make lint`, after
`make policy.wasm`).
"""
import re
import sys

PAGE = 4096


def sections(text):
    """{name: (address, size)} of the map's output sections."""
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[3] in (".rodata", ".data", ".bss"):
            found[fields[3]] = (int(fields[0], 16), int(fields[2], 16))
    return found


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: writable-page.py MAP (wasm-ld's map of the policy: make policy.wasm)")
    path = argv[1]
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as error:
        sys.exit(f"writable-page: cannot read the policy's map ({error}): `make policy.wasm` writes it")
    found = sections(text)
    if ".data" not in found or ".bss" not in found:
        sys.exit(f"writable-page: no .data or .bss section in {path}")
    data, data_size = found[".data"]
    bss, bss_size = found[".bss"]
    first = re.search(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S*\(\.data\.(\S+)\)", text,
                      re.MULTILINE)
    if not first or "WRITABLE_PAGE" not in first.group(3) or int(first.group(1), 16) != data:
        sys.exit("writable-page: WRITABLE_PAGE (wasm/src/lib.rs) is not the first writable static: "
                 f"{first.group(3) if first else 'none'} is")
    start = data + int(first.group(2), 16)
    end = bss + bss_size
    spanned = (end - 1) // PAGE - start // PAGE + 1
    needed = -(-(end - start) // PAGE)
    print(f"writable-page: .data {data:#x}+{data_size:#x}, .bss {bss:#x}+{bss_size:#x}; "
          f"the writable statics after WRITABLE_PAGE, {end - start} bytes from {start:#x}, "
          f"span {spanned} page(s)")
    if start % PAGE or spanned > needed:
        sys.exit(f"writable-page: they span {spanned} pages where {needed} would do")


if __name__ == "__main__":
    main(sys.argv)
