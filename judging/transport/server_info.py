"""What an OpenAI-compatible server says about itself: context length and parallel slots.

Used to size a run before its first call (never required: a server that reports nothing, or cannot be
reached in ``timeout`` seconds, gives an empty :class:`ServerInfo` and the run goes ahead):

- llama.cpp's ``llama-server``: ``GET <root>/props`` -> ``default_generation_settings.n_ctx`` (or a top-level
  ``n_ctx``) is the context of one slot, ``total_slots`` the requests it generates at once;
- vLLM (and SGLang versions that report it): ``GET <api_base>/models`` -> ``data[i].max_model_len``;
- llama-cpp-python (``python -m llama_cpp.server``): no ``/props``; its ``GET <api_base>/models`` lists
  models ``owned_by: "me"`` with a ``permissions`` list, and it answers one request at a time (one model
  behind a lock), so it is reported as 1 slot: more calls in flight only queue inside it;
- others (Ollama's OpenAI endpoint, hosted APIs): nothing.

``<root>`` is ``api_base`` without its trailing ``/v1``.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("rcp_jax.judging.transport.server_info")


@dataclass(frozen=True)
class ServerInfo:
    """What the server reported (``None``: not reported).

    Attributes
    ----------
    context : tokens of context one request can use (prompt + answer).
    slots : requests the server generates at once (llama.cpp's ``total_slots``); more are queued inside it.
    source : where the numbers came from, e.g. ``"GET http://h:8080/props"``; ``""`` when nothing was reported.
    """

    context: int | None = None
    slots: int | None = None
    source: str = ""


def _get_json(url: str, timeout: float) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's own endpoint
        return json.loads(resp.read(1_000_000).decode("utf-8", "replace"))


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _from_props(props: Any) -> tuple[int | None, int | None]:
    if not isinstance(props, Mapping):
        return None, None
    settings = props.get("default_generation_settings")
    n_ctx = _positive_int(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    n_ctx = n_ctx or _positive_int(props.get("n_ctx"))
    return n_ctx, _positive_int(props.get("total_slots"))


def _from_models(listing: Any, model: str | None) -> int | None:
    data = listing.get("data") if isinstance(listing, Mapping) else None
    if not isinstance(data, Sequence) or not data:
        return None
    entries = [e for e in data if isinstance(e, Mapping)]
    name = model.split("/", 1)[1] if model and "/" in model else model
    chosen = [e for e in entries if e.get("id") in (model, name)] or entries[:1]
    return _positive_int(chosen[0].get("max_model_len")) if chosen else None


#: What llama-cpp-python's model listing looks like (its server answers one request at a time).
LLAMA_CPP_PYTHON = "llama-cpp-python"


def _is_llama_cpp_python(listing: Any) -> bool:
    """Whether a ``/models`` listing is llama-cpp-python's: every model ``owned_by: "me"`` with a ``permissions`` list."""
    data = listing.get("data") if isinstance(listing, Mapping) else None
    if not isinstance(data, Sequence) or not data:
        return False
    return all(isinstance(e, Mapping) and e.get("owned_by") == "me" and isinstance(e.get("permissions"), list)
               for e in data)


def probe_server(api_base: str | None, model: str | None = None, *, timeout: float = 3.0) -> ServerInfo:
    """Ask the server at ``api_base`` for its context length and slots (see the module docstring).

    Never raises: an unreachable server, an error status or an unexpected body gives what was found so far.
    ``model`` (the litellm string; its provider prefix is dropped) picks the entry of ``/models``.
    """
    if not api_base:
        return ServerInfo()
    base = api_base.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    context = slots = None
    sources = []
    try:
        context, slots = _from_props(_get_json(f"{root}/props", timeout))
        if context or slots:
            sources.append(f"GET {root}/props")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.debug("no /props at %s (%s)", root, exc)
    if context is None or slots is None:
        try:
            listing = _get_json(f"{base}/models", timeout)
            found = _from_models(listing, model) if context is None else None
            if slots is None and _is_llama_cpp_python(listing):
                slots = 1
                sources.append(f"GET {base}/models: {LLAMA_CPP_PYTHON}, which answers one request at a time")
            elif found:
                sources.append(f"GET {base}/models")
            context = context or found
        except (urllib.error.URLError, OSError, ValueError) as exc:
            log.debug("no model listing at %s (%s)", base, exc)
    return ServerInfo(context=context, slots=slots, source=", ".join(sources))


def context_warning(info: ServerInfo, prompt_tokens: int, max_tokens: int | None, *, window: str = "") -> str | None:
    """A warning when a window's prompt plus ``max_tokens`` cannot fit ``info.context`` (else ``None``).

    ``prompt_tokens`` is the largest prompt of the run (an estimate when no tokenizer is known).
    """
    if info.context is None:
        return None
    answer = max_tokens or 0
    if prompt_tokens + answer <= info.context:
        return None
    where = f" (window {window})" if window else ""
    room = info.context - prompt_tokens
    if room <= 0:
        return (f"the largest prompt{where} is about {prompt_tokens:,} tokens but the server's context is "
                f"{info.context:,} tokens ({info.source}): it cannot fit at all. Start the server with a larger "
                "context (llama.cpp -c, vLLM --max-model-len) or judge smaller windows / shorter documents")
    return (f"the largest prompt{where} is about {prompt_tokens:,} tokens and --max-tokens is {answer:,}, more than "
            f"the server's context of {info.context:,} tokens ({info.source}): answers may be cut off (llama.cpp) or "
            f"every request refused (vLLM). Use --max-tokens {max(room - room // 10, 1):,} or less, or start the "
            "server with a larger context")
