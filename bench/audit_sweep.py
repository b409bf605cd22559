#!/usr/bin/env python3
"""Admission latency before and during a background-audit sweep, as `make bench` measures it.

Standard library only. Three kinds of traffic, all HTTP/1.1 to 127.0.0.1:

  admission  --clients threads POST the same warm AdmissionReview to --admission URL in a loop
             (keep-alive, as the API server's webhook client), first for --before-secs alone,
             then for as long as the sweep lasts; a 30 s client time-out, the longest a
             webhook may be given.
  new image  during the sweep, one thread POSTs a Pod naming an image not asked before (the
             next line of --new-bodies) to the same URL every --new-every seconds.
  sweep      (a process of its own) the audit scanner (kubewarden-controller at 3460bb71,
             internal/audit-scanner/scanner/scanner.go): --parallel requests at once (its
             --parallel-resources, default 100), each on a new connection (it disables
             keep-alives), a 10 s client time-out (httpClientTimeout), every line of
             --sweep-bodies POSTed once to --audit URL; an answer is recorded as report.go
             does: HTTP error or time-out, or status.code 500: error; allowed: pass; else fail.

Prints one JSON object: before and during (admission: requests, errors, p50/p99/max ms),
new_image (requests, errors, p50/max ms), sweep (requests, seconds, pass, fail, error).
"""

import argparse
import http.client
import json
import multiprocessing
import queue
import threading
import time
import urllib.parse


def post(conn, path, body, timeout):
    """One POST on conn (reconnecting once if the server closed it); (ms, parsed body or None)."""
    start = time.monotonic()
    for attempt in (1, 2):
        try:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            ms = (time.monotonic() - start) * 1000
            if response.status != 200:
                return ms, None
            return ms, json.loads(data)
        except (ConnectionError, http.client.RemoteDisconnected, BrokenPipeError) as error:
            conn.close()
            if attempt == 2:
                return (time.monotonic() - start) * 1000, None
        except (OSError, ValueError):
            conn.close()
            return (time.monotonic() - start) * 1000, None
    return (time.monotonic() - start) * 1000, None


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def summary(latencies, errors):
    return {
        "requests": len(latencies) + errors,
        "errors": errors,
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": round(max(latencies), 2) if latencies else None,
    }


class Admission:
    """Clients that POST the warm body until told to stop; latencies per phase."""

    def __init__(self, url, body, clients):
        self.url, self.body, self.clients = url, body, clients
        self.phase = "before"
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.latencies = {"before": [], "during": []}
        self.errors = {"before": 0, "during": 0}

    def client(self):
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=30)
        while not self.stop.is_set():
            phase = self.phase
            ms, answer = post(conn, self.url.path, self.body, 30)
            ok = answer is not None and answer.get("response", {}).get("allowed") is True
            with self.lock:
                if ok:
                    self.latencies[phase].append(ms)
                else:
                    self.errors[phase] += 1

    def start(self):
        self.threads = [threading.Thread(target=self.client, daemon=True) for _ in range(self.clients)]
        for thread in self.threads:
            thread.start()

    def finish(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(35)


def sweep(url, bodies, parallel, results=None):
    """The audit scanner's sweep; returns its summary (and puts it on `results`, when run as a
    process of its own: its hundred threads would otherwise share the interpreter lock with
    the admission clients and slow the very latencies measured)."""
    work = queue.Queue()
    for body in bodies:
        work.put(body)
    counts = {"pass": 0, "fail": 0, "error": 0}
    lock = threading.Lock()

    def worker():
        while True:
            try:
                body = work.get_nowait()
            except queue.Empty:
                return
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            _, answer = post(conn, url.path, body, 10)
            conn.close()
            response = (answer or {}).get("response")
            if response is None or (response.get("status") or {}).get("code") == 500:
                result = "error"
            else:
                result = "pass" if response.get("allowed") else "fail"
            with lock:
                counts[result] += 1

    start = time.monotonic()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(parallel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    summary = {"requests": len(bodies), "seconds": round(time.monotonic() - start, 1), **counts}
    if results is not None:
        results.put(summary)
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admission", required=True, help="http://127.0.0.1:PORT/validate/ID")
    parser.add_argument("--warm-body", required=True)
    parser.add_argument("--new-bodies", required=True, help="JSON lines, one new image each")
    parser.add_argument("--audit", required=True, help="http://127.0.0.1:PORT/audit/ID")
    parser.add_argument("--sweep-bodies", required=True, help="JSON lines, one workload each")
    parser.add_argument("--parallel", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--before-secs", type=float, default=10)
    parser.add_argument("--new-every", type=float, default=2)
    args = parser.parse_args()
    admission_url = urllib.parse.urlsplit(args.admission)
    audit_url = urllib.parse.urlsplit(args.audit)
    for url in (admission_url, audit_url):
        if url.hostname != "127.0.0.1":
            parser.error("only 127.0.0.1 is contacted")
    warm = open(args.warm_body, "rb").read()
    new_bodies = [line.encode() for line in open(args.new_bodies) if line.strip()]
    sweep_bodies = [line.encode() for line in open(args.sweep_bodies) if line.strip()]

    admission = Admission(admission_url, warm, args.clients)
    admission.start()
    time.sleep(args.before_secs)
    admission.phase = "during"
    done = threading.Event()
    new_latencies, new_errors = [], 0

    def new_images():
        nonlocal new_errors
        conn = http.client.HTTPConnection(admission_url.hostname, admission_url.port, timeout=30)
        for body in new_bodies:
            if done.wait(args.new_every):
                return
            ms, answer = post(conn, admission_url.path, body, 30)
            if answer is not None and answer.get("response", {}).get("allowed") is True:
                new_latencies.append(ms)
            else:
                new_errors += 1

    newcomer = threading.Thread(target=new_images, daemon=True)
    newcomer.start()
    results = multiprocessing.Queue()
    sweeper = multiprocessing.Process(
        target=sweep, args=(audit_url, sweep_bodies, args.parallel, results)
    )
    sweeper.start()
    swept = results.get()
    sweeper.join()
    done.set()
    newcomer.join(35)
    admission.finish()
    print(json.dumps({
        "before": summary(admission.latencies["before"], admission.errors["before"]),
        "during": summary(admission.latencies["during"], admission.errors["during"]),
        "new_image": summary(new_latencies, new_errors),
        "sweep": swept,
    }))


if __name__ == "__main__":
    main()
