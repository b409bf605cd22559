#!/usr/bin/env python3
"""Load driver of measure-lookups.sh: measures one running policy server.

    measure_lookups.py URL ACCEPT_URL TEMPLATE HEALTHY_REG SILENT_REG DELAYED_REG RESULT_JSON

URL is the server's validate endpoint (http://127.0.0.1:PORT/validate/POLICY), ACCEPT_URL
that of a policy accepting everything without a host call; TEMPLATE an
AdmissionReview of a Pod whose containers are replaced by one container per request. The
phases, in this order (the silent phase last: a stock server may stay wedged after it):

  warm      the healthy image, a few times, so it is cached by the server
  baseline  H healthy requests from C clients at once, nothing else going on
  cold      for each of K new tags: the tag through the delaying proxy (a registry already
            seen, a 50 ms delay per HTTP request) and the same tag directly; the difference,
            divided by the delay, is the number of delayed round trips of a cold lookup
  silent    M requests naming an image of the silent registry, at once; 0.2 s later the same
            healthy load as the baseline, for at most WINDOW seconds
  flood     F requests naming F other images of the silent registry, at once (more than the
            server's workers); 0.2 s later H requests to accept-all from C clients, for at
            most WINDOW seconds

Environment: M, F, C, H, K, DELAY_MS, WINDOW, CLIENT_TIMEOUT (see measure-lookups.sh).
Only the standard library.
"""

import copy
import json
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
import os

URL, ACCEPT_URL, TEMPLATE, HEALTHY, SILENT, DELAYED, RESULT = sys.argv[1:8]
M = int(os.environ.get("M", "2"))
F = int(os.environ.get("F", "6"))
C = int(os.environ.get("C", "2"))
H = int(os.environ.get("H", "40"))
K = int(os.environ.get("K", "5"))
DELAY_MS = int(os.environ.get("DELAY_MS", "50"))
WINDOW = float(os.environ.get("WINDOW", "20"))
CLIENT_TIMEOUT = float(os.environ.get("CLIENT_TIMEOUT", "15"))

with open(TEMPLATE) as f:
    template = json.load(f)


def review(image, n):
    body = copy.deepcopy(template)
    req = body["request"]
    req["uid"] = f"measure-{n}-{time.monotonic_ns()}"
    spec = req["object"]["spec"]
    spec.pop("initContainers", None)
    spec.pop("ephemeralContainers", None)
    spec.pop("imagePullSecrets", None)
    spec["containers"] = [{"name": "app", "image": image}]
    return json.dumps(body).encode()


counter = 0
counter_lock = threading.Lock()


def call(image, url=URL):
    """One request: (seconds, outcome dict)."""
    global counter
    with counter_lock:
        counter += 1
        n = counter
    data = review(image, n)
    started = time.monotonic()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=CLIENT_TIMEOUT) as resp:
            status = resp.status
            body = json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        status, body = e.code, {}
    except Exception as e:  # time-out, connection refused
        return time.monotonic() - started, {"error": type(e).__name__}
    elapsed = time.monotonic() - started
    answer = body.get("response", {})
    return elapsed, {
        "http": status,
        "allowed": answer.get("allowed"),
        "code": (answer.get("status") or {}).get("code"),
        "message": (answer.get("status") or {}).get("message"),
        "warnings": answer.get("warnings") or [],
    }


def healthy_load(deadline=None, url=URL):
    """H requests for the healthy (cached) image from C clients; returns the latencies of
    those that answered allowed without a warning, and the others' outcomes."""
    latencies, failures = [], []
    todo = list(range(H))
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                if not todo or (deadline and time.monotonic() > deadline):
                    return
                todo.pop()
            elapsed, outcome = call(HEALTHY, url)
            with lock:
                if outcome.get("allowed") is True and not outcome.get("warnings"):
                    latencies.append(elapsed)
                else:
                    failures.append(outcome)

    threads = [threading.Thread(target=client) for _ in range(C)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, failures


def summary(latencies):
    if not latencies:
        return None
    q = sorted(latencies)
    return {
        "n": len(q),
        "p50_ms": round(statistics.median(q) * 1000, 1),
        "p90_ms": round(q[int(0.9 * (len(q) - 1))] * 1000, 1),
        "max_ms": round(q[-1] * 1000, 1),
    }


result = {"M": M, "C": C, "H": H, "K": K, "delay_ms": DELAY_MS}

for _ in range(3):
    call(HEALTHY)

lat, fail = healthy_load()
result["baseline"] = {"healthy": summary(lat), "failed": len(fail), "failures": fail[:3]}
print(f"  baseline: healthy {result['baseline']['healthy']}, {len(fail)} failed", flush=True)

registry = HEALTHY.split("/", 1)[0]
repo_tag = HEALTHY.split("/", 1)[1]
repo = repo_tag.rsplit(":", 1)[0]
# one request through the proxy first: the proxy's registry is then "already seen"
call(f"{DELAYED}/{repo}:v0")
cold = []
for i in range(1, K + 1):
    tag = f"{repo}:v{i}"
    t_proxy, o_proxy = call(f"{DELAYED}/{tag}")
    t_direct, o_direct = call(f"{registry}/{tag}")
    trips = (t_proxy - t_direct) * 1000 / DELAY_MS
    cold.append({"tag": tag, "proxy_ms": round(t_proxy * 1000, 1),
                 "direct_ms": round(t_direct * 1000, 1), "delayed_round_trips": round(trips, 2),
                 "proxy_allowed": o_proxy.get("allowed"), "proxy_warnings": o_proxy.get("warnings"),
                 "proxy_error": o_proxy.get("error")})
result["cold"] = {
    "lookups": cold,
    "median_delayed_round_trips": round(statistics.median(c["delayed_round_trips"] for c in cold), 2),
    "median_proxy_ms": round(statistics.median(c["proxy_ms"] for c in cold), 1),
}
print(f"  cold lookup through a {DELAY_MS} ms proxy: median {result['cold']['median_proxy_ms']} ms, "
      f"{result['cold']['median_delayed_round_trips']} delayed round trips", flush=True)

def silent_phase(count, image, url):
    """count requests for image(i) at once, and 0.2 s later the healthy load on url."""
    silent = [None] * count
    start = time.monotonic()

    def silent_client(i):
        elapsed, outcome = call(image(i))
        silent[i] = {"elapsed_s": round(elapsed, 3), "ended_at_s": round(time.monotonic() - start, 3), **outcome}

    threads = [threading.Thread(target=silent_client, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    lat, fail = healthy_load(deadline=time.monotonic() + WINDOW, url=url)
    for t in threads:
        t.join()
    ends = [s["ended_at_s"] for s in silent]
    return {
        "healthy": summary(lat),
        "healthy_failed": len(fail),
        "healthy_failures": fail[:3],
        "healthy_not_sent": H - len(lat) - len(fail),
        "requests": silent,
        "spread_s": round(max(ends) - min(ends), 3),
    }


result["silent"] = silent_phase(M, lambda i: f"{SILENT}/team/hidden:1", URL)
print(f"  with {M} requests on the silent registry: healthy {result['silent']['healthy']}, "
      f"{result['silent']['healthy_failed']} failed, {result['silent']['healthy_not_sent']} not sent in {WINDOW} s", flush=True)
for s in result["silent"]["requests"]:
    print(f"    silent request: {json.dumps(s)[:300]}", flush=True)

result["flood"] = silent_phase(F, lambda i: f"{SILENT}/team/flood-{i}:1", ACCEPT_URL)
print(f"  with {F} requests on {F} silent images: accept-all {result['flood']['healthy']}, "
      f"{result['flood']['healthy_failed']} failed, {result['flood']['healthy_not_sent']} not sent in {WINDOW} s", flush=True)

with open(RESULT, "w") as f:
    json.dump(result, f, indent=1)
