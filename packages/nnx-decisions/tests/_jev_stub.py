"""A local stand-in for the Jev service: an http.server on 127.0.0.1 in a thread.

Each request is recorded (path, headers, JSON body); replies come from a script of
``(status, body, headers)`` entries, else from ``answer(body)``, which answers every
question of the request deterministically. Never the network.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """A well-formed system_one reply: the first option gets 0.5, the rest share 0.5."""
    answers: dict[str, Any] = {}
    for name, q in body["questions"].items():
        if q["type"] == "noul":
            answers[name] = {"type": "noul", "noul": 0.75}
            continue
        keys = list(q["criteria"]) if q["type"] == "choice" else [
            str(i) for i in range(len(q["criteria"]))]
        rest = 0.5 / (len(keys) - 1)
        probabilities = {k: (0.5 if i == 0 else rest) for i, k in enumerate(keys)}
        if q["type"] == "choice":
            answers[name] = {"type": "choice", "choice": keys[0], "confidence": 0.8,
                             "probabilities": probabilities}
        else:
            answers[name] = {"type": "score", "score": 0.9, "confidence": 0.6,
                             "legend": dict(zip(keys, q["criteria"], strict=True)),
                             "probabilities": probabilities}
    return {"model": body.get("model") or "jev-test", "usage": {"input_tokens": 10,
                                                                 "output_tokens": 1},
            "answers": answers}


class JevStub:
    def __init__(self, reply: Callable[[dict[str, Any]], dict[str, Any]] = answer) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.script: list[tuple[int, Any, dict[str, str]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                stub.requests.append({"path": self.path, "body": body,
                                      "headers": dict(self.headers)})
                n = len(stub.requests)
                if stub.script:
                    status, payload, headers = stub.script.pop(0)
                else:
                    status, payload, headers = 200, stub.reply(body), {}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-typesafe-request-id", f"req-{n}")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> JevStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
