"""The litellm judge: any litellm model string, one endpoint or several, with our retry policy.

Transport policy (the only one: litellm's and the OpenAI SDK's own retries are set to 0):

- rate limits (429), server errors (5xx), timeouts and dropped connections are retried up to
  ``max_transport_retries`` times with exponential backoff and jitter (``Retry-After`` respected);
- authentication (401/403) and not-found (404) errors fail at once with :class:`JudgeAuthError` /
  :class:`JudgeNotFoundError`, naming the model and endpoint, never the key;
- a rejected request (400/422, e.g. the context is too long) fails at once with :class:`JudgeRequestError`;
- a content-filter refusal is not an error: it becomes an answer with ``finish_reason="content_filter"``
  that the parser records as ``refused``.

At most ``max_in_flight`` calls are open at once (an asyncio semaphore; ``None``: no cap beyond the
caller's own concurrency). Every answered call adds its tokens and cost to :attr:`LiteLLMJudge.ledger`.

Examples
--------
A hosted model (key from the provider's usual environment variable, e.g. ``OPENAI_API_KEY``)::

    judge = LiteLLMJudge("openai/gpt-4o-mini")

A vLLM / SGLang server, or any OpenAI-compatible endpoint::

    judge = LiteLLMJudge("hosted_vllm/Qwen/Qwen3-32B", api_base="http://gpu1:8000/v1")

Several servers of the same model, load spread by litellm's Router::

    judge = LiteLLMJudge("hosted_vllm/Qwen/Qwen3-32B",
                         endpoints=["http://gpu1:8000/v1", "http://gpu2:8000/v1"])
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Mapping, Sequence
from typing import Any

from judging.errors import (
    JudgeAuthError,
    JudgeError,
    JudgeNotFoundError,
    JudgeRequestError,
    JudgeTransportError,
)
from judging.judge import DEFAULT_MAX_WINDOW_CHARS, BaseJudge, Completion, JudgeRequest
from judging.records import Usage
from judging.redact import redact
from judging.render import PromptTemplate
from judging.schema import response_format

log = logging.getLogger("judging.client")

STRUCTURED_MODES = ("auto", "json_schema", "json_object", "off")
_ROUTER_GROUP = "rcp-judge"
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")


def _env_secrets() -> list[str]:
    """Values of environment variables that look like credentials (redacted from every message)."""
    markers = ("KEY", "TOKEN", "SECRET", "PASSWORD")
    return [v for k, v in os.environ.items() if any(m in k.upper() for m in markers) and len(v) >= 8]


class _RedactFilter(logging.Filter):
    """Rewrites litellm's log records so no configured key can appear in a log line."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = list(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is passed through untouched
            return True
        clean = redact(message, self.secrets)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def _import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm  # noqa: PLC0415 - deliberately lazy: `import judging` must stay cheap

    litellm.suppress_debug_info = True
    return litellm


class LiteLLMJudge(BaseJudge):
    """A judge answering through ``litellm.acompletion`` (or a litellm ``Router`` over several endpoints).

    Parameters
    ----------
    model : litellm model string, e.g. ``"openai/gpt-4o-mini"``, ``"hosted_vllm/<name>"``,
        ``"ollama_chat/<name>"``, ``"anthropic/<name>"``.
    api_base : the endpoint URL (OpenAI-compatible servers: ``http://host:port/v1``); ``None`` uses
        the provider's default.
    api_key : the key; ``None`` lets litellm read the provider's environment variable. Never stored,
        logged or shown.
    endpoints : several endpoints serving the same model: URLs, or mappings with ``api_base`` and
        optional ``api_key`` / ``model``. Calls are spread over them by a litellm ``Router``.
    temperature, max_tokens, top_p, seed : decoding settings (part of the judge family).
    extra_params : more keyword arguments for ``acompletion`` (e.g. ``{"reasoning_effort": "low"}``);
        part of the family.
    structured_output : ``"auto"`` (a JSON schema when litellm knows the model supports one, else
        nothing), ``"json_schema"``, ``"json_object"`` or ``"off"``.
    timeout : seconds per call before it counts as a timeout (retried).
    max_in_flight : cap on open calls across every caller of this judge; ``None``: no cap.
    max_transport_retries : retries of one call on 429 / 5xx / timeouts before :class:`JudgeTransportError`.
    backoff_base, backoff_max : seconds; the n-th retry waits ``min(backoff_max, backoff_base * 2**n)``
        times a jitter factor in [0.5, 1] (or the server's ``Retry-After``, when longer).
    input_cost_per_token, output_cost_per_token : USD prices overriding litellm's cost map (e.g. 0.0
        for a self-hosted server); without them, cost comes from litellm's map or is unknown (``None``).
    prompts, max_window_chars : see :class:`judging.judge.BaseJudge`.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        endpoints: Sequence[str | Mapping[str, Any]] | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = 4096,
        top_p: float | None = None,
        seed: int | None = None,
        extra_params: Mapping[str, Any] | None = None,
        structured_output: str = "auto",
        timeout: float = 120.0,
        max_in_flight: int | None = None,
        max_transport_retries: int = 6,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        input_cost_per_token: float | None = None,
        output_cost_per_token: float | None = None,
        prompts: Mapping[str, PromptTemplate | str] | None = None,
        max_window_chars: int | None = DEFAULT_MAX_WINDOW_CHARS,
    ) -> None:
        super().__init__(model, prompts=prompts, max_window_chars=max_window_chars)
        if structured_output not in STRUCTURED_MODES:
            raise JudgeError(f"structured_output must be one of {STRUCTURED_MODES}, got {structured_output!r}")
        if endpoints is not None and api_base is not None:
            raise JudgeError("give either api_base (one endpoint) or endpoints (several), not both")
        if (input_cost_per_token is None) != (output_cost_per_token is None):
            raise JudgeError("give both input_cost_per_token and output_cost_per_token, or neither")
        self.api_base = api_base
        self.__api_key = api_key
        self._endpoints = [self._endpoint(e) for e in endpoints] if endpoints else []
        if endpoints is not None and not self._endpoints:
            raise JudgeError("endpoints is empty; give at least one endpoint URL")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.top_p = top_p
        self.seed = seed
        self.extra_params = dict(extra_params or {})
        self._structured_request = structured_output
        self._structured: str | None = None
        self.timeout = float(timeout)
        self.max_in_flight = max_in_flight
        self._sems: dict[int, asyncio.Semaphore] = {}  # one per event loop (sync callers run several)
        self.max_transport_retries = int(max_transport_retries)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.input_cost_per_token = input_cost_per_token
        self.output_cost_per_token = output_cost_per_token
        self._litellm: Any = None
        self._router: Any = None
        self._cost_unknown = False

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (for worker processes): the litellm module, Router and semaphores are rebuilt there."""
        state = dict(self.__dict__)
        state.update(_litellm=None, _router=None, _sems={})
        return state

    def prepare(self) -> None:
        """Import litellm and resolve the structured-output mode now rather than on the first call."""
        self._ensure_litellm()
        self.structured_mode()

    def __repr__(self) -> str:
        return f"LiteLLMJudge(model={self.model!r}, endpoint={self.endpoint_label!r})"

    # -- configuration --------------------------------------------------------------------------------

    def _endpoint(self, e: str | Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(e, str):
            return {"api_base": e, "api_key": None, "model": self.model}
        if "api_base" not in e:
            raise JudgeError(f"an endpoint mapping needs an 'api_base' (got keys {sorted(e)})")
        return {"api_base": e["api_base"], "api_key": e.get("api_key"), "model": e.get("model", self.model)}

    @property
    def endpoint_label(self) -> str:
        """The endpoint(s) named in messages (URLs only, never keys)."""
        if self._endpoints:
            return ", ".join(str(e["api_base"]) for e in self._endpoints)
        return self.api_base or "the provider's default endpoint"

    def _secrets(self) -> list[str]:
        keys = [self.__api_key] + [e["api_key"] for e in self._endpoints]
        return [k for k in keys if k] + _env_secrets()

    def structured_mode(self) -> str:
        """The resolved structured-output mode (``"auto"`` asks litellm whether the model supports a schema)."""
        if self._structured is None:
            mode = self._structured_request
            if mode == "auto":
                litellm = self._ensure_litellm()
                try:
                    supported = bool(litellm.supports_response_schema(model=self.model))
                except Exception:  # noqa: BLE001 - unknown models simply get no schema
                    supported = False
                mode = "json_schema" if supported else "off"
            self._structured = mode
        return self._structured

    def decoding(self) -> dict[str, Any]:
        return {
            **super().decoding(),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "seed": self.seed,
            "structured_output": self.structured_mode(),
            "extra": dict(sorted(self.extra_params.items())),
        }

    def _ensure_litellm(self) -> Any:
        if self._litellm is None:
            litellm = _import_litellm()
            flt = _RedactFilter(self._secrets())
            for name in _LITELLM_LOGGERS:
                lg = logging.getLogger(name)
                lg.filters = [f for f in lg.filters if not isinstance(f, _RedactFilter)]
                lg.addFilter(flt)
            self._litellm = litellm
        return self._litellm

    def _ensure_router(self) -> Any:
        if self._router is None:
            litellm = self._ensure_litellm()
            model_list = []
            for e in self._endpoints:
                params = {"model": e["model"], "api_base": e["api_base"], "max_retries": 0}
                if e["api_key"] or self.__api_key:
                    params["api_key"] = e["api_key"] or self.__api_key
                model_list.append({"model_name": _ROUTER_GROUP, "litellm_params": params})
            self._router = litellm.Router(
                model_list=model_list,
                num_retries=0,
                max_fallbacks=0,
                disable_cooldowns=True,
                timeout=self.timeout,
                routing_strategy="simple-shuffle",
            )
        return self._router

    # -- one call -------------------------------------------------------------------------------------

    def _kwargs(self, request: JudgeRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "messages": [dict(m) for m in request.rendered.messages],
            "timeout": self.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        if self.max_tokens is not None:
            kw["max_tokens"] = self.max_tokens
        if self.top_p is not None:
            kw["top_p"] = self.top_p
        if self.seed is not None:
            kw["seed"] = self.seed
        rf = response_format(
            request.window.stage, request.rendered.positional, request.rendered.n_criteria, self.structured_mode()
        )
        if rf is not None:
            kw["response_format"] = rf
        if self.input_cost_per_token is not None:
            # litellm's own cost bookkeeping then skips its (slow, failing) model-map lookups
            kw["input_cost_per_token"] = self.input_cost_per_token
            kw["output_cost_per_token"] = self.output_cost_per_token
        kw.update(self.extra_params)
        return kw

    def _semaphore(self) -> asyncio.Semaphore | None:
        if not self.max_in_flight:
            return None
        key = id(asyncio.get_running_loop())
        if key not in self._sems:
            self._sems = {key: asyncio.Semaphore(self.max_in_flight)}
        return self._sems[key]

    async def _call(self, kw: dict[str, Any]) -> Any:
        litellm = self._ensure_litellm()
        if self._endpoints:
            return await self._ensure_router().acompletion(model=_ROUTER_GROUP, **kw)
        if self.api_base is not None:
            kw["api_base"] = self.api_base
        if self.__api_key is not None:
            kw["api_key"] = self.__api_key
        return await litellm.acompletion(model=self.model, **kw)

    def _classify(self, exc: BaseException) -> str:
        litellm = self._ensure_litellm()
        if isinstance(exc, litellm.ContextWindowExceededError):
            return "context"
        if isinstance(exc, litellm.ContentPolicyViolationError):
            return "content_filter"
        if isinstance(exc, asyncio.TimeoutError | litellm.Timeout):
            return "retry"
        status = getattr(exc, "status_code", None)
        if status in (401, 403):
            return "auth"
        if status == 404:
            return "not_found"
        if status in (408, 409, 425, 429) or (isinstance(status, int) and status >= 500):
            return "retry"
        if isinstance(exc, litellm.APIConnectionError):
            return "retry"
        if status in (400, 413, 422):
            return "request"
        return "other"

    def _retry_after(self, exc: BaseException) -> float | None:
        headers = getattr(exc, "litellm_response_headers", None)
        if headers is None:
            headers = getattr(getattr(exc, "response", None), "headers", None)
        try:
            value = headers.get("retry-after") if headers is not None else None
            return float(value) if value is not None else None
        except (TypeError, ValueError, AttributeError):
            return None

    def _backoff(self, retry: int, exc: BaseException) -> float:
        delay = min(self.backoff_max, self.backoff_base * 2.0**retry) * random.uniform(0.5, 1.0)
        after = self._retry_after(exc)
        if after is not None:
            delay = max(delay, min(after, self.backoff_max))
        return delay

    def _error(self, kind: str, exc: BaseException, request: JudgeRequest, retries: int) -> JudgeError:
        where = f"judge model {self.model!r} at {self.endpoint_label}"
        window = request.window.label
        status = getattr(exc, "status_code", None)
        upstream = redact(str(getattr(exc, "message", "") or exc), self._secrets())[:300]
        said = f" The endpoint said: {upstream}" if upstream else ""
        if kind == "auth":
            return JudgeAuthError(
                f"{where} refused the credentials (HTTP {status}) while judging window {window}. Check the API "
                "key given as api_key= or in the provider's environment variable (e.g. OPENAI_API_KEY) and that "
                f"it may use this model; the key itself is never shown.{said}"
            )
        if kind == "not_found":
            return JudgeNotFoundError(
                f"{where} does not serve this model (HTTP {status}) for window {window}. Check the model name "
                f"(litellm form 'provider/model') and the api_base (OpenAI-compatible servers end in /v1).{said}"
            )
        if kind == "context":
            return JudgeRequestError(
                f"{where}: window {window} does not fit the model's context. Lower max_window_chars "
                f"(now {self.max_window_chars}) or the window size.{said}"
            )
        if kind == "request":
            return JudgeRequestError(
                f"{where} rejected the request for window {window} (HTTP {status}). Check extra_params, "
                f"max_tokens and structured_output (now {self.structured_mode()!r}).{said}"
            )
        if kind == "retry":
            return JudgeTransportError(
                f"{where}: window {window} still failing after {retries} retries ({type(exc).__name__}, HTTP "
                f"{status}). The server is overloaded or down; lower concurrency or raise max_transport_retries, "
                f"then re-run: stored answers are kept.{said}"
            )
        return JudgeError(f"{where}: unexpected {type(exc).__name__} for window {window}.{said}")

    def _usage(self, resp: Any) -> Usage:
        u = getattr(resp, "usage", None)
        pt = int(getattr(u, "prompt_tokens", 0) or 0)
        ct = int(getattr(u, "completion_tokens", 0) or 0)
        return Usage(pt, ct, self.price(pt, ct, resp))

    def price(self, prompt_tokens: int, completion_tokens: int, resp: Any = None) -> float | None:
        """USD cost of a call: custom prices, else litellm's cost map; ``None`` when the model is unpriced."""
        if self.input_cost_per_token is not None and self.output_cost_per_token is not None:
            return prompt_tokens * self.input_cost_per_token + completion_tokens * self.output_cost_per_token
        if self._cost_unknown:
            return None
        litellm = self._ensure_litellm()
        hidden = getattr(resp, "_hidden_params", None) or {}
        if isinstance(hidden, Mapping) and hidden.get("response_cost") is not None:
            return float(hidden["response_cost"])
        try:
            p, c = litellm.cost_per_token(
                model=self.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
            return float(p) + float(c)
        except Exception:  # noqa: BLE001 - litellm raises several kinds for unmapped models
            self._cost_unknown = True
            return None

    async def complete(self, request: JudgeRequest) -> Completion:
        """One answer for ``request``, retried on transport failures as described in the module docstring."""
        kw = self._kwargs(request)
        retries = 0
        while True:
            error: JudgeError | None = None
            delay = 0.0
            try:
                sem = self._semaphore()
                if sem is not None:
                    async with sem:
                        resp = await self._call(dict(kw))
                else:
                    resp = await self._call(dict(kw))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below, never swallowed
                kind = self._classify(exc)
                if kind == "content_filter":
                    usage = Usage(0, 0, None)
                    self.ledger.add(usage, retries)
                    return Completion(text="", finish_reason="content_filter", usage=usage, transport_retries=retries)
                if kind == "retry" and retries < self.max_transport_retries:
                    delay = self._backoff(retries, exc)
                    log.warning(
                        "window %s: %s from %s (HTTP %s); retry %d/%d in %.2fs",
                        request.window.label,
                        type(exc).__name__,
                        self.endpoint_label,
                        getattr(exc, "status_code", None),
                        retries + 1,
                        self.max_transport_retries,
                        delay,
                    )
                else:
                    self.ledger.failed_calls += 1
                    error = self._error(kind, exc, request, retries)
                del exc
            else:
                choice = resp.choices[0]
                text = getattr(choice.message, "content", None) or ""
                usage = self._usage(resp)
                self.ledger.add(usage, retries)
                return Completion(
                    text=text, finish_reason=getattr(choice, "finish_reason", None), usage=usage, transport_retries=retries
                )
            if error is not None:
                raise error  # outside the except block: the provider's exception is not chained
            retries += 1
            await asyncio.sleep(delay)

    # -- estimation hooks -----------------------------------------------------------------------------

    def count_tokens(self, messages: Sequence[Mapping[str, str]]) -> tuple[int, str]:
        """Prompt tokens of ``messages`` and how they were counted (tokenizer, or chars/4 if unknown)."""
        litellm = self._ensure_litellm()
        if not self.model_known():
            return sum(len(m["content"]) for m in messages) // 4, "chars/4 (model not in litellm's map)"
        return int(litellm.token_counter(model=self.model, messages=list(messages))), "litellm.token_counter"

    def model_known(self) -> bool:
        """Whether litellm's (local) model map knows this model."""
        litellm = self._ensure_litellm()
        try:
            litellm.get_model_info(model=self.model)
        except Exception:  # noqa: BLE001
            return False
        return True
