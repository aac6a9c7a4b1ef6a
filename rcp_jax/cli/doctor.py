"""``rcp-jax doctor``: ask the judge one tournament window and one rubric window and say whether it can judge.

Before paying for a whole collection, ``doctor`` sends exactly two calls with the very settings ``judge``
would use (same ``--model``, ``--api-base``, ``--structured-output``, ``--max-tokens``, ... and the same
first windows of the schedule): the first round-1 tournament window and the first balanced rubric window
of one query. For each it prints the raw answer (cut to ``--show-chars``), how the parser read it (valid,
or the invalid category and detail), the tokens used, the latency and the structured-output mode, then a
one-line verdict and what to try next (a larger model, another ``--structured-output``, more
``--max-tokens``, the credentials or the endpoint).

It writes nothing: no judgement store, no files (``--json`` prints the report on stdout).

Exit codes: 0 both answers parse; 3 the judge failed (an answer did not parse, or a call failed); 2 bad
input (collection, pools, options).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from typing import Any

from rcp_jax.cli._common import (
    add_collection_args, add_judge_args, emit, latent_from_qrels, load_collection, make_judge, pipeline_input,
)

NAME = "doctor"
HELP = "check a judge on one tournament and one rubric window: raw answers, parse categories, tokens, a verdict"

#: Exit code of a judge that cannot judge (an answer that does not parse, a call that fails).
EXIT_JUDGE_FAILED = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_collection_args(p)
    add_judge_args(p)
    p.add_argument("--query", default=None,
                   help="query id whose first windows are asked (default: the first query id in sorted order)")
    p.add_argument("--show-chars", type=int, default=600,
                   help="characters of each raw answer printed (default 600; --json always carries the whole answer)")


@dataclass
class Probe:
    """One window asked: what was sent and what came back.

    ``latency_s`` is wall seconds of the call (transport retries included); ``error`` is the judge
    error's message when the call itself failed (then nothing was parsed).
    """

    stage: str
    window: str
    doc_ids: list[str]
    prompt_chars: int
    valid: bool = False
    category: str | None = None
    detail: str = ""
    raw_answer: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    transport_retries: int = 0
    error: str | None = None
    error_type: str | None = None
    flags: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# -- the collection and the two windows -----------------------------------------------------------------


def _collection(args):
    """(PipelineInput, latent relevance or None): the given collection, or the embedded demo."""
    if args.dataset or args.rows:
        col, pools = load_collection(args)
        name = args.name or (args.dataset.name if args.dataset else args.rows.stem)
        collection = pipeline_input(col, pools, name)
        latent = latent_from_qrels(collection.pools, collection.qrels, args.seed) if args.model == "simulated" else None
        return collection, latent
    from rcp_jax.demo.dataset import load_demo
    from rcp_jax.pipeline import PipelineInput

    demo = load_demo()
    collection = PipelineInput.from_tables(demo.corpus, demo.queries, demo.pools, qrels=demo.qrels,
                                           dataset=args.name or "rcp-jax-demo")
    latent: dict[str, dict[str, float]] = {}
    for q, d, v in demo.latent[["query_id", "doc_id", "latent"]].itertuples(index=False):
        latent.setdefault(str(q), {})[str(d)] = float(v)
    return collection, latent


def _windows(collection, query: str | None, seed: int) -> list:
    """The schedule's first round-1 tournament window and first balanced rubric window of ``query``."""
    import warnings

    from rcp_jax import schedule as S
    from rcp_jax.errors import DataError

    if query is None:
        query = sorted(collection.pools)[0]
    elif query not in collection.pools:
        some = ", ".join(sorted(collection.pools)[:5])
        raise DataError(f"--query {query}: no pool for this query id (pooled queries include {some})")
    docs = collection.pools[query]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", S.ScheduleWarning)
        tour = S.tournament_round1(query, docs, seed=seed, dataset=collection.dataset)
        rub = S.rubric_balanced(query, docs, seed=seed, dataset=collection.dataset)
    return [tour[0], rub[0]]


def _doc_text(collection, query: str, doc: str) -> str:
    docs = collection.documents
    inner = docs.get(query)
    if isinstance(inner, dict):
        return inner[doc]
    return docs[doc]


# -- asking ---------------------------------------------------------------------------------------------


async def _ask(judge, collection, window) -> Probe:
    from judging.errors import JudgeError
    from judging.judge import JudgeRequest
    from judging.parse import ParseResult, echoed_documents, parse_answer

    texts = [_doc_text(collection, window.query_id, d) for d in window.doc_ids]
    rendered = judge.render(window, collection.queries[window.query_id], texts)
    probe = Probe(stage=window.stage, window=window.label, doc_ids=list(window.doc_ids),
                  prompt_chars=sum(len(m["content"]) for m in rendered.messages))
    started = time.perf_counter()
    try:
        completion = await judge.complete(JudgeRequest(window, rendered, 1))
    except JudgeError as err:
        probe.latency_s = round(time.perf_counter() - started, 3)
        probe.error, probe.error_type = str(err), type(err).__name__
        return probe
    probe.latency_s = round(time.perf_counter() - started, 3)
    malformed = getattr(completion, "malformed", None)  # a reply without any answer (e.g. no choices)
    if malformed:
        parsed = ParseResult(valid=False, category="malformed_response", detail=str(malformed))
    else:
        parsed = parse_answer(completion.text, stage=window.stage, doc_ids=window.doc_ids,
                              n_criteria=rendered.n_criteria, finish_reason=completion.finish_reason)
    probe.valid, probe.category, probe.detail = parsed.valid, parsed.category, parsed.detail
    probe.raw_answer, probe.finish_reason = completion.text, completion.finish_reason
    probe.prompt_tokens = completion.usage.prompt_tokens
    probe.completion_tokens = completion.usage.completion_tokens
    probe.transport_retries = completion.transport_retries
    echoed = echoed_documents(completion.text, window.doc_ids, texts, stage=window.stage,
                              finish_reason=completion.finish_reason)
    probe.flags = [f"echoes_document:{d}" for d in echoed]
    return probe


async def _ask_all(judge, collection, windows) -> list[Probe]:
    try:
        return [await _ask(judge, collection, w) for w in windows]  # one at a time: latency is the call's own
    finally:
        await judge.aclose()


def _structured_mode(judge) -> str:
    mode = getattr(judge, "structured_mode", None)
    if mode is None:
        return "n/a (offline judge)"
    try:
        return str(mode())
    except Exception as err:  # noqa: BLE001 - reported, not fatal: the calls say more
        return f"unknown ({type(err).__name__})"


# -- the verdict ----------------------------------------------------------------------------------------


def verdict(probes: list[Probe], *, structured: str, max_tokens: int | None) -> tuple[bool, str, list[str]]:
    """(ok, one-line verdict, what to try next) from the two probes.

    The advice follows the first problem found, in this order: a call that failed (credentials,
    endpoint, rejected request, transport), an answer cut at the token limit, no JSON at all, JSON of the
    wrong shape, a refusal.
    """
    if all(p.valid for p in probes):
        tokens = sum(p.prompt_tokens + p.completion_tokens for p in probes)
        return True, (f"OK: both windows parse ({tokens} tokens in all); this judge can run the schedule"), [
            "rcp-jax judge ... --estimate (the same options) for the whole plan's calls and tokens",
            "then rcp-jax judge ... --store <folder>, with --concurrency at most the server's parallel slots",
        ]
    failed = [p for p in probes if p.error is not None]
    if failed:
        p = failed[0]
        kind = p.error_type or "JudgeError"
        head = f"FAILED: the {p.stage} call failed ({kind}): {p.error.splitlines()[0][:300]}"
        advice = {
            "JudgeAuthError": ["check the API key (the provider's environment variable, e.g. OPENAI_API_KEY); "
                               "a local server without keys still needs some value, e.g. OPENAI_API_KEY=none"],
            "JudgeNotFoundError": ["check --model (litellm 'provider/name', e.g. hosted_vllm/<served name>, "
                                   "openai/<alias>, ollama_chat/<model>) and --api-base (ends in /v1 for "
                                   "OpenAI-compatible servers)"],
            "JudgeCredentialsError": ["no API key was sent: set the provider's environment variable (a local "
                                      "server without keys still needs some value, e.g. OPENAI_API_KEY=none)"],
            "JudgeStructuredOutputError": [f"the server does not take --structured-output {structured}: try "
                                           "json_object_schema (llama.cpp, llama-cpp-python), json_schema (vLLM, "
                                           "SGLang, Ollama, hosted APIs) or none"],
            "JudgeTimeoutError": ["no answer within --timeout: raise --timeout, lower --max-tokens, or use a faster "
                                  "server (the deadline includes the server's queue)"],
            "JudgeRequestError": ["the server rejected the request: try another --structured-output "
                                  f"(now {structured}), a smaller --max-tokens (now {max_tokens}), or drop "
                                  "--extra-params"],
            "JudgeTransportError": ["the server is down, overloaded or slower than --timeout: check --api-base, "
                                    "that the server is up, and raise --timeout"],
        }.get(kind, ["read the error above; check --model, --api-base and --extra-params"])
        return False, head, advice
    bad = [p for p in probes if not p.valid]
    cats = sorted({p.category or "invalid" for p in bad})
    head = "FAILED: " + "; ".join(f"the {p.stage} answer is {p.category} ({p.detail})" for p in bad)
    advice: list[str] = []
    if "truncated" in cats:
        advice.append(f"answers stop at --max-tokens (now {max_tokens}): raise it, keeping prompt + max tokens "
                      "within the server's context size (raise the server's context, e.g. --n_ctx / "
                      "--max-model-len, if needed)")
    if {"no_json", "invalid_json"} & set(cats):
        if structured in ("off", "none", "n/a (offline judge)"):
            advice.append("the model does not write JSON: turn structured output on (--structured-output "
                          "json_schema for vLLM / SGLang / OpenAI, json_object_schema for llama.cpp, json_object "
                          "otherwise)")
        else:
            advice.append(f"the model does not write usable JSON even with --structured-output {structured}: try "
                          "another mode (json_schema, json_object_schema, json_object) or a larger model")
    if {"schema", "incomplete"} & set(cats):
        if structured in ("off", "none", "json_object", "n/a (offline judge)"):
            advice.append("the JSON does not have the asked shape: send the schema (--structured-output "
                          "json_schema, or json_object_schema for llama.cpp servers) or use a larger model")
        else:
            advice.append(f"the JSON does not have the asked shape even with --structured-output {structured}: "
                          "use a larger, instruction-tuned model")
    if "malformed_response" in cats:
        advice.append("the server's reply held no answer at all: check its log; often an option it does not "
                      f"support (try --structured-output none, now {structured}, or drop --extra-params)")
    if "refused" in cats:
        advice.append("the model refused: use another model (or check the server's content filter)")
    advice.append("run rcp-jax doctor again after each change; judge a collection only once both windows parse")
    return False, head, advice


# -- the verb -------------------------------------------------------------------------------------------


def _clip(text: str, n: int) -> str:
    text = text if text else "(empty answer)"
    if n >= 0 and len(text) > n:
        return text[:n] + f" ... [{len(text) - n} more characters]"
    return text


def _server_lines(args, probes: list[Probe], max_tokens: int | None) -> tuple[list[str], list[str]]:
    """(lines about the server, warnings): its reported context and slots (``args.server_info``, set by the
    judge options where the server reports them: llama.cpp ``/props``, vLLM ``/v1/models``), the judge
    options' notes (not the concurrency they chose: doctor asks one window at a time), and a warning when a
    measured prompt plus ``max_tokens`` exceeds the context."""
    info = getattr(args, "server_info", None)
    lines = [f"note: {n}" for n in (getattr(args, "judge_notes", None) or []) if "--concurrency auto" not in n]
    warnings: list[str] = []
    context = getattr(info, "context", None)
    slots = getattr(info, "slots", None)
    if context or slots:
        lines.append("server reports: " + ", ".join(
            ([f"context {context} tokens"] if context else []) + ([f"{slots} parallel slot(s)"] if slots else []))
            + (f" ({info.source})" if getattr(info, "source", "") else ""))
    if context and max_tokens:
        for p in probes:
            if p.prompt_tokens and p.prompt_tokens + max_tokens > context:
                warnings.append(f"the {p.stage} prompt ({p.prompt_tokens} tokens) plus --max-tokens {max_tokens} "
                                f"exceeds the server's context of {context}: lower --max-tokens to at most "
                                f"{max(context - p.prompt_tokens, 0)} or raise the server's context")
    return lines, warnings


def run(args) -> int:
    from rcp_jax.errors import DataError

    if args.show_chars < 0:
        raise DataError(f"--show-chars must be >= 0, got {args.show_chars}")
    collection, latent = _collection(args)
    windows = _windows(collection, args.query, args.seed)
    judge = make_judge(args, latent)
    judge.prepare()  # load litellm now, so the first window's latency is the call's own (the import takes seconds)
    structured = _structured_mode(judge)
    started = time.perf_counter()
    from judging.loop import run as run_interruptible  # Ctrl-C / SIGTERM leave no coroutine un-awaited

    probes = run_interruptible(_ask_all(judge, collection, windows))
    elapsed = time.perf_counter() - started
    max_tokens = getattr(judge, "max_tokens", getattr(args, "max_tokens", None))
    ok, line, advice = verdict(probes, structured=structured, max_tokens=max_tokens)
    server_lines, warnings = _server_lines(args, probes, max_tokens)

    payload = {
        "ok": ok, "verdict": line, "next": advice, "model": args.model, "api_base": args.api_base,
        "structured_output": structured, "max_tokens": max_tokens, "query_id": windows[0].query_id,
        "dataset": collection.dataset, "seconds": round(elapsed, 3), "server": server_lines, "warnings": warnings,
        "windows": [p.as_dict() for p in probes],
    }
    from judging.rubric import judge_rubric

    rubric = judge_rubric(judge)
    payload["rubric"] = rubric
    lines = [f"rcp-jax doctor: model {args.model}" + (f" at {args.api_base}" if args.api_base else "")
             + f", structured output {structured}, max tokens {max_tokens}"
             + (f", rubric {rubric['name']!r} ({len(rubric['criteria'])} criteria)" if rubric else "")]
    lines += server_lines
    for p in probes:
        lines.append("")
        lines.append(f"[{p.stage}] window {p.window} ({len(p.doc_ids)} documents, {p.prompt_chars} prompt characters)")
        if p.error is not None:
            lines.append(f"  call failed after {p.latency_s:.2f} s: {p.error_type}: {p.error}")
            continue
        status = "valid" if p.valid else f"INVALID: {p.category} ({p.detail})"
        lines.append(f"  parse: {status}")
        lines.append(f"  tokens: {p.prompt_tokens} prompt + {p.completion_tokens} completion; latency "
                     f"{p.latency_s:.2f} s; finish reason {p.finish_reason}"
                     + (f"; {p.transport_retries} transport retries" if p.transport_retries else ""))
        if p.flags:
            lines.append(f"  flags: {', '.join(p.flags)}")
        lines.append("  raw answer: " + _clip(p.raw_answer, args.show_chars).replace("\n", "\n    "))
    lines += ["", *[f"warning: {w}" for w in warnings], f"verdict: {line}", *[f"next: {a}" for a in advice]]
    emit(args, payload, "\n".join(lines))
    return 0 if ok else EXIT_JUDGE_FAILED
