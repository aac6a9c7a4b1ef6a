"""The litellm judge: any litellm model string, one endpoint or several, with our retry policy.

Transport policy (the only one: litellm's and the OpenAI SDK's own retries are set to 0):

- every call has a total deadline of ``timeout`` seconds, from connecting to the last byte of the answer
  (an asyncio deadline around the whole call: a server that trickles its answer one byte at a time cannot
  hold a call open longer). Time spent waiting for this client's own ``max_in_flight`` slot is not counted;
  time the request queues inside the server is;
- rate limits (429), server errors (5xx), deadlines passed and dropped connections are retried up to
  ``max_transport_retries`` times with exponential backoff and jitter (``Retry-After`` respected);
- authentication (401/403) and not-found (404) errors fail at once with :class:`JudgeAuthError` /
  :class:`JudgeNotFoundError`, naming the model and endpoint, never the key; missing credentials (which
  litellm reports as a 500) fail at once with :class:`JudgeCredentialsError`, naming the variable to set;
- a rejected request (400/422, e.g. the context is too long) fails at once with :class:`JudgeRequestError`;
  a ``response_format`` the server rejects (400, 422 or 500 naming it) with
  :class:`JudgeStructuredOutputError`, saying which ``structured_output`` mode to try instead;
- a content-filter refusal is not an error: it becomes an answer with ``finish_reason="content_filter"``
  that the parser records as ``refused``;
- a reply without an answer (empty or null ``choices``, no message, ``content: null`` without tool calls)
  is not an error either: it is stored as an invalid answer of category ``malformed_response`` and the
  window is re-asked like after any invalid answer.

Re-asks (attempt 2, 3, ... of a window whose answer was invalid) vary what can vary, since at temperature 0
the same request gets the same text: a different ``seed`` (where litellm says the provider takes one), a
temperature raised by ``reask_temperature_step`` per re-ask (from 0 to at most 1; not when ``temperature``
is ``None``), and a short repair note appended to the last user message quoting the parse error. The
stored record says what was varied (:attr:`judging.Judgement.reask`). ``vary_reasks=False`` turns this off.

At most ``max_in_flight`` calls are open at once (an asyncio semaphore; ``None``: no cap beyond the
caller's own concurrency). Every answered call adds its tokens and cost to :attr:`LiteLLMJudge.ledger`.

Examples
--------
A hosted model (key from the provider's usual environment variable, e.g. ``OPENAI_API_KEY``)::

    judge = LiteLLMJudge("openai/gpt-4o-mini")

A vLLM / SGLang server, or any OpenAI-compatible endpoint::

    judge = LiteLLMJudge("hosted_vllm/Qwen/Qwen3-32B", api_base="http://gpu1:8000/v1")

Several servers of the same model, load spread over them (:mod:`rcp_jax.judging.transport.endpoints`)::

    judge = LiteLLMJudge("hosted_vllm/Qwen/Qwen3-32B",
                         endpoints=["http://gpu1:8000/v1", "http://gpu2:8000/v1"])

Several endpoints: an :class:`rcp_jax.judging.transport.endpoints.EndpointPool` picks the endpoint of each try (the one with the
fewest tries in flight among those not benched) and each try is a plain ``litellm.acompletion`` to that endpoint;
our retry policy above stays in charge. A retry goes to an endpoint that has not failed this call yet, at once (no
backoff) while there is one. An endpoint that fails :data:`rcp_jax.judging.transport.endpoints.FAILS_TO_BENCH` tries in a row, or
one try that reached nothing (connection refused), is benched: passed over for ``endpoint_bench_s`` seconds,
doubling (up to ``endpoint_bench_max_s``) each time it is benched again before it answers, then probed one try at
a time. While another endpoint is answering, a failed try does not count against the call's
``max_transport_retries`` (at most that many such free tries per call, or the number of endpoints if more), so a
dead server beside a live one costs the run a few probes, not its retry budget. :meth:`LiteLLMJudge.endpoint_stats`
counts answered and failed tries per endpoint (URLs only, never keys). No litellm ``Router`` is involved, so no
error message carries its "model group ... fallback" notes (any such note is cut off all the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rcp_jax.judging.answers.verdict import truncate
from rcp_jax.judging.errors import (
    JudgeAuthError,
    JudgeCredentialsError,
    JudgeError,
    JudgeNotFoundError,
    JudgeRequestError,
    JudgeStructuredOutputError,
    JudgeTimeoutError,
    JudgeTransportError,
)
from rcp_jax.judging.judge import DEFAULT_MAX_WINDOW_CHARS, BaseJudge, Completion, JudgeRequest
from rcp_jax.judging.prompts.pages import approx_image_tokens, message_images, message_text
from rcp_jax.judging.prompts.template import PromptTemplate
from rcp_jax.judging.store.records import Usage
from rcp_jax.judging.transport.endpoints import BENCH_MAX_S, BENCH_S, EndpointPool
from rcp_jax.judging.transport.pinning import floating_alias, floating_note
from rcp_jax.judging.transport.redaction import redact
from rcp_jax.judging.transport.schema import response_format

log = logging.getLogger("rcp_jax.judging.transport.client")

#: ``structured_output`` modes: ``json_schema`` (OpenAI form, ``{"type": "json_schema", "json_schema": {...}}``:
#: hosted APIs, vLLM, SGLang, Ollama, recent llama.cpp), ``json_object`` (JSON, no shape), ``json_object_schema``
#: (llama.cpp's and llama-cpp-python's form ``{"type": "json_object", "schema": {...}}``), ``none`` / ``off``
#: (nothing sent; the same mode, ``off`` is how families record it), ``auto`` (``json_schema`` when litellm
#: knows the model takes a schema, else ``off``).
STRUCTURED_MODES = ("auto", "json_schema", "json_object", "json_object_schema", "none", "off")
#: The first words of the repair message a re-ask appends (see :meth:`LiteLLMJudge.reask_messages`).
REPAIR_MARKER = "Your previous answer could not be used"
#: litellm / OpenAI SDK messages meaning no credentials were sent at all (litellm reports them as a 500).
_NO_CREDENTIALS = ("missing credentials", "api_key client option must be set", "no api key", "api key is missing",
                   "missing api key", "api key not found", "api_key must be set", "no key is set")
#: Words of a server's message rejecting the structured-output request.
_STRUCTURED_WORDS = ("response_format", "json_schema", "json_object", "response format", "grammar", "guided_json",
                     "structured output")
#: litellm's messages for a 200 reply that held no usable completion.
_MALFORMED_WORDS = ("invalid response object", "returned 'choices'", "error in response object",
                    "choices' that is not a list", "empty choices")
#: The note litellm appends to an error raised through a model group (a Router), never shown to users.
_LITELLM_GROUP_NOTE = re.compile(r"\s*(LiteLLM: model group|Received Model Group|Available Model Group Fallbacks)"
                                 r".*", re.DOTALL)
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")
#: words of a transport failure where nothing answered (litellm/openai/httpx wording)
_NO_CONNECTION_WORDS = ("connection error", "connection refused", "connecterror", "cannot connect",
                        "failed to establish a new connection", "name or service not known",
                        "nodename nor servname", "temporary failure in name resolution")


def _env_secrets() -> list[str]:
    """Values of environment variables that look like credentials (redacted from every message)."""
    markers = ("KEY", "TOKEN", "SECRET", "PASSWORD")
    return [v for k, v in os.environ.items() if any(m in k.upper() for m in markers) and len(v) >= 8]


def cached_prompt_tokens(usage: Any) -> int:
    """Prompt tokens a reply's ``usage`` says were read from the provider's prompt cache: OpenAI's
    ``prompt_tokens_details.cached_tokens``, else ``cache_read_input_tokens`` (Anthropic through litellm); 0 when
    neither is given. ``usage`` is litellm's object or a plain mapping."""
    def field(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    if usage is None:
        return 0
    details = field(usage, "prompt_tokens_details")
    for value in (field(details, "cached_tokens") if details is not None else None,
                  field(usage, "cache_read_input_tokens")):
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return int(value)
    return 0


def served_identity(resp: Any) -> tuple[str | None, str | None]:
    """(model, system fingerprint) a reply names (its ``model`` and ``system_fingerprint``); ``None`` for each
    it leaves out or gives empty."""
    out = []
    for name in ("model", "system_fingerprint"):
        value = getattr(resp, name, None)
        out.append(str(value) if isinstance(value, str) and value.strip() else None)
    return out[0], out[1]


def _append_text(content: Any, note: str) -> Any:
    """A message content with ``note`` appended after a blank line (a text part for content parts)."""
    if isinstance(content, str):
        return f"{content}\n\n{note}"
    return [*content, {"type": "text", "text": f"\n\n{note}"}]


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
    """A judge answering through ``litellm.acompletion`` (to one endpoint, or spread over several).

    Parameters
    ----------
    model : litellm model string, e.g. ``"openai/gpt-4o-mini"``, ``"hosted_vllm/<name>"``,
        ``"ollama_chat/<name>"``, ``"anthropic/<name>"``.
    api_base : the endpoint URL (OpenAI-compatible servers: ``http://host:port/v1``); ``None`` uses
        the provider's default.
    api_key : the key; ``None`` lets litellm read the provider's environment variable. Never stored,
        logged or shown.
    endpoints : several endpoints serving the same model: URLs, or mappings with ``api_base`` and
        optional ``api_key`` / ``model``. Tries are spread over them and failing ones benched (module docstring).
    endpoint_bench_s, endpoint_bench_max_s : seconds a failing endpoint is first benched, and the longest bench
        (it doubles while the endpoint keeps failing); see :mod:`rcp_jax.judging.transport.endpoints`.
    temperature, max_tokens, top_p, seed : decoding settings (part of the judge family).
    extra_params : more keyword arguments for ``acompletion`` (e.g. ``{"reasoning_effort": "low"}``);
        part of the family.
    structured_output : one of :data:`STRUCTURED_MODES` (``"none"`` is recorded as ``"off"``).
    timeout : total deadline of one call in seconds, connect to last byte (see the module docstring); a call
        past it counts as a timeout and is retried.
    max_in_flight : cap on open calls across every caller of this judge; ``None``: no cap.
    max_transport_retries : retries of one call on 429 / 5xx / timeouts before :class:`JudgeTransportError`.
    backoff_base, backoff_max : seconds; the n-th retry waits ``min(backoff_max, backoff_base * 2**n)``
        times a jitter factor in [0.5, 1] (or the server's ``Retry-After``, when longer).
    input_cost_per_token, output_cost_per_token : USD prices overriding litellm's cost map (e.g. 0.0
        for a self-hosted server); without them, cost comes from litellm's map or is unknown (``None``).
    prompts, max_window_chars : see :class:`rcp_jax.judging.judge.BaseJudge`.
    vary_reasks : vary seed, temperature and add a repair note on re-asks (module docstring); not part of
        the family (each record says what was varied).
    reask_temperature_step : temperature added per re-ask (capped at 1; 0: keep the temperature).
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
        vary_reasks: bool = True,
        reask_temperature_step: float = 0.2,
        endpoint_bench_s: float = BENCH_S,
        endpoint_bench_max_s: float = BENCH_MAX_S,
    ) -> None:
        super().__init__(model, prompts=prompts, max_window_chars=max_window_chars)
        if structured_output not in STRUCTURED_MODES:
            raise JudgeError(f"structured_output must be one of {STRUCTURED_MODES}, got {structured_output!r}")
        if structured_output == "none":
            structured_output = "off"
        if not (isinstance(timeout, int | float) and timeout > 0):
            raise JudgeError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if reask_temperature_step < 0:
            raise JudgeError(f"reask_temperature_step must be >= 0, got {reask_temperature_step!r}")
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
        self.vary_reasks = bool(vary_reasks)
        self.reask_temperature_step = float(reask_temperature_step)
        self._litellm: Any = None
        if not (0 < endpoint_bench_s <= endpoint_bench_max_s):
            raise JudgeError(f"need 0 < endpoint_bench_s <= endpoint_bench_max_s, got {endpoint_bench_s!r} and "
                             f"{endpoint_bench_max_s!r}")
        #: per endpoint (index of ``_endpoints``): answered / failed tries, timeouts, bench state
        self._pool = (EndpointPool(len(self._endpoints), bench_s=endpoint_bench_s, bench_max_s=endpoint_bench_max_s)
                      if self._endpoints else None)
        self._cost_unknown = False
        self._supported: set[str] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (for worker processes): the litellm module and semaphores are rebuilt there."""
        state = dict(self.__dict__)
        state.update(_litellm=None, _sems={})
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

    def endpoint_stats(self) -> list[dict[str, Any]]:
        """Per endpoint (several endpoints only; ``[]`` otherwise): ``api_base``, ``answered`` (tries that got an
        answer), ``failed`` (tries that raised: retried or not) and ``timeouts`` (of the failed, past the deadline).
        Counted in this process (a :class:`judging.ProcessJudge`'s workers keep their own)."""
        if self._pool is None:
            return []
        return [{"api_base": str(e["api_base"]), **c} for e, c in zip(self._endpoints, self._pool.stats(), strict=True)]

    # -- one call -------------------------------------------------------------------------------------

    def _supports(self, param: str) -> bool:
        """Whether litellm says this model's provider takes the OpenAI parameter ``param``."""
        if self._supported is None:
            litellm = self._ensure_litellm()
            try:
                self._supported = set(litellm.get_supported_openai_params(model=self.model) or ())
            except Exception:  # noqa: BLE001 - an unknown provider: assume only what every provider takes
                self._supported = {"temperature", "max_tokens"}
        return param in self._supported

    def reask_settings(self, request: JudgeRequest) -> dict[str, Any] | None:
        """What a re-ask changes (``None`` on a first attempt or with ``vary_reasks=False``).

        Returns ``{"attempt", "seed", "temperature", "repair"}`` with ``None`` for what is left as it was:
        ``seed`` is ``(seed or 0) + attempt - 1`` when the provider takes a seed; ``temperature`` is the
        configured one plus ``reask_temperature_step`` per re-ask, at most 1 (never below the configured
        one); ``repair`` quotes the last invalid answer's category and detail.
        """
        if request.attempt <= 1 or not self.vary_reasks:
            return None
        k = request.attempt - 1
        seed = (self.seed or 0) + k if self._supports("seed") else None
        temperature = None
        if self.temperature is not None and self.reask_temperature_step > 0 and self._supports("temperature"):
            bumped = round(min(max(self.temperature, 1.0), self.temperature + self.reask_temperature_step * k), 6)
            temperature = bumped if bumped != self.temperature else None
        repair = None
        if request.previous is not None:
            category, detail = request.previous
            repair = truncate(f"{category}: {detail}" if detail else str(category), 200)
        return {"attempt": request.attempt, "seed": seed, "temperature": temperature, "repair": repair}

    def repair_note(self, repair: str) -> str:
        """The note a re-ask appends to the last user message (starts with :data:`REPAIR_MARKER`)."""
        return (f"{REPAIR_MARKER} ({repair}). Answer again: follow the instructions above exactly and end with "
                "the JSON object they describe, covering every document.")

    def _response_format(self, request: JudgeRequest) -> dict[str, Any] | None:
        mode = self.structured_mode()
        stage, rendered = request.window.stage, request.rendered
        # json_object_schema is llama.cpp's {"type": "json_object", "schema": ...}; the schema module builds it with
        # the score grid that llama.cpp's grammar needs (it ignores numeric minimum / maximum)
        return response_format(stage, rendered.positional, rendered.n_criteria, mode)

    def chat_params(self, request: JudgeRequest, reask: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The chat request's parameters (messages, decoding, response_format, extra_params) for ``request``, with
        the re-ask variation ``reask`` (:meth:`reask_settings`) applied: what an online call sends besides the model,
        and what a batch request line's body holds (:meth:`request_body`)."""
        messages = [dict(m) for m in request.rendered.messages]
        kw: dict[str, Any] = {"messages": messages}
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        if self.max_tokens is not None:
            kw["max_tokens"] = self.max_tokens
        if self.top_p is not None:
            kw["top_p"] = self.top_p
        if self.seed is not None:
            kw["seed"] = self.seed
        if reask:
            if reask.get("seed") is not None:
                kw["seed"] = reask["seed"]
            if reask.get("temperature") is not None:
                kw["temperature"] = reask["temperature"]
            if reask.get("repair"):
                last = max(i for i, m in enumerate(messages) if m.get("role") == "user") if any(
                    m.get("role") == "user" for m in messages) else len(messages) - 1
                note = self.repair_note(reask["repair"])
                if last < 0:
                    messages.append({"role": "user", "content": note})
                else:  # appended to the last user message: chat templates that need alternating roles accept it
                    messages[last] = {**messages[last], "content": _append_text(messages[last]["content"], note)}
        rf = self._response_format(request)
        if rf is not None:
            kw["response_format"] = rf
        kw.update(self.extra_params)
        return kw

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The OpenAI chat-completions body of ``request`` (a batch request line's ``body``): the provider's model
        name (the litellm prefix dropped) and :meth:`chat_params` with this attempt's re-ask variation, so a batch
        asks exactly what an online call would."""
        return {"model": self.provider_model()[0], **self.chat_params(request, self.reask_settings(request))}

    def provider_model(self) -> tuple[str, str]:
        """(the model name the provider knows, the litellm provider), e.g. ``("gpt-4o-mini", "openai")`` for
        ``"openai/gpt-4o-mini"``; a model litellm cannot place is taken as an OpenAI-compatible one."""
        try:
            model, provider, _, _ = self._ensure_litellm().get_llm_provider(model=self.model)
            return str(model), str(provider)
        except Exception:  # noqa: BLE001 - unknown prefix: an OpenAI-compatible server's own model name
            prefix, _, rest = self.model.partition("/")
            return (rest, prefix) if rest else (self.model, "openai")

    def connection(self) -> dict[str, Any]:
        """``{"api_base", "api_key"}`` of this judge's one endpoint (``None`` each where the provider's default or
        environment variable applies), for clients of the same provider such as its batch API. Never logged."""
        if self._endpoints:
            raise JudgeError(f"judge {self.model!r} has {len(self._endpoints)} endpoints; a batch goes to one: give "
                             "one api_base")
        return {"api_base": self.api_base, "api_key": self.__api_key}

    def _kwargs(self, request: JudgeRequest, reask: Mapping[str, Any] | None = None) -> dict[str, Any]:
        kw: dict[str, Any] = {"timeout": self.timeout, "num_retries": 0, "max_retries": 0}
        if self.input_cost_per_token is not None:
            # litellm's own cost bookkeeping then skips its (slow, failing) model-map lookups
            kw["input_cost_per_token"] = self.input_cost_per_token
            kw["output_cost_per_token"] = self.output_cost_per_token
        kw.update(self.chat_params(request, reask))
        return kw

    def _semaphore(self) -> asyncio.Semaphore | None:
        if not self.max_in_flight:
            return None
        key = id(asyncio.get_running_loop())
        if key not in self._sems:
            self._sems = {key: asyncio.Semaphore(self.max_in_flight)}
        return self._sems[key]

    async def _call(self, kw: dict[str, Any], endpoint: int | None = None) -> Any:
        litellm = self._ensure_litellm()
        if endpoint is not None:  # one of several endpoints, picked by the pool
            e = self._endpoints[endpoint]
            kw["api_base"] = e["api_base"]
            if e["api_key"] or self.__api_key:
                kw["api_key"] = e["api_key"] or self.__api_key
            return await litellm.acompletion(model=e["model"], **kw)
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
            return "timeout"
        status = getattr(exc, "status_code", None)
        text = str(getattr(exc, "message", "") or exc).lower()
        if any(w in text for w in _NO_CREDENTIALS) and status in (None, 400, 401, 403, 500):
            return "credentials"
        if any(w in text for w in _MALFORMED_WORDS) and status in (None, 422, 500):
            return "malformed"
        if (status in (400, 422, 500, 501) and self.structured_mode() != "off"
                and any(w in text for w in _STRUCTURED_WORDS)):
            return "structured"
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

    def _no_connection(self, exc: BaseException) -> bool:
        """True when nothing answered at all (refused, unreachable, unknown host): litellm reports such a
        failure as an InternalServerError (status 500) or an APIConnectionError saying "Connection error"."""
        if isinstance(exc, self._ensure_litellm().APIConnectionError):
            return True
        text = str(getattr(exc, "message", "") or exc).lower()
        return any(w in text for w in _NO_CONNECTION_WORDS)

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

    def _error(self, kind: str, exc: BaseException, request: JudgeRequest, retries: int,
               endpoint: int | None = None) -> JudgeError:
        at = self._endpoints[endpoint]["api_base"] if endpoint is not None else self.endpoint_label
        where = f"judge model {self.model!r} at {at}"
        window = request.window.label
        status = getattr(exc, "status_code", None)
        upstream = self._upstream(exc)[:300]
        said = f" The endpoint said: {upstream}" if upstream else ""
        if kind == "credentials":
            missing = self._missing_keys()
            var = " or ".join(missing) if missing else "the provider's key variable (e.g. OPENAI_API_KEY)"
            return JudgeCredentialsError(
                f"{where}: no API key reached the provider while judging window {window}. Set {var} in the "
                "environment (or pass api_key=). A local OpenAI-compatible server that checks no key accepts any "
                "value (e.g. OPENAI_API_KEY=none), or use the 'hosted_vllm/<model>' prefix, which sends none. "
                f"The key itself is never shown.{said}"
            )
        if kind == "structured":
            mode = self.structured_mode()
            others = [m for m in ("json_schema", "json_object_schema", "json_object", "none") if m != mode]
            return JudgeStructuredOutputError(
                f"{where} rejected response_format={mode} (HTTP {status}) for window {window}: this server does "
                f"not take that structured-output form. Try --structured-output {' or '.join(others[:2])} "
                f"(llama.cpp: json_object_schema), or none (then the parser alone checks the answers).{said}"
            )
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
                f"{where}: window {window} does not fit the model's context. Give the documents less room: "
                f"--max-window-chars (max_window_chars= in Python; now {self.max_window_chars} characters of document "
                f"text per window), or leave less for the answer: --max-tokens (now {self.max_tokens}); windows "
                f"with page images also shrink with --image-max-side.{said}"
            )
        if kind == "request":
            return JudgeRequestError(
                f"{where} rejected the request for window {window} (HTTP {status}). Check extra_params, "
                f"max_tokens and structured_output (now {self.structured_mode()!r}).{said}"
            )
        if kind == "timeout":
            return JudgeTimeoutError(
                f"{where}: window {window} ran past its {self.timeout:g} s deadline on each of {retries + 1} tries "
                "(the deadline covers connecting, the server's queue and the whole answer). Raise --timeout, lower "
                "--concurrency to the server's parallel slots (queued requests wait inside the server) or "
                f"--max-tokens, then re-run: stored answers are kept.{self._endpoint_note()}"
            )
        if kind == "retry" and self._no_connection(exc):
            return JudgeTransportError(
                f"{where}: could not connect for window {window} on {retries + 1} tries: nothing answered (no HTTP "
                "status; litellm labels this InternalServerError 500). Is the server running and reachable, and is "
                "--api-base right (scheme, host, port; OpenAI-compatible servers end in /v1)? Then re-run: stored "
                f"answers are kept.{said}{self._endpoint_note()}"
            )
        if kind == "retry":
            return JudgeTransportError(
                f"{where}: window {window} still failing after {retries} retries ({type(exc).__name__}, HTTP "
                f"{status}). The server is overloaded or down; lower concurrency or raise max_transport_retries, "
                f"then re-run: stored answers are kept.{said}{self._endpoint_note()}"
            )
        return JudgeError(f"{where}: unexpected {type(exc).__name__} for window {window}.{said}")

    def _endpoint_note(self) -> str:
        """`` Tries per endpoint ...`` after a transport failure with several endpoints (``""`` with one)."""
        if not self._endpoints:
            return ""
        counts = "; ".join(f"{s['api_base']} {s['answered']} answered, {s['failed']} failed"
                           for s in self.endpoint_stats())
        return f" Tries per endpoint so far: {counts}."

    def _missing_keys(self) -> list[str]:
        try:
            return list(self._ensure_litellm().validate_environment(model=self.model).get("missing_keys") or [])
        except Exception:  # noqa: BLE001 - an unknown provider: name the usual variable instead
            return []

    @staticmethod
    def _answer_text(resp: Any) -> tuple[str, str | None, str]:
        """(text, finish reason, malformed description) of a completion; the description is ``""`` when the
        reply holds an answer (possibly empty text, e.g. cut by max_tokens)."""
        choices = getattr(resp, "choices", None)
        if not choices:
            return "", None, f"the reply's 'choices' was {'empty' if choices is not None else 'missing or null'}"
        choice = choices[0]
        finish = getattr(choice, "finish_reason", None)
        message = getattr(choice, "message", None)
        if message is None:
            return "", finish, "the reply's first choice has no message"
        content = getattr(message, "content", None)
        if content is None:
            calls = getattr(message, "tool_calls", None) or []
            args = [getattr(getattr(c, "function", None), "arguments", None) for c in calls]
            args = [a for a in args if isinstance(a, str) and a]
            if args:  # an answer given as a tool call: its arguments are the JSON
                return args[0], finish, ""
            if finish == "length":  # e.g. reasoning used every token: the parser calls it truncated
                return "", finish, ""
            return "", finish, "the reply's message has content null and no tool calls"
        return str(content), finish, ""

    def _usage(self, resp: Any) -> Usage:
        u = getattr(resp, "usage", None)
        pt = int(getattr(u, "prompt_tokens", 0) or 0)
        ct = int(getattr(u, "completion_tokens", 0) or 0)
        cached = min(cached_prompt_tokens(u), pt)
        return Usage(pt, ct, self.price(pt, ct, resp, cached_tokens=cached), cached)

    def price(self, prompt_tokens: int, completion_tokens: int, resp: Any = None, *,
              cached_tokens: int = 0) -> float | None:
        """USD cost of a call: custom prices, else litellm's cost map; ``None`` when the model is unpriced.

        ``cached_tokens`` (of ``prompt_tokens``) are priced at the map's cached-input rate
        (``cache_read_input_token_cost``; the input rate where it has none); with custom prices, at
        ``input_cost_per_token`` (there is no custom cached rate). A reply whose cost litellm computed already
        (``_hidden_params["response_cost"]``, cached tokens included) is taken as is."""
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
                model=self.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                cache_read_input_tokens=cached_tokens,
            )
            return float(p) + float(c)
        except Exception:  # noqa: BLE001 - litellm raises several kinds for unmapped models
            self._cost_unknown = True
            return None

    def batch_rates(self) -> tuple[float, float] | None:
        """USD per (input, output) token at the provider's batch price (litellm's cost map:
        ``input_cost_per_token_batches``, ``output_cost_per_token_batches``); ``None`` when the map has none for
        this model, or prices were given by hand (``input_cost_per_token`` / ``output_cost_per_token``)."""
        if self.input_cost_per_token is not None or not self.model_known():
            return None
        info = self._ensure_litellm().get_model_info(model=self.model)
        rates = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
        if rates[0] is None or rates[1] is None:
            return None
        return float(rates[0]), float(rates[1])

    async def _call_with_deadline(self, kw: dict[str, Any], endpoint: int | None = None) -> Any:
        """One call under the total deadline (``timeout`` seconds, connect to last byte)."""
        return await asyncio.wait_for(self._call(kw, endpoint), timeout=self.timeout)

    async def complete(self, request: JudgeRequest) -> Completion:
        """One answer for ``request``, retried on transport failures as described in the module docstring."""
        reask = self.reask_settings(request)
        kw = self._kwargs(request, reask)
        retries = 0  # tries after the first, all of them (the record's and the ledger's count)
        charged = 0  # of those, the ones charged to max_transport_retries
        free = 0  # of those, the ones not charged: another endpoint was answering
        failed_here: set[int] = set()  # endpoints that failed a try of this call
        loop = asyncio.get_running_loop()
        while True:
            error: JudgeError | None = None
            delay = 0.0
            sem = self._semaphore()
            async with sem if sem is not None else contextlib.nullcontext():
                endpoint = self._pool.pick(failed_here, loop.time()) if self._pool is not None else None
                if self._pool is not None and endpoint is not None:
                    self._pool.start(endpoint)
                try:
                    resp = await self._call_with_deadline(dict(kw), endpoint)
                except asyncio.CancelledError:
                    if self._pool is not None and endpoint is not None:
                        self._pool.release(endpoint)
                    raise
                except Exception as exc:  # noqa: BLE001 - classified below, never swallowed
                    kind = self._classify(exc)
                    answered = kind in ("content_filter", "malformed")
                    if self._pool is not None and endpoint is not None:
                        self._pool.done(endpoint, loop.time(), answered=answered, timeout=kind == "timeout",
                                        unreachable=kind == "retry" and self._no_connection(exc))
                        if not answered:
                            failed_here.add(endpoint)
                    if kind == "content_filter":
                        usage = Usage(0, 0, None)
                        self.ledger.add(usage, retries)
                        return Completion(text="", finish_reason="content_filter", usage=usage,
                                          transport_retries=retries, reask=reask)
                    if kind == "malformed":
                        usage = Usage(0, 0, None)
                        self.ledger.add(usage, retries)
                        said = self._upstream(exc).splitlines()
                        return Completion(text="", finish_reason=None, usage=usage, transport_retries=retries,
                                          malformed=truncate(said[0] if said else type(exc).__name__, 200),
                                          reask=reask)
                    # a failed try is free while another endpoint answers: the next one goes there
                    is_free = (self._pool is not None and endpoint is not None and free < self._free_tries()
                               and self._pool.answering_besides(endpoint, loop.time()))
                    if kind in ("retry", "timeout") and (is_free or charged < self.max_transport_retries):
                        # another endpoint that has not failed this call: go there at once
                        fresh = self._pool is not None and self._pool.has_fresh(failed_here, loop.time())
                        delay = 0.0 if fresh else self._backoff(charged, exc)
                        free += is_free
                        charged += not is_free
                        what = (f"no complete answer within the {self.timeout:g} s deadline" if kind == "timeout"
                                else "could not connect (nothing answered)" if self._no_connection(exc)
                                else f"{type(exc).__name__} (HTTP {getattr(exc, 'status_code', None)})")
                        at = self._endpoints[endpoint]["api_base"] if endpoint is not None else self.endpoint_label
                        log.warning(
                            "window %s: %s from %s; retry %d/%d%s in %.2fs",
                            request.window.label, what, at, charged, self.max_transport_retries,
                            " (not counted: another endpoint is answering)" if is_free else "", delay,
                        )
                    else:
                        self.ledger.failed_calls += 1
                        error = self._error(kind, exc, request, retries, endpoint)
                    del exc
                else:
                    if self._pool is not None and endpoint is not None:
                        self._pool.done(endpoint, loop.time(), answered=True)
                    text, finish, malformed = self._answer_text(resp)
                    usage = self._usage(resp)
                    self.ledger.add(usage, retries)
                    served, fingerprint = served_identity(resp)
                    return Completion(text=text, finish_reason=finish, usage=usage, transport_retries=retries,
                                      malformed=malformed, reask=reask, served_model=served,
                                      system_fingerprint=fingerprint)
            if error is not None:
                raise error  # outside the except block: the provider's exception is not chained
            retries += 1
            await asyncio.sleep(delay)

    def _free_tries(self) -> int:
        """Most failed tries of one call not charged to ``max_transport_retries`` (several endpoints only)."""
        return max(self.max_transport_retries, len(self._endpoints))

    def _upstream(self, exc: BaseException) -> str:
        """What the provider said, keys redacted and litellm's own routing notes cut off."""
        text = redact(str(getattr(exc, "message", "") or exc), self._secrets())
        return _LITELLM_GROUP_NOTE.sub("", text).strip()

    # -- estimation hooks -----------------------------------------------------------------------------

    def count_tokens(self, messages: Sequence[Mapping[str, Any]]) -> tuple[int, str]:
        """Prompt tokens of ``messages`` and how they were counted (tokenizer, or chars/4 if unknown).

        Page images (content parts ``image_url``) are counted apart, by :meth:`image_tokens`; the method then
        names their rule too."""
        litellm = self._ensure_litellm()
        images = [u for m in messages for u in message_images(m["content"])]
        if images:
            messages = [{**m, "content": message_text(m["content"])} for m in messages]
        if not self.model_known():
            n, method = sum(len(m["content"]) for m in messages) // 4, "chars/4 (model not in litellm's map)"
        else:
            n, method = int(litellm.token_counter(model=self.model, messages=list(messages))), "litellm.token_counter"
        if not images:
            return n, method
        counts = [self.image_tokens(u) for u in images]
        return n + sum(c for c, _ in counts), f"{method} + images: {counts[0][1]}"

    def image_tokens(self, url: str) -> tuple[int, str]:
        """Prompt tokens of one image as sent (a data URL) and the rule used: litellm's image rule for this model
        where it has one (OpenAI's tiles, Anthropic's patches), else the approximation of
        :func:`rcp_jax.judging.prompts.pages.approx_image_tokens` (one token per 28 x 28-pixel patch)."""
        self._ensure_litellm()
        try:  # litellm >= 1.8x: per-model image rules; older versions have none (then the approximation)
            from litellm.litellm_core_utils import token_counter as tc  # noqa: PLC0415

            family = tc._image_model_family(self.model)
            if family is not None:
                return int(tc.estimate_image_tokens(self.model, url)), f"litellm's image rule for {family}"
        except Exception:  # noqa: BLE001 - no rule: the documented approximation
            pass
        return approx_image_tokens(url, self.image_limits), "~ 28x28-pixel patches (approximation; litellm has no image rule for this model)"

    def floating_alias_note(self) -> str | None:
        """A warning when the model string is a provider alias that may move to another model mid-run (the rule
        of :mod:`rcp_jax.judging.transport.pinning`; self-hosted servers and endpoints are exempt), naming a
        dated snapshot from litellm's cost map where it has one; ``None`` otherwise."""
        api_base = self.api_base or (self._endpoints[0]["api_base"] if self._endpoints else None)
        if floating_alias(self.model, api_base=api_base) is None:
            return None
        return floating_note(self.model, api_base=api_base, known=self._ensure_litellm().model_cost)

    def model_known(self) -> bool:
        """Whether litellm's (local) model map knows this model."""
        litellm = self._ensure_litellm()
        try:
            litellm.get_model_info(model=self.model)
        except Exception:  # noqa: BLE001
            return False
        return True

