"""The OpenAI batch JSONL formats: request lines written, output and error lines read back.

A request line (one per window asked; the same format ``vllm run-batch`` reads)::

    {"custom_id": <record id>, "method": "POST", "url": "/v1/chat/completions", "body": {<chat body>}}

An output line (the batch's output file, or ``vllm run-batch``'s output)::

    {"id": ..., "custom_id": ..., "response": {"status_code": 200, "body": {<chat completion>}}, "error": null}

An error line (the batch's error file; some servers put them in the output file): ``"response"`` ``null`` or a
non-200 ``status_code``, and ``"error": {"code", "message"}``.

:func:`read_result` turns one line into a :class:`Result`: an answer (a
:class:`rcp_jax.judging.judge.Completion`, which the runner parses exactly as an online answer), a request that
got no answer (an error: the window goes into the next batch), or a line that cannot be read (malformed: named,
counted, and its window, when its ``custom_id`` can be read, goes into the next batch).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rcp_jax.judging.judge import Completion
from rcp_jax.judging.store.records import Usage
from rcp_jax.judging.transport.client import cached_prompt_tokens

#: The endpoint every request line names.
CHAT_URL = "/v1/chat/completions"
#: A reasoning block leading an answer's content, which litellm moves out of an online answer's content.
_LEADING_REASONING = re.compile(r"<(think|thinking|budget:thinking)>.*?</(?:think|thinking|budget:thinking)>(.*)",
                                re.DOTALL)
#: Words of an error meaning the provider's content filter refused the request (stored as a refusal, like online).
_FILTER_WORDS = ("content_filter", "content_policy", "content policy", "content management policy")


def request_line(custom_id: str, body: Mapping[str, Any]) -> bytes:
    """One request line (UTF-8 JSON and a newline) asking ``body`` under ``custom_id``."""
    line = {"custom_id": custom_id, "method": "POST", "url": CHAT_URL, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


@dataclass(frozen=True)
class Result:
    """One output or error line, read.

    Attributes
    ----------
    custom_id : the line's ``custom_id`` (``None`` when the line has none that can be read).
    completion : the answer (possibly an invalid or malformed one, parsed later like an online answer); ``None``
        when the request got no answer.
    error : why the request got no answer (``""`` when it got one).
    malformed : why the line itself cannot be read (``""`` for a readable line); its window is asked again.
    """

    custom_id: str | None
    completion: Completion | None = None
    error: str = ""
    malformed: str = ""


def _answer(body: Mapping[str, Any]) -> tuple[str, str | None, str]:
    """(text, finish reason, malformed description) of a chat-completion body, by the online judge's rules
    (:meth:`rcp_jax.judging.transport.client.LiteLLMJudge._answer_text`)."""
    choices = body.get("choices")
    if not choices or not isinstance(choices, list):
        return "", None, f"the reply's 'choices' was {'empty' if choices == [] else 'missing or null'}"
    choice = choices[0] if isinstance(choices[0], Mapping) else {}
    finish = choice.get("finish_reason")
    message = choice.get("message")
    if not isinstance(message, Mapping):
        return "", finish, "the reply's first choice has no message"
    content = message.get("content")
    if isinstance(content, str) and "reasoning_content" not in message and "reasoning" not in message:
        # the text an online call stores: litellm hands over a content led by a <think> block without the block
        lead = _LEADING_REASONING.match(content)
        if lead is not None:
            content = lead.group(2)
    if content is None:
        calls = message.get("tool_calls") or []
        args = [((c or {}).get("function") or {}).get("arguments") for c in calls if isinstance(c, Mapping)]
        args = [a for a in args if isinstance(a, str) and a]
        if args:
            return args[0], finish, ""
        if finish == "length":
            return "", finish, ""
        return "", finish, "the reply's message has content null and no tool calls"
    return str(content), finish, ""


def _error_text(obj: Mapping[str, Any], response: Any) -> str:
    err = obj.get("error")
    parts = []
    if isinstance(err, Mapping):
        parts.append(" ".join(str(err.get(k)) for k in ("code", "message") if err.get(k)))
    elif err:
        parts.append(str(err))
    if isinstance(response, Mapping):
        body = response.get("body")
        inner = body.get("error") if isinstance(body, Mapping) else None
        if isinstance(inner, Mapping):
            parts.append(" ".join(str(inner.get(k)) for k in ("code", "type", "message") if inner.get(k)))
        parts.append(f"HTTP {response.get('status_code')}")
    return "; ".join(p for p in parts if p) or "no response and no error given"


def read_result(raw: bytes | str, price: Callable[[int, int], float | None] | None = None) -> Result:
    """One output / error line as a :class:`Result` (never raises). ``price(prompt_tokens, completion_tokens)``
    prices the answer's usage (``None``: cost unknown)."""
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        return Result(None, malformed=f"not JSON ({exc})")
    if not isinstance(obj, Mapping):
        return Result(None, malformed="not a JSON object")
    cid = obj.get("custom_id")
    if not isinstance(cid, str) or not cid:
        return Result(None, malformed="no custom_id")
    response = obj.get("response")
    if response is not None and not isinstance(response, Mapping):
        return Result(cid, malformed="'response' is not an object")
    if response is None and not obj.get("error"):
        return Result(cid, malformed="neither a response nor an error")
    status = response.get("status_code") if response is not None else None
    body = response.get("body") if response is not None else None
    if response is None or status != 200:
        text = _error_text(obj, response)
        if any(w in text.lower() for w in _FILTER_WORDS):  # a refusal is an answer, as online
            return Result(cid, Completion(text="", finish_reason="content_filter", usage=Usage(0, 0, None)))
        return Result(cid, error=text)
    if not isinstance(body, Mapping):
        return Result(cid, malformed="a 200 response without a JSON body")
    text, finish, malformed = _answer(body)
    usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
    try:
        pt, ct = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    except (TypeError, ValueError):
        pt = ct = 0
    cost = price(pt, ct) if price is not None else None
    cached = min(cached_prompt_tokens(usage), pt)
    served, fingerprint = (body.get(k) if isinstance(body.get(k), str) and body.get(k).strip() else None
                           for k in ("model", "system_fingerprint"))
    return Result(cid, Completion(text=text, finish_reason=finish, usage=Usage(pt, ct, cost, cached),
                                  malformed=malformed, served_model=served, system_fingerprint=fingerprint))
