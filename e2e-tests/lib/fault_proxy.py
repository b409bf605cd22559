#!/usr/bin/env python3
"""A misbehaving registry (or a slow path to a real one) for the fault-injection tests.

Listens on 127.0.0.1 only, on a port the kernel picks (written to --port-file once
listening, so a caller never races for a port), and serves until it gets SIGTERM. Modes:

  delay        TCP proxy to --upstream HOST:PORT; every HTTP request the client sends (a
               chunk starting with a letter, as a request line does) is held --delay-ms
               before it is forwarded, i.e. each HTTP request costs that much extra. TLS
               records (first byte 0x14-0x17: the host's HTTPS probes of a plain-HTTP
               registry, which the registry refuses at once) pass undelayed, so the
               latency counts once per request, not once per probe.
  hang         accepts connections, reads what the client sends, never answers. With
               --listeners N, on N ports (N registries that never answer), all of them written
               to PORT-FILE.all, one a line, before the first is written to --port-file.
  reset        reads the request, then closes the connection with an RST.
  status       answers every request with --status (e.g. 500, 503, 429) and a registry
               style JSON error body (--error-code, default UNAVAILABLE or TOOMANYREQUESTS;
               --error-message; --error-detail);
               --retry-after S adds a Retry-After header.
  html         answers every request with --status (default 502) and an HTML body: an
               error that is not JSON (a proxy's or load balancer's page).
  notmanifest  answers 200 everywhere; the manifest is a JSON document that is no image
               manifest (and HEAD carries no Docker-Content-Digest).
  tls          HTTPS with --cert/--key (a certificate for another name), then 200s.
  bearer       --upstream behind anonymous token auth, as Docker Hub, GHCR and Quay ask for it:
               a request without a token it issued gets 401 with a Bearer challenge whose
               realm is its own /token, which hands out a token (300 s) to anyone; requests
               with one are passed to the upstream registry over HTTP and answered with its
               status, headers and body. Every answer waits --delay-ms first.
  hostile      a registry that tries to exhaust its client (--what):
                 manifest  200 to every manifest GET, a chunked body of --bytes (1 GiB)
                 error     404 with a chunked body of --bytes
                 header    a status line, then one header line that never ends
                 drip      200 with Content-Length 4096, one byte every 200 ms
                 redirect  307 to --location (e.g. the same path on another host)
                 realm     401 with a Bearer challenge whose realm is --location
                 unauthorized  401 with a Basic challenge and a chunked body of --bytes
                 token     401 with a Bearer challenge whose realm is its own /token, which
                           answers 200 with a chunked JSON token of --bytes
               with --cert/--key, over HTTPS; "{port}" in --location is its own port.

Only the standard library: it runs wherever python3 does.
"""

import argparse
import http.client
import json
import os
import secrets
import signal
import socket
import ssl
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def log(args, text):
    """One line per event on stderr (the tests keep it as the proxy's log)."""
    print(f"fault_proxy[{args.mode}]: {text}", file=sys.stderr, flush=True)


def listen():
    """A listening socket on a kernel-chosen loopback port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def announce(args, port):
    """Write the port atomically, so a reader never sees a partial number."""
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, args.port_file)
    log(args, f"listening on 127.0.0.1:{port}")


def pump(src, dst, delay):
    """Copy src to dst until EOF; each chunk starting an HTTP request waits `delay` s."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if delay and chr(data[0]).isalpha():
                time.sleep(delay)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve_tcp(args, handle, listeners=1):
    """Accept loops for the raw TCP modes, one per listening socket; one thread per
    connection."""
    servers = [listen() for _ in range(listeners)]
    args.port = servers[0].getsockname()[1]
    if listeners > 1:
        tmp = args.port_file + ".all.tmp"
        with open(tmp, "w") as f:
            f.writelines(f"{s.getsockname()[1]}\n" for s in servers)
        os.replace(tmp, args.port_file + ".all")
    announce(args, args.port)

    def accept(server):
        while True:
            conn, _ = server.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    for server in servers[1:]:
        threading.Thread(target=accept, args=(server,), daemon=True).start()
    accept(servers[0])


def run_delay(args):
    host, port = args.upstream.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost"):
        sys.exit("fault_proxy: --upstream must be on loopback")
    delay = args.delay_ms / 1000.0

    def handle(client):
        try:
            upstream = socket.create_connection((host, int(port)), timeout=10)
            upstream.settimeout(None)
        except OSError as e:
            log(args, f"upstream unreachable: {e}")
            client.close()
            return
        log(args, "connection")
        threading.Thread(target=pump, args=(upstream, client, 0), daemon=True).start()
        pump(client, upstream, delay)

    serve_tcp(args, handle)


held = []  # hang mode: connections kept open (and unanswered) until the process ends


def run_hang(args):
    def handle(conn):
        held.append(conn)
        log(args, "connection held, never answered")
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass

    serve_tcp(args, handle, args.listeners)


def run_reset(args):
    def handle(conn):
        conn.settimeout(2)
        try:
            conn.recv(65536)
        except OSError:
            pass
        # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
        log(args, "connection reset")

    serve_tcp(args, handle)


def run_hostile(args):
    """One answer per connection, written until the client gives up (or --bytes is sent)."""
    chunk = b"x" * 65536

    def flood(conn, head, prefix=b""):
        conn.sendall(head)
        if prefix:
            conn.sendall(b"%x\r\n%s\r\n" % (len(prefix), prefix))
        sent = 0
        while sent < args.bytes:
            conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        conn.sendall(b"0\r\n\r\n")

    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)

    def handle(conn):
        try:
            if context:
                conn = context.wrap_socket(conn, server_side=True)
            request = conn.recv(65536).decode("latin-1")
            method, path = (request.split(" ") + ["", ""])[:2]
            log(args, f"{method} {path}")
            what = args.what
            location = (args.location or "").replace("{port}", str(args.port)).encode()
            if what == "manifest":
                if method == "HEAD":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                                 b"Content-Type: application/vnd.oci.image.manifest.v1+json\r\n\r\n" % args.bytes)
                else:
                    flood(conn, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                b"Content-Type: application/vnd.oci.image.manifest.v1+json\r\n\r\n")
            elif what == "error":
                flood(conn, b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n"
                            b"Content-Type: application/json\r\n\r\n")
            elif what == "header":
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Flood: ")
                sent = 0
                while sent < args.bytes:
                    conn.sendall(chunk)
                    sent += len(chunk)
            elif what == "drip":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n"
                             b"Content-Type: application/vnd.oci.image.manifest.v1+json\r\n\r\n")
                for _ in range(4096):
                    time.sleep(0.2)
                    conn.sendall(b" ")
            elif what == "redirect":
                conn.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: %s%s\r\n"
                             b"Content-Length: 0\r\n\r\n" % (location, path.encode()))
            elif what == "realm":
                conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"%s\","
                             b"service=\"hostile\"\r\nContent-Length: 0\r\n\r\n" % location)
            elif what == "unauthorized":
                flood(conn, b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"hostile\"\r\n"
                            b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n")
            elif what == "token" and path.startswith("/token"):
                flood(conn, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                            b"Content-Type: application/json\r\n\r\n", prefix=b'{"token": "')
            elif what == "token":
                conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer "
                             b"realm=\"http://127.0.0.1:%d/token\",service=\"hostile\"\r\n"
                             b"Content-Length: 0\r\n\r\n" % args.port)
        except OSError as e:
            log(args, f"client gave up: {e}")
        finally:
            conn.close()

    serve_tcp(args, handle)


def http_handler(args):
    """The request handler of the HTTP modes (status, html, notmanifest, tls, bearer)."""
    issued, issued_lock = set(), threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "fault-proxy"
        # headers and body are two writes: without TCP_NODELAY the body waits for the
        # client's delayed ACK (40 ms on Linux), which no registry makes its clients wait
        disable_nagle_algorithm = True

        def log_message(self, fmt, *fargs):
            log(args, fmt % fargs)

        def answer(self, code, body, content_type, headers=()):
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def reply(self):
            mode = args.mode
            if mode == "status":
                headers = [("Retry-After", str(args.retry_after))] if args.retry_after else []
                code = args.error_code or ("TOOMANYREQUESTS" if args.status == 429 else "UNAVAILABLE")
                error = {"code": code,
                         "message": args.error_message or f"injected fault: status {args.status}"}
                if args.error_detail:
                    error["detail"] = args.error_detail
                body = json.dumps({"errors": [error]}).encode()
                self.answer(args.status, body, "application/json", headers)
            elif mode == "html":
                body = (b"<html><head><title>Bad Gateway</title></head><body>"
                        b"<h1>Bad Gateway</h1><p>upstream sent nothing usable</p></body></html>")
                self.answer(args.status or 502, body, "text/html")
            elif mode == "notmanifest" and "/manifests/" in self.path:
                body = json.dumps({"hello": "this is not an image manifest"}).encode()
                self.answer(200, body, "application/vnd.oci.image.manifest.v1+json")
            elif mode == "bearer":
                self.bearer()
            else:  # /v2/ of notmanifest, everything of tls
                self.answer(200, b"{}", "application/json")

        def bearer(self):
            """Anonymous token auth in front of --upstream (mode bearer), each answer after
            --delay-ms."""
            time.sleep(args.delay_ms / 1000)
            if self.path.startswith("/token"):
                token = secrets.token_hex(16)
                with issued_lock:
                    issued.add(token)
                body = json.dumps({"token": token, "access_token": token, "expires_in": 300}).encode()
                self.answer(200, body, "application/json")
                return
            given = self.headers.get("Authorization", "")
            with issued_lock:
                known = given.startswith("Bearer ") and given[len("Bearer "):] in issued
            if not known:
                port = self.server.server_address[1]
                name = self.path.split("/manifests/")[0].removeprefix("/v2/")
                scope = f',scope="repository:{name}:pull"' if "/manifests/" in self.path else ""
                challenge = f'Bearer realm="http://127.0.0.1:{port}/token",service="fault-proxy"{scope}'
                body = json.dumps({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}).encode()
                self.answer(401, body, "application/json", [("WWW-Authenticate", challenge)])
                return
            host, port = args.upstream.rsplit(":", 1)
            upstream = http.client.HTTPConnection(host, int(port), timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "range")}
            upstream.request(self.command, self.path, headers=headers)
            response = upstream.getresponse()
            body = response.read()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in ("connection", "keep-alive", "transfer-encoding", "date", "server"):
                    self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            upstream.close()

        do_GET = do_HEAD = do_POST = do_PUT = reply

    return Handler


def run_http(args):
    server = ThreadingHTTPServer(("127.0.0.1", 0), http_handler(args))
    server.daemon_threads = True
    if args.mode == "tls":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    announce(args, server.server_address[1])
    server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", required=True,
                        choices=["delay", "hang", "reset", "status", "html", "notmanifest", "tls", "hostile",
                                 "bearer"])
    parser.add_argument("--what", choices=["manifest", "error", "header", "drip", "redirect", "realm",
                                           "unauthorized", "token"],
                        help="hostile: how it misbehaves")
    parser.add_argument("--bytes", type=int, default=1 << 30, help="hostile: how much it sends")
    parser.add_argument("--location", help="hostile redirect/realm: the URL it names")
    parser.add_argument("--port-file", required=True, help="where to write the chosen port")
    parser.add_argument("--upstream", help="delay, bearer: HOST:PORT of the real registry")
    parser.add_argument("--delay-ms", type=int, default=0, help="delay, bearer: added to each request")
    parser.add_argument("--status", type=int, default=0)
    parser.add_argument("--retry-after", type=int, default=0)
    parser.add_argument("--error-code", help="status: the code in the JSON error body")
    parser.add_argument("--error-message", help="status: the message in the JSON error body")
    parser.add_argument("--error-detail", help="status: the detail in the JSON error body")
    parser.add_argument("--listeners", type=int, default=1, help="hang: how many ports")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    # SIGTERM ends the process at once, dropping held connections.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if args.mode == "delay":
        if not args.upstream:
            parser.error("--mode delay needs --upstream")
        run_delay(args)
    elif args.mode == "hang":
        run_hang(args)
    elif args.mode == "reset":
        run_reset(args)
    elif args.mode == "hostile":
        if not args.what or (args.what in ("redirect", "realm") and not args.location):
            parser.error("--mode hostile needs --what (and --location for redirect, realm)")
        run_hostile(args)
    else:
        if args.mode == "status" and not args.status:
            parser.error("--mode status needs --status")
        if args.mode == "tls" and not (args.cert and args.key):
            parser.error("--mode tls needs --cert and --key")
        if args.mode == "bearer" and not args.upstream:
            parser.error("--mode bearer needs --upstream")
        run_http(args)


if __name__ == "__main__":
    main()
