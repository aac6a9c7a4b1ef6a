"""``rcp-jax doctor``: ask the judge a few windows and say whether it can judge, and whether it reads the documents.

Before paying for a whole collection, ``doctor`` asks a handful of windows with the very settings ``judge``
would use (same ``--model``, ``--api-base``, ``--structured-output``, ``--max-tokens``, ... and the same
windows of the schedule): ``--pairs`` round-1 tournament windows (default 2), each with its reversed copy
as the schedule asks it, the first from the ``--query`` query and the next from the following queries,
and the first balanced rubric window of the ``--query`` query: ``2 * pairs + 1`` calls. For each it prints
the raw answer (cut to ``--show-chars``), how the parser read it (valid, or the invalid category and
detail), the tokens used, the latency and the structured-output mode.

Answers that parse can still say nothing: then the answer-quality signals of
:mod:`rcp_jax.answer_quality` fail it (every window tied, scores that follow the slot instead of the
document, one ranking repeated across windows and reversed copies, the prompt's placeholders copied back),
each named with its strength. A one-line verdict and what to try next close the report.

With several endpoints (``--api-base`` repeated, ``--api-base-file``) each one is asked the same windows
and gets its own report and verdict; the run passes only if every endpoint does. Without ``--dataset`` /
``--rows`` the windows come from the embedded demo, and the report says so.

It writes nothing: no judgement store, no files (``--json`` prints the report on stdout).

Exit codes: 0 every answer parses and no quality signal fails; 3 the judge failed (an answer did not
parse, a call failed, or a quality signal failed); 2 bad input (collection, pools, options).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from typing import Any

from rcp_jax.cli._common import (
    add_collection_args, add_judge_args, collection_name, emit, latent_from_qrels, load_collection, make_judge, pipeline_input,
)

NAME = "doctor"
HELP = ("check a judge on a few tournament windows (each also reversed) and one rubric window: raw answers, parse "
        "categories, tokens, whether the answers follow the documents, a verdict")

#: Exit code of a judge that cannot judge (an answer that does not parse, a call that fails).
EXIT_JUDGE_FAILED = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_collection_args(p)
    add_judge_args(p)
    p.add_argument("--query", default=None,
                   help="query id whose first windows are asked (default: the first query id in sorted order)")
    p.add_argument("--pairs", type=int, default=2,
                   help="round-1 tournament windows asked, each with its reversed copy (default 2: 4 tournament "
                        "calls, enough for the answer-quality signals on windows of 10 documents)")
    p.add_argument("--show-chars", type=int, default=600,
                   help="characters of each raw answer printed (default 600; --json always carries the whole answer)")


@dataclass
class Probe:
    """One window asked: what was sent and what came back.

    ``latency_s`` is wall seconds of the call (transport retries included); ``error`` is the judge
    error's message when the call itself failed (then nothing was parsed). ``window_id`` is
    ``phase#sequence`` (as in the store's tables); ``scores`` the parsed tournament scores by real document
    id (``None`` unless a valid tournament answer); ``api_base`` the endpoint asked (``None``: the
    provider's own, or an offline judge).
    """

    stage: str
    window: str
    doc_ids: list[str]
    prompt_chars: int
    query_id: str = ""
    window_id: str = ""
    api_base: str | None = None
    scores: dict[str, float] | None = None
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
    placeholders: list[str] = field(default_factory=list)  # the answer template's, looked for in the answer

    def as_dict(self) -> dict[str, Any]:
        """The window's check as plain JSON-ready fields (doctor --json)."""
        return dict(self.__dict__)


# -- the collection and the windows ---------------------------------------------------------------------


def _collection(args):
    """(PipelineInput, latent relevance or None): the given collection, or the embedded demo."""
    if args.dataset or args.rows or getattr(args, "corpus", None):
        col, pools = load_collection(args)
        name = collection_name(args)
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


def _windows(collection, query: str | None, seed: int, pairs: int = 1) -> list:
    """``pairs`` round-1 tournament windows, each followed by its reversed copy, then the first balanced
    rubric window of ``query``.

    The pairs go round the queries, ``query`` first then the others in sorted order: the first pair of
    each, then the second of each, ... (windows of several queries show whether one answer shape is
    repeated whatever the documents). Fewer pairs when the pools hold fewer round-1 windows.
    """
    import warnings

    from rcp_jax import schedule as S
    from rcp_jax.errors import DataError

    ids = sorted(collection.pools)
    if query is None:
        query = ids[0]
    elif query not in collection.pools:
        some = ", ".join(ids[:5])
        raise DataError(f"--query {query}: no pool for this query id (pooled queries include {some})")
    order = [query, *(q for q in ids if q != query)]
    tour: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", S.ScheduleWarning)
        rub = S.rubric_balanced(query, collection.pools[query], seed=seed, dataset=collection.dataset)
        by_query: dict[str, list[list]] = {}
        for rank in range(pairs):
            for q in order:
                if len(tour) >= 2 * pairs:
                    break
                if q not in by_query:
                    found: dict[int, list] = {}
                    for w in S.tournament_round1(q, collection.pools[q], seed=seed, dataset=collection.dataset):
                        found.setdefault(w.sequence, []).append(w)
                    by_query[q] = [found[k] for k in sorted(found)]
                if rank < len(by_query[q]):
                    tour += by_query[q][rank]
            if len(tour) >= 2 * pairs or not any(rank + 1 < len(v) for v in by_query.values()):
                break
    return [*tour, *rub[:1]]


def _doc_value(collection, query: str, doc: str):
    """The corpus value of ``doc`` (a text, or a :class:`rcp_jax.judging.prompts.pages.Document` for a page)."""
    docs = collection.documents
    inner = docs.get(query)
    if isinstance(inner, dict):
        return inner[doc]
    return docs[doc]


# -- asking ---------------------------------------------------------------------------------------------


async def _ask(judge, collection, window, api_base: str | None = None) -> Probe:
    from rcp_jax.answer_quality import template_placeholders
    from rcp_jax.judging.answers.parse import ParseResult, echoed_documents, parse_answer
    from rcp_jax.judging.errors import JudgeError
    from rcp_jax.judging.judge import JudgeRequest
    from rcp_jax.judging.prompts.pages import doc_text, message_text

    values = [_doc_value(collection, window.query_id, d) for d in window.doc_ids]
    rendered = judge.render(window, collection.queries[window.query_id], values)
    prompt = "\n".join(message_text(m["content"]) for m in rendered.messages)
    probe = Probe(stage=window.stage, window=window.label, doc_ids=list(window.doc_ids), prompt_chars=len(prompt),
                  query_id=window.query_id, window_id=f"{window.phase}#{window.sequence}", api_base=api_base)
    probe.placeholders = template_placeholders(prompt)
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
    if parsed.valid and parsed.scores is not None:
        probe.scores = {d: float(parsed.scores[d]) for d in window.doc_ids}
    probe.raw_answer, probe.finish_reason = completion.text, completion.finish_reason
    probe.prompt_tokens = completion.usage.prompt_tokens
    probe.completion_tokens = completion.usage.completion_tokens
    probe.transport_retries = completion.transport_retries
    echoed = echoed_documents(completion.text, window.doc_ids, [doc_text(v) for v in values], stage=window.stage,
                              finish_reason=completion.finish_reason)
    probe.flags = [f"echoes_document:{d}" for d in echoed]
    return probe


async def _ask_all(judge, collection, windows, api_base: str | None = None) -> list[Probe]:
    try:  # one at a time: latency is the call's own
        return [await _ask(judge, collection, w, api_base) for w in windows]
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


def verdict(probes: list[Probe], *, structured: str, max_tokens: int | None,
            signals: list | None = None) -> tuple[bool, str, list[str]]:
    """(ok, one-line verdict, what to try next) from the probes and the answer-quality ``signals``
    (:func:`rcp_jax.answer_quality.assess`, ``None``: none).

    The advice follows the first problem found, in this order: a call that failed (credentials,
    endpoint, rejected request, transport), an answer cut at the token limit, no JSON at all, JSON of the
    wrong shape, a refusal, then answers that parse but ignore the documents (a failed quality signal).
    """
    blind = [s for s in (signals or []) if s.failed]
    if all(p.valid for p in probes) and not blind:
        tokens = sum(p.prompt_tokens + p.completion_tokens for p in probes)
        return True, (f"OK: all {len(probes)} windows parse and the answers follow the documents ({tokens} tokens "
                      "in all); this judge can run the schedule"), [
            "rcp-jax judge ... --estimate (the same options) for the whole plan's calls and tokens",
            "then rcp-jax judge ... --store <folder>, with --concurrency at most the server's parallel slots",
        ]
    if all(p.valid for p in probes):
        head = "FAILED: the answers parse but ignore the documents: " + "; ".join(
            f"{s.name} ({s.brief})" for s in blind) + " (the answer quality lines above say more)"
        return False, head, [*_blind_advice(blind),
                             "run rcp-jax doctor again after each change; judge a collection only once it passes"]
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
    if blind:
        head += "; and the answers that parse ignore the documents (" + ", ".join(s.name for s in blind) + ")"
        advice += _blind_advice(blind)
    advice.append("run rcp-jax doctor again after each change; judge a collection only once every window parses")
    return False, head, advice


def _blind_advice(blind: list) -> list[str]:
    """What to try when answers ignore the documents (the failed quality signals ``blind``)."""
    names = {s.name for s in blind}
    out = ["the model answers the shape of the prompt, not its documents: use a larger, instruction-tuned model "
           "(a small or base model fills the template in); check that the server applies the model's chat "
           "template (llama.cpp: --jinja or --chat-format; a base model without one continues the prompt)"]
    if "echo" in names:
        out.append("it copies the answer template's placeholders (e.g. '<a few sentences comparing the documents>')"
                   " into its answer: the model does not follow instructions")
    if names & {"position", "repeated", "mirror"}:
        out.append("its scores follow the slot a document sits in (the same ranking whatever the documents, "
                   "reversed windows scored alike): structured output cannot fix this; another model can")
    if "all_tied" in names:
        out.append("it gives every document of a window one score, although the prompt asks for distinct ones: "
                   "it cannot tell them apart or does not try")
    return out


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


def _quality(probes: list[Probe]) -> list:
    """The answer-quality signals of the probes (:func:`rcp_jax.answer_quality.assess`): the valid
    tournament answers as a store's window-scores table, every answer's text for the placeholder echo (the
    placeholders of the prompts sent and of the built-in templates)."""
    import pandas as pd

    from rcp_jax.answer_quality import assess, builtin_placeholders

    rows = [(p.query_id, p.window_id, d, p.scores[d]) for p in probes if p.scores is not None for d in p.doc_ids]
    table = pd.DataFrame(rows, columns=["query_id", "window_id", "doc_id", "score"])
    placeholders = list(dict.fromkeys([x for p in probes for x in p.placeholders] + builtin_placeholders()))
    texts = [p.raw_answer for p in probes if p.error is None]
    return assess(table, texts, placeholders=placeholders)


def _endpoint_args(args) -> list:
    """One namespace per endpoint to check (``args`` itself for one endpoint, an offline judge, or the
    provider's own endpoint); each copy is restricted to its endpoint."""
    import copy

    from rcp_jax.cli._endpoints import endpoints_of

    if args.model == "simulated":
        return [args]
    endpoints = endpoints_of(args)
    if len(endpoints) < 2:
        return [args]
    out = []
    for e in endpoints:
        one = copy.copy(args)
        one.only_endpoint, one.api_base = e, e.api_base
        out.append(one)
    return out


def _check(args, collection, latent, windows) -> dict:
    """Ask ``windows`` of the one endpoint of ``args``: its probes, signals, verdict and report lines."""
    from rcp_jax.judging.prompts.rubric import judge_rubric
    from rcp_jax.judging.transport.loop import run as run_interruptible  # Ctrl-C / SIGTERM leave no coroutine un-awaited

    judge = make_judge(args, latent)
    judge.prepare()  # load litellm now, so the first window's latency is the call's own (the import takes seconds)
    structured = _structured_mode(judge)
    started = time.perf_counter()
    probes = run_interruptible(_ask_all(judge, collection, windows, getattr(args, "api_base", None)))
    elapsed = time.perf_counter() - started
    max_tokens = getattr(judge, "max_tokens", getattr(args, "max_tokens", None))
    signals = _quality(probes)
    ok, line, advice = verdict(probes, structured=structured, max_tokens=max_tokens, signals=signals)
    server_lines, warnings = _server_lines(args, probes, max_tokens)
    rubric = judge_rubric(judge)
    head = (f"model {args.model}" + (f" at {args.api_base}" if args.api_base else "")
            + f", structured output {structured}, max tokens {max_tokens}"
            + (f", rubric {rubric['name']!r} ({len(rubric['criteria'])} criteria)" if rubric else ""))
    lines = [head, *server_lines]
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
    lines += ["", "answer quality (do the answers follow the documents?):"]
    lines += [f"  {'FAILED' if s.failed else ('ok' if s.decidable else 'n/a')} {s.name}: {s.message}" for s in signals]
    lines += ["", *[f"warning: {w}" for w in warnings], f"verdict: {line}", *[f"next: {a}" for a in advice]]
    return {"ok": ok, "verdict": line, "next": advice, "model": args.model, "api_base": args.api_base,
            "structured_output": structured, "max_tokens": max_tokens, "seconds": round(elapsed, 3),
            "server": server_lines, "warnings": warnings, "rubric": rubric,
            "quality": [s.as_dict() for s in signals], "windows": [p.as_dict() for p in probes], "lines": lines}


def run(args) -> int:
    from rcp_jax.errors import DataError

    if args.show_chars < 0:
        raise DataError(f"--show-chars must be >= 0, got {args.show_chars}")
    if args.pairs < 1:
        raise DataError(f"--pairs must be >= 1, got {args.pairs}")
    collection, latent = _collection(args)
    demo = not (args.dataset or args.rows or getattr(args, "corpus", None))
    source = ("the embedded demo (no --dataset or --rows given: pass your collection to check the judge on your "
              "own documents)" if demo else f"{collection.dataset} ({len(collection.pools)} pooled queries)")
    windows = _windows(collection, args.query, args.seed, args.pairs)
    several = _endpoint_args(args)
    reports = [_check(one, collection, latent, windows) for one in several]
    first = reports[0]
    n_tour = sum(w.stage == "tournament" for w in windows)
    lines = [f"rcp-jax doctor: collection {source}; query {windows[0].query_id}; {n_tour} tournament windows "
             f"({n_tour // 2} with their reversed copies) and {len(windows) - n_tour} rubric window per endpoint"]
    if len(reports) == 1:
        ok, line, advice = first["ok"], first["verdict"], first["next"]
        lines += first["lines"]
    else:
        bad = [r for r in reports if not r["ok"]]
        ok = not bad
        line = (f"OK: all {len(reports)} endpoints pass" if ok else
                f"FAILED: {len(bad)} of {len(reports)} endpoints fail: "
                + "; ".join(f"{r['api_base']}: {r['verdict']}" for r in bad))
        advice = list(dict.fromkeys(a for r in (bad or reports[:1]) for a in r["next"]))
        for r in reports:
            lines += ["", f"== endpoint {r['api_base']} ==", *r["lines"]]
        lines += ["", "== all endpoints ==", *[f"{'ok' if r['ok'] else 'FAILED'} {r['api_base']}" for r in reports],
                  f"verdict: {line}", *[f"next: {a}" for a in advice]]
    payload = {
        "ok": ok, "verdict": line, "next": advice, "model": args.model, "api_base": args.api_base,
        "collection": "demo" if demo else ("dataset" if args.dataset else "rows" if args.rows else "corpus"), "collection_note": source,
        "structured_output": first["structured_output"], "max_tokens": first["max_tokens"],
        "query_id": windows[0].query_id, "dataset": collection.dataset,
        "seconds": round(sum(r["seconds"] for r in reports), 3),
        "server": [x for r in reports for x in r["server"]], "warnings": [x for r in reports for x in r["warnings"]],
        "windows": [w for r in reports for w in r["windows"]], "quality": first["quality"],
        "rubric": first["rubric"],
        "endpoints": [{k: v for k, v in r.items() if k != "lines"} for r in reports],
    }
    emit(args, payload, "\n".join(lines))
    return 0 if ok else EXIT_JUDGE_FAILED
