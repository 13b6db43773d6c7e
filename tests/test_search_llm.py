"""The llm proposer against a real HTTP server on 127.0.0.1 (stdlib http.server in a thread):
rule-derived completions, malformed answers, a timeout and HTTP errors -- the code path a
user runs against vLLM or a hosted model."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from leir_egraph import Program
from leir_egraph.egraph import single_steps
from leir_egraph.search import ChatClient, ChatError, Judge, LLMProposer, ReplayProposer, search
from leir_egraph.search.prompts import search_prompt
from leir_egraph.verify import Verifier

SIG = {"inputs": [{"name": "A", "dtype": "float32", "shape": [16, 32]}],
       "outputs": [{"name": "D", "dtype": "float32", "shape": [16]}]}
ROOT = "B^{16}_{tx=0}L^{32}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];"


class Scripted(BaseHTTPRequestHandler):
    """Answers each POST with the next scripted reply: ("ok", text) | ("status", code) |
    ("sleep", seconds) | ("garbage", body)."""
    script: list = []
    requests: list = []

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"body": body, "auth": self.headers.get("Authorization")})
        kind, value = type(self).script.pop(0) if type(self).script else ("status", 500)
        if kind == "sleep":
            time.sleep(value)
            kind, value = "ok", "<answer>{}</answer>"
        if kind == "status":
            self.send_response(value)
            self.end_headers()
            self.wfile.write(b'{"error": "scripted failure"}')
            return
        payload = (value.encode() if kind == "garbage" else json.dumps(
            {"choices": [{"message": {"role": "assistant", "content": value}}]}).encode())
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass   # the client that timed out closed the connection before the late reply


@pytest.fixture()
def server():
    Scripted.script, Scripted.requests = [], []
    httpd = QuietServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def root():
    return Program.parse(ROOT, SIG, "row_sum")


def answer_for(step) -> str:
    return (f"<think>{step.cot}</think><answer>" + json.dumps(
        {"transformed_IR": step.after.text, "applied_strategy": step.strategy}) + "</answer>")


def test_llm_search_over_http_with_failures_recorded(server, root, tmp_path, monkeypatch):
    monkeypatch.setenv("LEIR_LLM_API_KEY", "secret-key")
    reorder = single_steps(root, "loop_reorder")[0]
    Scripted.script = [
        ("status", 503),                                   # HTTP error
        ("garbage", "this is not json"),                   # malformed response body
        ("ok", "Sure! The answer is to reorder."),          # no <answer>
        ("sleep", 3.0),                                    # slower than the client timeout
        ("ok", answer_for(reorder)),                       # a rule-derived completion
    ]
    record = tmp_path / "recorded.jsonl"
    proposer = LLMProposer(ChatClient(server, "stepTP", timeout=1.0), record=record)
    with Verifier() as v:
        result = search(root, "chain", proposer, iterations=5,
                        judge=Judge(root, verifier=v, trials=1))
    reasons = [s.reason for s in result.samples]
    assert "HTTP 503" in reasons[0]
    assert "malformed response" in reasons[1]
    assert "no <answer> tag" in reasons[2]
    assert "no data for 1 s" in reasons[3] and "(--llm-timeout)" in reasons[3]
    assert result.samples[4].valid
    child = result.nodes[1]          # timing decides whether it is the best; not asserted
    assert child.strategy == "loop_reorder" and child.cot == reorder.cot
    first = Scripted.requests[0]
    assert first["auth"] == "Bearer secret-key"
    assert first["body"]["model"] == "stepTP"
    assert first["body"]["messages"][0]["content"] == "You are a helpful IR optimization assistant."
    prompt = first["body"]["messages"][1]["content"]
    assert prompt.startswith("Chain-based optimization is used on a given IR")
    assert f"Give the current IR of row_sum: '{ROOT}'" in prompt
    assert "**Task**:" in prompt and "CRITICAL" in prompt and "loop reorder" in prompt
    # a later prompt carries the failed attempt, and the recorded answers replay offline
    assert "FORBIDDEN" in Scripted.requests[-1]["body"]["messages"][1]["content"]
    replayed = ReplayProposer(record)
    with Verifier() as v:
        again = search(root, "chain", replayed, iterations=5,
                       judge=Judge(root, verifier=v, trials=1))
    assert [n.program.text for n in again.nodes] == [n.program.text for n in result.nodes]


def test_client_errors_are_one_line(server):
    client = ChatClient(server, "m", timeout=2.0, api_key="")
    Scripted.script = [("status", 401)]
    with pytest.raises(ChatError, match="HTTP 401"):
        client.complete("hi")
    assert Scripted.requests[-1]["auth"] is None
    closed = ChatClient("http://127.0.0.1:9/v1", "m", timeout=2.0)
    with pytest.raises(ChatError, match="request to .* failed"):
        closed.complete("hi")


def test_multi_answer_prompt_for_greedy(root):
    from leir_egraph.search.proposer import Request
    from leir_egraph.search.tree import Node
    node = Node(0, root, "k")
    prompt = search_prompt(Request(node, node, 2, "greedy", with_parent=True))
    assert prompt.startswith("Greedy-Search-based optimization")
    assert "at least 2 different **numerically equivalent, runtime-performance-optimized** IRs" \
        in prompt
    assert "'idx', 'transformed_IR', 'applied_strategy'" in prompt
