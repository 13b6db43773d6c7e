"""The ``llm`` proposer: any OpenAI-compatible chat-completions endpoint (vLLM, a hosted model).

``ChatClient`` is a real HTTP client (httpx): ``POST {base_url}/chat/completions`` with the
model name, the messages, the temperature and ``n``; the API key comes from the environment
(``LEIR_LLM_API_KEY``, else ``OPENAI_API_KEY``; none is sent when neither is set). HTTP
errors, timeouts, connection failures and malformed responses raise ``ChatError`` with one
line saying what happened; ``LLMProposer`` turns them, and answers without a usable
``<answer>`` JSON, into failed samples.

    proposer = LLMProposer(ChatClient("http://127.0.0.1:8000/v1", "qwen3-stepTP"))
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

from .answers import AnswerError, parse_answer
from .budgets import DEADLINE, MAX_RESPONSE_BYTES, READ_TIMEOUT
from .prompts import SYSTEM_PROMPT, search_prompt
from .proposer import Request
from .tree import Proposal

KEY_VARIABLES = ("LEIR_LLM_API_KEY", "OPENAI_API_KEY")


class ChatError(RuntimeError):
    """A chat request that produced no answer text; the message says why."""




class ChatClient:
    """A minimal OpenAI-compatible chat-completions client, bounded three ways per request:
    ``timeout`` seconds without a byte (connect or read), ``deadline`` seconds in all (a
    server that trickles its answer a byte at a time is cut off), and ``max_bytes`` of
    response body (read as a stream, never buffered beyond it). Each bound that is hit is a
    ``ChatError`` saying which."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 timeout: float = READ_TIMEOUT, temperature: float = 0.3,
                 max_tokens: int | None = None, system: str = SYSTEM_PROMPT,
                 deadline: float = DEADLINE, max_bytes: int = MAX_RESPONSE_BYTES):
        import httpx
        self.base_url = base_url.rstrip("/")
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.system = system
        self.timeout, self.deadline, self.max_bytes = timeout, deadline, max_bytes
        key = api_key if api_key is not None else next(
            (os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(timeout=min(timeout, deadline), headers=self._headers)

    def close(self):
        self._http.close()

    def complete(self, prompt: str, n: int = 1, temperature: float | None = None) -> list[str]:
        """The ``n`` answer texts of one user message."""
        body = {"model": self.model, "n": n,
                "temperature": self.temperature if temperature is None else temperature,
                "messages": [{"role": "system", "content": self.system},
                             {"role": "user", "content": prompt}]}
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        url = f"{self.base_url}/chat/completions"
        status, data = self._post(url, body)
        if status != 200:
            detail = data[:400].decode("utf-8", "replace").strip().replace("\n", " ")[:200]
            raise ChatError(f"HTTP {status} from {url}: {detail}")
        from ..outside import OutsideInputError, json_value
        try:
            choices = json_value(data, "response")["choices"]
            texts = [c["message"]["content"] for c in choices]
        except OutsideInputError as err:
            raise ChatError(f"malformed response from {url}: {err}") from None
        except (KeyError, TypeError, IndexError) as err:
            raise ChatError(f"malformed response from {url}: {type(err).__name__}: {err}") \
                from None
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ChatError(f"response from {url} has no answer text")
        return texts

    def _post(self, url: str, body: dict) -> tuple[int, bytes]:
        """``(status, body bytes)`` of one POST within the deadline and the byte cap. The
        request runs in a helper thread: a server that never finishes its headers is cut off
        too (the thread's connection is closed, and it stops at its next read)."""
        outcome: dict[str, object] = {}
        done = threading.Event()
        give_up = time.monotonic() + self.deadline

        def work():
            try:
                outcome["value"] = self._read(url, body, give_up)
            except BaseException as err:  # noqa: BLE001 -- handed to the caller's thread
                outcome["error"] = err
            finally:
                done.set()

        threading.Thread(target=work, name="leir-llm-request", daemon=True).start()
        if not done.wait(self.deadline):
            self._abandon()
            raise ChatError(f"no complete answer from {url} within {self.deadline:g} s "
                            "(--llm-deadline)")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    def _read(self, url: str, body: dict, give_up: float) -> tuple[int, bytes]:
        import httpx
        try:
            with self._http.stream("POST", url, json=body) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise ChatError(f"response from {url} is larger than "
                                        f"{self.max_bytes} bytes (--llm-max-bytes)")
                    if time.monotonic() > give_up:
                        raise ChatError(f"no complete answer from {url} within "
                                        f"{self.deadline:g} s (--llm-deadline)")
                    chunks.append(chunk)
                return response.status_code, b"".join(chunks)
        except httpx.TimeoutException:
            raise ChatError(f"no data for {self.timeout:g} s from {url} "
                            "(--llm-timeout)") from None
        except httpx.HTTPError as err:
            raise ChatError(f"request to {url} failed: {type(err).__name__}: {err}") from None

    def _abandon(self) -> None:
        """Drop the connection of a request past its deadline (its thread ends at its next
        read) and start a fresh connection pool for the next request."""
        import httpx
        stale, self._http = self._http, httpx.Client(
            timeout=min(self.timeout, self.deadline), headers=self._headers)
        try:
            stale.close()
        except Exception:  # noqa: BLE001 -- closing under a reading thread may complain
            pass


_THINK = re.compile(r"<think>(.*?)(</think>|<\\think>)", re.S)


def cot_of(answer: str) -> str:
    m = _THINK.search(answer or "")
    return m.group(1).strip() if m else ""


def proposals_from_answer(answer: str, k: int) -> list[Proposal]:
    """The candidates in one answer text (at most ``k``), or one failed proposal saying why."""
    try:
        pairs = parse_answer(answer)
    except AnswerError as err:
        return [Proposal(None, raw=answer, error=f"unparsable answer: {err}")]
    cot = cot_of(answer)
    return [Proposal(ir, strategy, cot, raw=answer) for ir, strategy in pairs[:max(k, 1)]]


class LLMProposer:
    """Asks a served model with the paper's search prompt; ``record`` appends every answer
    to a JSONL file that ``ReplayProposer`` reads back."""

    def __init__(self, client: ChatClient, *, hardware: str = "cpu", cores: int = 2,
                 record: str | Path | None = None):
        self.client, self.hardware, self.cores = client, hardware, cores
        self.record = Path(record) if record else None
        self.name = f"llm:{client.model}"
        if self.record is not None:
            check_record_file(self.record)

    def propose(self, request: Request) -> list[Proposal]:
        prompt = search_prompt(request, cores=self.cores)
        try:
            answer = self.client.complete(prompt)[0]
        except ChatError as err:
            return [Proposal(None, error=f"llm: {err}")]
        if self.record is not None:
            with open(self.record, "a") as f:
                f.write(json.dumps({"current": request.node.program.text,
                                    "answer": answer}) + "\n")
        return proposals_from_answer(answer, request.k)


def check_record_file(path: Path) -> None:
    """Refuse a ``--record`` path that cannot take answers before any request is paid for
    (a folder, a missing folder, no permission): ``OSError`` naming it."""
    if path.is_dir():
        raise IsADirectoryError(21, "is a folder, not a file", str(path))
    with open(path, "a"):
        pass
