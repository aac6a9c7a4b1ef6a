"""What a planned set of windows will cost, before any call: calls, tokens, dollars.

Prompt tokens are counted on the real rendered prompts (text budget included) with litellm's token
counter when litellm's local model map knows the model, otherwise as characters / 4, and the
:class:`Estimate` says which. Output tokens are counted on a representative answer of the requested
shape (``reasoning_words`` words of reasoning; thinking tokens of reasoning models are extra and can
be added with ``thinking_tokens_per_call``). Re-asks after invalid answers are not included: with an
invalid rate r, multiply calls by about 1 / (1 - r).

Page images (:mod:`rcp_jax.judging.prompts.pages`) are counted as sent (after scaling to the judge's image limits): with
litellm's image rule for the model where litellm has one (OpenAI's tiles, e.g. 85 + 170 per 512-pixel
tile for gpt-4o and 2833 + 5667 for gpt-4o-mini; Anthropic's 28-pixel patches), else one token per
28 x 28-pixel patch (:func:`rcp_jax.judging.prompts.pages.approx_image_tokens`); ``token_method`` says which.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rcp_jax.judging.judge import BaseJudge
from rcp_jax.judging.lookup import PerQuery, check_window_inputs
from rcp_jax.judging.prompts.pages import check_window_images, stamp_images
from rcp_jax.judging.prompts.render import positional_ids
from rcp_jax.judging.store.jsonl import JudgementStore
from rcp_jax.judging.store.records import Window, record_id


@dataclass(frozen=True)
class Estimate:
    """A cost estimate.

    Attributes
    ----------
    calls : calls needed (one per window still to judge).
    input_tokens, output_tokens : totals over those calls.
    cost_usd : total USD, or ``None`` when the model has no known price.
    per_stage : stage -> {"calls", "input_tokens", "output_tokens"}.
    token_method : how prompt tokens were counted (a tokenizer, or chars/4 for an unknown model).
    sampled : windows actually rendered and counted (the rest extrapolated per stage).
    skipped_done : windows already valid in the given store (not counted).
    notes : plain-language caveats.
    batch_cost_usd : the same tokens at the provider's batch prices (litellm's ``input_cost_per_token_batches``
        and ``output_cost_per_token_batches``), or ``None`` when the cost map has none for the model.
    """

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    per_stage: Mapping[str, Mapping[str, int]]
    token_method: str
    sampled: int
    skipped_done: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    batch_cost_usd: float | None = None

    def summary(self) -> str:
        """One paragraph for a terminal."""
        cost = "unknown (model not priced)" if self.cost_usd is None else f"${self.cost_usd:,.2f}"
        if self.batch_cost_usd is not None:
            cost += f" online, ${self.batch_cost_usd:,.2f} at batch prices"
        lines = [
            f"{self.calls:,} calls, {self.input_tokens:,} input + {self.output_tokens:,} output tokens, cost {cost}",
            f"tokens counted with {self.token_method}" + (f" on {self.sampled:,} sampled windows" if self.sampled < self.calls else ""),
        ]
        if self.skipped_done:
            lines.append(f"{self.skipped_done:,} windows already judged in the store were left out")
        return "\n".join(lines + list(self.notes))


def representative_answer(stage: str, n_docs: int, n_criteria: int, reasoning_words: int) -> str:
    """A well-formed answer of typical length for a window of ``n_docs`` documents (for token counts)."""
    pos = positional_ids(n_docs)
    words = " ".join(["relevance"] * reasoning_words)
    if stage == "tournament":
        obj: object = {
            "reasoning": words,
            "ranking": list(pos),
            "scores": {p: round(4.5 - 9.0 * i / max(n_docs - 1, 1), 1) for i, p in enumerate(pos)},
        }
    elif stage == "lists":
        obj = {"reasoning": words, "better": "A"}
    else:
        obj = {
            p: {"reasoning": " ".join(["relevance"] * max(reasoning_words // 3, 1)), "criteria": {f"C{k + 1}": 1 for k in range(n_criteria)}}
            for p in pos
        }
    return json.dumps(obj)


def estimate_cost(
    windows: Iterable[Window],
    *,
    judge: BaseJudge,
    documents: Mapping[str, str] | Mapping[str, Mapping[str, str]],
    queries: Mapping[str, str],
    store: str | Path | JudgementStore | None = None,
    reasoning_words: int = 60,
    thinking_tokens_per_call: int = 0,
    max_counted: int = 400,
) -> Estimate:
    """Estimate calls, tokens and cost of judging ``windows`` with ``judge`` (no call is made).

    Parameters
    ----------
    windows, judge, documents, queries : as for :func:`rcp_jax.judging.judge_windows`.
    store : when given, windows already valid there are left out (as ``judge_windows`` would skip them).
    reasoning_words : words of reasoning assumed per answer (rubric: a third of it per document).
    thinking_tokens_per_call : hidden reasoning tokens to add to each call's output (reasoning models).
    max_counted : at most this many windows per stage are rendered and counted; the rest are
        extrapolated from their average (evenly spaced sample, deterministic).
    """
    windows = list(windows)
    docs: PerQuery[str] = PerQuery(documents)
    check_window_inputs(windows, docs, queries)
    windows = stamp_images(windows, docs, getattr(judge, "image_limits", None))
    check_window_images(windows, docs, getattr(judge, "image_limits", None))  # what judge_windows would refuse
    skipped = 0
    if store is not None:
        done_ids: dict[str, set[str]] = {}
        st = store if isinstance(store, JudgementStore) else JudgementStore(store)
        for stage in {w.stage for w in windows}:
            done_ids[stage] = set(st.valid(stage)) if st.folder.exists() else set()
        kept = [w for w in windows if record_id(judge.family(w.stage), w) not in done_ids[w.stage]]
        skipped = len(windows) - len(kept)
        windows = kept
    per_stage: dict[str, dict[str, int]] = {}
    methods: set[str] = set()
    sampled = n_images = 0
    for stage in sorted({w.stage for w in windows}):
        group = [w for w in windows if w.stage == stage]
        step = max(1, -(-len(group) // max_counted))
        sample = group[::step]
        n_in = n_out = 0
        for w in sample:
            texts = [docs.get(w.query_id, d) for d in w.doc_ids]
            rendered = judge.render(w, queries[w.query_id], texts)
            n_images += len(rendered.images)
            t_in, method = judge.count_tokens(rendered.messages)
            answer = representative_answer(stage, len(w.doc_ids), rendered.n_criteria, reasoning_words)
            t_out, _ = judge.count_tokens([{"role": "assistant", "content": answer}])
            methods.add(method)
            n_in += t_in
            n_out += t_out + thinking_tokens_per_call
        scale = len(group) / len(sample)
        sampled += len(sample)
        per_stage[stage] = {"calls": len(group), "input_tokens": round(n_in * scale), "output_tokens": round(n_out * scale)}
    total_in = sum(s["input_tokens"] for s in per_stage.values())
    total_out = sum(s["output_tokens"] for s in per_stage.values())
    cost = judge.price(total_in, total_out)
    rates = getattr(judge, "batch_rates", lambda: None)()
    batch_cost = None if rates is None else total_in * rates[0] + total_out * rates[1]
    notes = ["re-asks after invalid answers are not included (with invalid rate r, calls grow by ~1/(1-r))"]
    if n_images:
        notes.append(f"{n_images / max(sampled, 1):.1f} page images per window on average, counted as sent (scaled to "
                     "the image limits)")
    if any(m.startswith("chars/4") for m in methods):
        notes.append("no tokenizer for this judge's model (unknown to litellm's local map): tokens are characters / 4")
    if cost is None:
        notes.append("no price known for this model: price it with --input-cost-per-token and --output-cost-per-token "
                     "(USD per token; 0 for your own server), or input_cost_per_token= / output_cost_per_token= of "
                     "judging.LiteLLMJudge in Python")
    return Estimate(
        calls=len(windows),
        input_tokens=total_in,
        output_tokens=total_out,
        cost_usd=cost,
        per_stage=per_stage,
        token_method=" + ".join(sorted(methods)) or "nothing to count",
        sampled=sampled,
        skipped_done=skipped,
        notes=tuple(notes),
        batch_cost_usd=batch_cost,
    )
