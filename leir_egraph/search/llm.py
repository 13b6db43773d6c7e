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
from pathlib import Path

from .answers import AnswerError, parse_answer
from .prompts import SYSTEM_PROMPT, search_prompt
from .proposer import Request
from .tree import Proposal

KEY_VARIABLES = ("LEIR_LLM_API_KEY", "OPENAI_API_KEY")


class ChatError(RuntimeError):
    """A chat request that produced no answer text; the message says why."""


class ChatClient:
    """A minimal OpenAI-compatible chat-completions client."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 timeout: float = 120.0, temperature: float = 0.3,
                 max_tokens: int | None = None, system: str = SYSTEM_PROMPT):
        import httpx
        self.base_url = base_url.rstrip("/")
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.system = system
        key = api_key if api_key is not None else next(
            (os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(timeout=timeout, headers=headers)

    def close(self):
        self._http.close()

    def complete(self, prompt: str, n: int = 1, temperature: float | None = None) -> list[str]:
        """The ``n`` answer texts of one user message."""
        import httpx
        body = {"model": self.model, "n": n,
                "temperature": self.temperature if temperature is None else temperature,
                "messages": [{"role": "system", "content": self.system},
                             {"role": "user", "content": prompt}]}
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        url = f"{self.base_url}/chat/completions"
        try:
            response = self._http.post(url, json=body)
        except httpx.TimeoutException:
            raise ChatError(f"timed out after {self._http.timeout.read} s waiting for {url}") from None
        except httpx.HTTPError as err:
            raise ChatError(f"request to {url} failed: {type(err).__name__}: {err}") from None
        if response.status_code != 200:
            detail = response.text.strip().replace("\n", " ")[:200]
            raise ChatError(f"HTTP {response.status_code} from {url}: {detail}")
        try:
            choices = response.json()["choices"]
            texts = [c["message"]["content"] for c in choices]
        except (ValueError, KeyError, TypeError) as err:
            raise ChatError(f"malformed response from {url}: {type(err).__name__}: {err}") from None
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ChatError(f"response from {url} has no answer text")
        return texts


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
