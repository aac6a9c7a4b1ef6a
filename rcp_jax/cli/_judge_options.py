"""The judge options of ``rcp-jax judge`` / ``demo`` (``--model`` ... ``--stop-after-invalid``) and the judge they build.

Sizing (also in the README's "Judging with a real LLM server"):

- ``--concurrency``: calls in flight. A server generates only as many requests at once as it has slots
  (llama.cpp ``-np``; vLLM / SGLang batch many); the rest queue *inside the server*, and that wait counts
  against ``--timeout``, while the server keeps generating for callers that already gave up. ``auto`` (the
  default) takes the slots the server reports (llama.cpp ``GET /props``; llama-cpp-python, recognised by
  its ``/v1/models``, answers one request at a time: 1), else 4 for a self-hosted ``--api-base`` that
  reports none (Ollama, vLLM) and 16 for a hosted API.
- ``--max-tokens``: room for the answer. The prompt (a window of documents) plus this must fit the model's
  context; when the server reports its context (llama.cpp ``/props``, vLLM ``/v1/models``) a window that
  cannot fit is warned about before the first call.
- ``--timeout``: total seconds of one call (connect, server queue, whole answer); at least
  ``max_tokens / tokens-per-second`` of the server, plus the prompt's processing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rcp_jax.cli._endpoints import ApiBaseAction
from rcp_jax.errors import DataError

STRUCTURED_CHOICES = ("auto", "json_schema", "json_object", "json_object_schema", "none")
#: --concurrency auto: hosted APIs / a self-hosted server that reports no slots.
AUTO_CONCURRENCY_HOSTED = 16
AUTO_CONCURRENCY_SELF_HOSTED = 4
#: Request fields --extra-params may not set (the judge sets them itself).
RESERVED_PARAMS = ("model", "messages", "api_base", "api_key", "stream", "n")
#: rcp_jax.judging.run's defaults, repeated so that building the parser imports nothing (a test keeps them equal).
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_STOP_AFTER_INVALID = 20
#: rcp_jax.judging.judge.DEFAULT_MAX_WINDOW_CHARS, repeated for the same reason.
DEFAULT_MAX_WINDOW_CHARS = 60_000


def _bounded(convert, allowed, requirement: str, bound_requirement: str | None = None):
    """An argparse ``type``: ``convert(text)`` checked by ``allowed(value)``; a failure names the requirement."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}") from None
        if not allowed(value):
            raise argparse.ArgumentTypeError(f"must be {bound_requirement or requirement}, got {text.strip()}")
        return value

    return parse


_nonnegative_int = _bounded(int, lambda v: v >= 0, "an integer >= 0")
_positive_int = _bounded(int, lambda v: v >= 1, "an integer >= 1")
_positive_float = _bounded(float, lambda v: v > 0, "a number of seconds > 0")
_price = _bounded(float, lambda v: v >= 0, "a price in USD per token (e.g. 1.5e-7)", ">= 0 (USD per token)")
_count = _bounded(int, lambda v: v >= 1, "'auto' or an integer >= 1")
_positive_number = _bounded(float, lambda v: v > 0, "a number > 0")
_nonnegative_number = _bounded(float, lambda v: v >= 0, "a number >= 0")
#: --model's offline judge, and the tournament noise it has unless --simulated-noise says otherwise.
SIMULATED = "simulated"
SIMULATED_NOISE = 0.5


def _concurrency(text: str) -> int | str:
    return text if text == "auto" else _count(text)


def add_judge_options(p: argparse.ArgumentParser) -> None:
    """The judge argument group (every option states its default)."""
    g = p.add_argument_group("judge", "the judge model and how it is called (see the README: Judging with a real "
                                      "LLM server)")
    g.add_argument("--model", default="simulated",
                   help="litellm model string (e.g. openai/gpt-4o-mini, hosted_vllm/<name>); 'simulated' (default) "
                        "uses the offline simulated judge")
    g.add_argument("--api-base", default=None, action=ApiBaseAction, metavar="URL",
                   help="endpoint URL of an OpenAI-compatible server, ending in /v1 (vLLM, SGLang, llama.cpp, Ollama); "
                        "give it several times for several servers of the same model: the calls are spread over them, "
                        "a failed call is retried on another server, a failing server is benched, and the summary "
                        "counts each server's answered and failed calls (default: the provider's own endpoint)")
    g.add_argument("--api-base-file", type=Path, default=None, metavar="FILE",
                   help="more endpoints, one per line: 'URL [KEY_VARIABLE]', the optional second field being the NAME "
                        "of an environment variable holding that server's key (never the key itself); # comments "
                        "(default: none)")
    g.add_argument("--concurrency", type=_concurrency, default="auto", metavar="N|auto",
                   help="judge calls in flight. Set it to the server's parallel slots: more only queue inside the "
                        "server, and the wait counts against --timeout. auto (default): the slots the server reports "
                        f"(llama.cpp /props; 1 for llama-cpp-python), else {AUTO_CONCURRENCY_SELF_HOSTED} with --api-base and "
                        f"{AUTO_CONCURRENCY_HOSTED} for a hosted API")
    g.add_argument("--seed", type=int, default=0, help="schedule seed (default 0)")
    g.add_argument("--temperature", type=float, default=0.0,
                   help="sampling temperature (default 0; re-asks of an invalid answer raise it by 0.2 each)")
    g.add_argument("--max-tokens", type=int, default=4096,
                   help="most tokens of one answer (default 4096). The prompt plus this must fit the model's context: "
                        "with a small context (e.g. 4096) use about 1024-2048; reasoning models need more")
    g.add_argument("--max-window-chars", type=_positive_int, default=DEFAULT_MAX_WINDOW_CHARS, metavar="N",
                   help="characters of document text in one window (about 4 per token); longer documents are cut, "
                        "the longest first, and the record says which. Lower it when a window does not fit the "
                        f"model's context. Part of the judge family (default {DEFAULT_MAX_WINDOW_CHARS:_})"
                        .replace("_", ","))
    g.add_argument("--timeout", type=_positive_float, default=120.0, metavar="SECONDS",
                   help="total deadline of one call in seconds, from connecting to the answer's last byte, including "
                        "the wait in the server's queue; a call past it is retried like a timeout (default 120)")
    g.add_argument("--max-attempts", type=_positive_int, default=DEFAULT_MAX_ATTEMPTS, metavar="N",
                   help="answer attempts per window in one run; an invalid answer is stored and re-asked with another "
                        f"seed, a higher temperature and a note quoting the error (default {DEFAULT_MAX_ATTEMPTS})")
    g.add_argument("--max-transport-retries", type=_nonnegative_int, default=6, metavar="N",
                   help="retries of one call on 429 / 5xx / timeouts, with exponential backoff (default 6)")
    g.add_argument("--stop-after-invalid", type=_nonnegative_int, default=DEFAULT_STOP_AFTER_INVALID, metavar="N",
                   help="stop with a verdict (invalid answers by category, one example, what to try) when the run's "
                        f"first N answers are all invalid; 0: never (default {DEFAULT_STOP_AFTER_INVALID})")
    g.add_argument("--structured-output", choices=STRUCTURED_CHOICES, default="auto",
                   help="how the answer's JSON shape is requested: json_schema (OpenAI form: hosted APIs, vLLM, "
                        "SGLang, Ollama), json_object_schema (llama.cpp / llama-cpp-python: json_object with a schema), "
                        "json_object (any JSON), none (nothing; the parser alone checks); auto (default): json_schema "
                        "when litellm knows the model supports it, else none")
    g.add_argument("--extra-params", default=None, metavar="JSON",
                   help="more request parameters for litellm, as a JSON object, e.g. '{\"top_k\": 20}' or "
                        "'{\"reasoning_effort\": \"low\"}'; part of the judge family (default: none)")
    g.add_argument("--rubric", default=None, metavar="FILE",
                   help="rubric file (TOML, or JSON with the same keys): the K >= 2 yes/no criteria of the rubric "
                        "windows, each a name and the question the judge reads (see the README, 'Your own rubric'). "
                        "Part of the judge family and of the store's identity: a store judged with another rubric is "
                        "refused (default: the built-in five-criterion rubric, judging/prompts/rubrics/paper.toml)")
    g.add_argument("--input-cost-per-token", type=_price, default=None, metavar="USD",
                   help="price of one prompt token in USD, for costs and --estimate of models litellm cannot price "
                        "(0 for your own server); give with --output-cost-per-token (default: litellm's price map)")
    g.add_argument("--output-cost-per-token", type=_price, default=None, metavar="USD",
                   help="price of one answer token in USD; give with --input-cost-per-token (default: litellm's map)")
    s = p.add_argument_group("simulated judge", "the offline judge of --model simulated (latent relevance from the "
                                                "qrels); two of them with different names try 'A second judge' offline")
    s.add_argument("--simulated-name", default=SIMULATED, metavar="NAME",
                   help=f"the simulated judge's model name, recorded in the store and used by `fit --judges` "
                        f"(default {SIMULATED})")
    s.add_argument("--simulated-severity", type=float, default=0.0, metavar="X",
                   help="rubric strictness: > 0 a stricter judge (every criterion's difficulty raised by X ability "
                        "units), < 0 a more lenient one (default 0)")
    s.add_argument("--simulated-discrimination", type=_positive_number, default=1.0, metavar="X",
                   help="rubric decisiveness: > 1 answers closer to certain, < 1 closer to a coin (default 1)")
    s.add_argument("--simulated-noise", type=_nonnegative_number, default=SIMULATED_NOISE, metavar="X",
                   help="standard deviation of the tournament scores' noise, in score points "
                        f"(default {SIMULATED_NOISE})")
    from rcp_jax.cli._image_options import add_image_options

    add_image_options(p)


def simulated_settings(args) -> dict[str, Any]:
    """``SimulatedJudge`` keywords of the ``--simulated-*`` options; a DataError when one is given with a real
    ``--model`` (it would be ignored)."""
    get = lambda name, default: getattr(args, name, default)  # noqa: E731 - other verbs' namespaces lack them
    settings = {"model": get("simulated_name", SIMULATED), "severity": get("simulated_severity", 0.0),
                "discrimination": get("simulated_discrimination", 1.0), "noise": get("simulated_noise", SIMULATED_NOISE)}
    defaults = {"model": SIMULATED, "severity": 0.0, "discrimination": 1.0, "noise": SIMULATED_NOISE}
    if args.model != SIMULATED:
        given = [f"--simulated-{k if k != 'model' else 'name'}" for k, v in settings.items() if v != defaults[k]]
        if given:
            raise DataError(f"{', '.join(given)} set(s) the simulated judge, but --model is {args.model}: drop "
                            f"{'them' if len(given) > 1 else 'it'}, or use --model simulated")
        return {}
    name = str(settings["model"]).strip()
    if not name or any(c.isspace() for c in name) or "=" in name or "," in name:
        raise DataError(f"--simulated-name {settings['model']!r}: give a name without spaces, '=' or ',' "
                        "(it is how `fit --judges` names the judge), e.g. sim-strict")
    return {**settings, "model": name}


def extra_params(text: str | None) -> dict[str, Any]:
    """The ``--extra-params`` JSON object (``{}`` when not given)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"--extra-params is not valid JSON ({exc.msg} at character {exc.pos}): give a JSON object "
                        "such as '{\"top_k\": 20}' (quote it for the shell)") from None
    if not isinstance(value, dict):
        raise DataError(f"--extra-params must be a JSON object such as '{{\"top_k\": 20}}', got {type(value).__name__}")
    reserved = sorted(set(value) & set(RESERVED_PARAMS))
    if reserved:
        raise DataError(f"--extra-params may not set {', '.join(reserved)}: the judge sets them itself "
                        "(use --model / --api-base; the key comes from the provider's environment variable)")
    return value


#: Why ``--model simulated`` is refused without labels, and what to do instead.
SIMULATED_NEEDS_QRELS = (
    "--model simulated derives each document's latent relevance from the qrels, and no pooled query has a qrel "
    "(an unlabelled collection): it has nothing to simulate. Judge with a real LLM (--model openai/<name> "
    "--api-base URL, or any litellm model; `rcp-jax doctor` checks it first), give labels with --qrels FILE, or try "
    "the flow offline on the embedded demo (`rcp-jax demo`)"
)


def build_judge(args, latent: dict | None):
    """The judge of ``args`` with its run policy, and ``args.concurrency`` resolved to an integer.

    Also sets ``args.server_info`` (a :class:`rcp_jax.judging.transport.server_info.ServerInfo`, empty when not asked or nothing
    reported) and ``args.judge_notes`` (lines to show before the run, e.g. a concurrency above the slots).
    """
    from rcp_jax.cli._endpoints import combined_server_info, endpoints_of, judge_endpoints
    from rcp_jax.judging import LiteLLMJudge, SimulatedJudge
    from rcp_jax.judging.transport.server_info import ServerInfo, probe_server

    notes: list[str] = []
    info = ServerInfo()
    endpoints = []
    get = lambda name, default=None: getattr(args, name, default)  # noqa: E731 - other verbs' namespaces lack some
    rubric = None
    if get("rubric") is not None:  # a bad rubric file is refused before anything else is done
        from rcp_jax.judging.prompts.rubric import load_rubric

        rubric = load_rubric(args.rubric)
    simulated = simulated_settings(args)
    if args.model == SIMULATED:
        if latent is None:
            raise DataError(SIMULATED_NEEDS_QRELS)
        judge = SimulatedJudge(latent, seed=args.seed, **simulated)
    else:
        in_cost, out_cost = get("input_cost_per_token"), get("output_cost_per_token")
        if (in_cost is None) != (out_cost is None):
            raise DataError("give both --input-cost-per-token and --output-cost-per-token, or neither")
        structured = get("structured_output", "auto")
        endpoints = endpoints_of(args)
        several = len(endpoints) > 1 or any(e.key_var for e in endpoints)
        judge = LiteLLMJudge(
            args.model, api_base=None if several or not endpoints else endpoints[0].api_base,
            endpoints=judge_endpoints(endpoints) if several else None, temperature=get("temperature", 0.0),
            max_tokens=get("max_tokens", 4096), timeout=get("timeout", 120.0),
            max_transport_retries=get("max_transport_retries", 6), structured_output=structured,
            extra_params=extra_params(get("extra_params")), input_cost_per_token=in_cost,
            output_cost_per_token=out_cost,
        )
        if endpoints:
            info = combined_server_info([probe_server(e.api_base, args.model) for e in endpoints])
        notes += [n for n in [judge.floating_alias_note()] if n]  # a provider alias that may move mid-run
    if rubric is not None:  # the rubric windows ask this rubric's criteria (C1..CK in the file's order)
        judge.prompts = {**judge.prompts, "rubric": rubric.template()}
    from rcp_jax.cli._image_options import image_limits

    judge.image_limits = image_limits(args)
    judge.max_window_chars = get("max_window_chars", DEFAULT_MAX_WINDOW_CHARS)
    judge.max_attempts = get("max_attempts")
    judge.stop_after_invalid = get("stop_after_invalid")
    concurrency = get("concurrency", "auto")
    if concurrency == "auto":
        if info.slots:
            concurrency = info.slots
            notes.append(f"--concurrency auto: {info.slots} (the server's parallel slots, {info.source})")
        elif args.model != "simulated" and endpoints:
            concurrency = AUTO_CONCURRENCY_SELF_HOSTED * len(endpoints)
            notes.append(f"--concurrency auto: {concurrency} (the server reports no slot count; vLLM / SGLang batch "
                         "many requests at once: raise --concurrency to use them)" if len(endpoints) == 1 else
                         f"--concurrency auto: {concurrency} ({AUTO_CONCURRENCY_SELF_HOSTED} per server for "
                         f"{len(endpoints)} servers that report no slot count; raise it for servers that batch)")
        else:
            concurrency = AUTO_CONCURRENCY_HOSTED
    elif info.slots and concurrency > info.slots:
        notes.append(f"--concurrency {concurrency} is more than the server's {info.slots} parallel slot(s) "
                     f"({info.source}): the rest queue inside the server and their wait counts against --timeout "
                     f"({get('timeout', 120.0):g} s); --concurrency {info.slots} is enough")
    if hasattr(args, "concurrency"):
        args.concurrency = concurrency
    args.server_info = info
    args.judge_notes = notes
    return judge


def context_notes(judge, windows, documents, queries, info, max_tokens: int | None) -> list[str]:
    """A warning line when the largest of ``windows`` cannot fit the server's reported context (else none).

    Never raises: a judge that cannot render or count gives no warning.
    """
    from rcp_jax.judging.lookup import PerQuery
    from rcp_jax.judging.transport.server_info import context_warning

    if info is None or info.context is None or not windows:
        return []
    try:
        docs = PerQuery(documents)
        worst, label = 0, ""
        for w in windows:
            rendered = judge.render(w, queries[w.query_id], [docs.get(w.query_id, d) for d in w.doc_ids])
            tokens, _ = judge.count_tokens(rendered.messages)
            if tokens > worst:
                worst, label = tokens, w.label
        warning = context_warning(info, worst, max_tokens, window=label)
    except Exception:  # noqa: BLE001 - a warning must never block a run
        return []
    return [warning] if warning else []
