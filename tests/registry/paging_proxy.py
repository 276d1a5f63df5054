"""A loopback proxy in front of a real registry (tests/registry/server.py) that pages
`tags/list` at `page` tags, as Quay and Red Hat's registry page at 100: `?n=` is capped at
`page`, `?last=` is honoured, and the next page is announced in a `Link: <...>; rel="next"`
header (mode "link", Quay's way), or not at all (mode "silent": a registry that pages by
n/last without saying so). Mode "foreign" points the next page at another host, mode "loop"
back at the second page. Every other
request (manifests HEAD/GET/DELETE, /v2/) goes to the registry unchanged."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import requests

HOP_HEADERS = frozenset({"connection", "transfer-encoding", "content-length", "keep-alive"})


def _handler(upstream: str, page: int, mode: str) -> type[BaseHTTPRequestHandler]:
    class Paging(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _reply(self, code: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(code)
            for key, value in headers.items():
                if key.lower() not in HOP_HEADERS:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            r = requests.request(
                self.command, upstream + self.path, headers=headers, data=data, timeout=10
            )
            self._reply(r.status_code, dict(r.headers), r.content)

        def _tags(self, path: str, query: dict[str, list[str]]) -> None:
            r = requests.get(upstream + path, timeout=10)
            if r.status_code != 200:
                self._reply(r.status_code, dict(r.headers), r.content)
                return
            body = r.json()
            every = names = sorted(body.get("tags") or [])
            last = query.get("last", [""])[0]
            names = [n for n in names if n > last]
            n = min(int(query.get("n", [str(page)])[0]), page)
            shown, rest = names[:n], names[n:]
            headers = {"Content-Type": "application/json"}
            if rest and shown and mode != "silent":
                host = "127.0.0.1:1" if mode == "foreign" else self.headers["Host"]
                after = every[0] if mode == "loop" else shown[-1]
                nxt = urlencode({"n": n, "last": after})
                headers["Link"] = f'<http://{host}{path}?{nxt}>; rel="next"'
            out = {"name": body.get("name"), "tags": shown}
            self._reply(200, headers, json.dumps(out).encode())

        def _route(self) -> None:
            url = urlsplit(self.path)
            if self.command == "GET" and url.path.endswith("/tags/list"):
                self._tags(url.path, parse_qs(url.query))
            else:
                self._forward()

        do_GET = do_HEAD = do_DELETE = do_PUT = do_POST = _route

    return Paging


@contextmanager
def paging_proxy(upstream: str, *, page: int = 2, mode: str = "link") -> Iterator[str]:
    """Serve the proxy on 127.0.0.1 (a free port) in a thread; yields its HOST:PORT."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream, page, mode))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
