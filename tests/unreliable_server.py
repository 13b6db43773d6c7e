"""A chat-completions server on 127.0.0.1 that misbehaves on purpose, one way per request: the
failure modes of issue 37 (a server that trickles its answer or its headers a byte at a time,
an endless or huge body, silence, HTTP errors, garbage, JSON nested 200,000 deep, answers that
are too large, unparsable or unsound). Raw sockets, so that every byte on the wire is chosen.

    with UnreliableServer(lambda n: "drip") as url:   # url: http://127.0.0.1:PORT/v1
        ChatClient(url, "m", deadline=2).complete("hi")

Used by tests/test_hardening.py and benchmarks/soak.py.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from typing import Callable

MODES = ("ok", "drip", "drip_headers", "endless", "huge", "silent", "close", "status_500",
         "status_429", "garbage", "deep", "no_answer", "big_answer", "unsound")


def completion(content: str) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant",
                                                "content": content}}]}).encode()


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock: socket.socket = self.request
        sock.settimeout(30)
        try:
            self._read_request(sock)
            server = self.server
            with server.lock:
                n = server.count
                server.count += 1
            mode = server.choose(n)
            server.modes.append(mode)
            getattr(self, "_" + mode)(sock, server)
        except OSError:   # the client gave up (its deadline or byte cap): expected
            pass

    @staticmethod
    def _read_request(sock):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError
            body += chunk

    @staticmethod
    def _send(sock, status: int, body: bytes, reason: str = "OK"):
        sock.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)

    def _ok(self, sock, server):
        self._send(sock, 200, completion(server.answer))

    def _drip(self, sock, server):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000000\r\n\r\n")
        while not server.stopping.is_set():
            sock.sendall(b" ")
            time.sleep(0.2)

    def _drip_headers(self, sock, server):
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100000:
            if server.stopping.is_set():
                return
            sock.sendall(bytes([byte]))
            time.sleep(0.2)

    def _endless(self, sock, server):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (1 << 16, b"x" * (1 << 16))
        while not server.stopping.is_set():
            sock.sendall(chunk)

    def _huge(self, sock, server):
        size = 1 << 30
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % size)
        block = b"[" * (1 << 16)
        for _ in range(size >> 16):
            if server.stopping.is_set():
                return
            sock.sendall(block)

    def _silent(self, sock, server):
        server.stopping.wait(60)

    def _close(self, sock, server):
        sock.shutdown(socket.SHUT_RDWR)

    def _status_500(self, sock, server):
        self._send(sock, 500, b'{"error": "scripted failure"}', "Internal Server Error")

    def _status_429(self, sock, server):
        self._send(sock, 429, b'{"error": "rate limited"}', "Too Many Requests")

    def _garbage(self, sock, server):
        self._send(sock, 200, b"<html>this is not json</html>")

    def _deep(self, sock, server):
        self._send(sock, 200, b"[" * 200000 + b"]" * 200000)

    def _no_answer(self, sock, server):
        self._send(sock, 200, completion("Sure! I would reorder the loops."))

    def _big_answer(self, sock, server):
        ir = "B^{4}_{tx=0}[C^{f32,g}_{tx}=" + "+".join(["A^{f32,g}_{tx}"] * 200000) + ";];"
        self._send(sock, 200, completion("<answer>" + json.dumps(
            {"transformed_IR": ir, "applied_strategy": "loop_split"}) + "</answer>"))

    def _unsound(self, sock, server):
        self._send(sock, 200, completion("<answer>" + json.dumps(
            {"transformed_IR": server.unsound, "applied_strategy": "loop_reorder"})
            + "</answer>"))


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass


class UnreliableServer:
    """A context manager serving on 127.0.0.1; ``choose(n)`` names the mode of request ``n``
    (0-based); ``answer`` is the content of an ``ok`` reply, ``unsound`` the LEIR of an
    ``unsound`` one. ``modes`` lists the modes served, in order."""

    def __init__(self, choose: Callable[[int], str], answer: str = "<answer>{}</answer>",
                 unsound: str = ""):
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.choose, self._server.answer = choose, answer
        self._server.unsound = unsound
        self._server.count, self._server.modes = 0, []
        self._server.lock, self._server.stopping = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def modes(self) -> list[str]:
        return self._server.modes

    def __enter__(self) -> str:
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __exit__(self, *exc):
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()
