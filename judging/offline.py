"""Offline judges: answer text from a known truth, through the same render -> text -> parse path.

:class:`SimulatedJudge` reads each document's latent relevance (a float; ~N(0, 1.5^2) is a natural
scale) and writes the answer a judge would write, as JSON text:

- tournament: ``score_i = clip(round(decisiveness_q * latent_i + shift_q + noise * e_i), -5, 5)``,
  then made distinct within the window (for w <= 11) by moving colliding scores to the nearest free
  integer while keeping their order; ``e_i ~ N(0, 1)``.
- rubric: criterion c passes with probability ``sigmoid(gamma_c * (latent_i - beta_c))``; the rubric
  reads the latent as the cross-query ability, so per-query decisiveness / shift do not apply.
- lists (two ranked lists A and B): each document's gain is ``g(latent) = sum_c gamma_c
  sigmoid(gamma_c (latent - beta_c)) / sum_c gamma_c`` (the RCP gain curve of the judge's items); with
  ``D = DCG`` of those gains (discount ``1 / log2(rank + 1)``), the judge answers ``"A"`` when
  ``(D_A - D_B) / max(D_A, D_B) + position_bias + list_noise * e >= 0``, else ``"B"``; ``e ~ N(0, 1)``.
  ``position_bias > 0`` favours the list shown first (a large value makes a judge that always says A).

Randomness is seeded from (seed, stage, query id, window documents), so a window's answer never
depends on the order windows are asked in. With ``malformed_rate > 0`` a seeded share of *attempts*
returns a malformed answer (truncated JSON, a missing or unknown document, an out-of-range value,
prose, a refusal, broken JSON), so every invalid path runs; a re-ask can then succeed.

Example
-------
>>> from rcp_jax.judging.offline import SimulatedJudge
>>> from rcp_jax.judging.answers.parse import parse_tournament
>>> judge = SimulatedJudge({"q1": {"a": 2.0, "b": -1.0, "c": 0.5}}, seed=1)
>>> text, finish = judge.answer("tournament", "q1", ["a", "b", "c"])
>>> parse_tournament(text, ["a", "b", "c"], finish_reason=finish).scores
{'a': 2.0, 'b': -1.0, 'c': 1.0}
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rcp_jax.judging.judge import DEFAULT_MAX_WINDOW_CHARS, BaseJudge, Completion, JudgeRequest
from rcp_jax.judging.lookup import PerQuery
from rcp_jax.judging.prompts.render import list_positional_ids, positional_ids
from rcp_jax.judging.prompts.template import PromptTemplate
from rcp_jax.judging.store.records import JudgeFamily, Usage

#: Published NanoBEIR item parameters (METHOD section 3), the default rubric of the simulated judge.
DEFAULT_GAMMA: tuple[float, ...] = (1.169, 1.047, 0.940, 1.157, 0.687)
DEFAULT_BETA: tuple[float, ...] = (-2.572, -2.002, -0.251, 0.709, 4.116)

MALFORMED_KINDS: tuple[str, ...] = (
    "truncated",
    "missing_doc",
    "unknown_doc",
    "out_of_range",
    "prose",
    "refusal",
    "broken_json",
)


def _rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def distinct_scores(raw: Sequence[float], low: int = -5, high: int = 5) -> list[int]:
    """Round ``raw`` (float[w]) to integers in [low, high], made distinct while keeping their order.

    Returns int[w]. Scores that collide are pushed to the nearest free integer below (then, if the
    floor is hit, above). With more than ``high - low + 1`` documents ties are unavoidable; the
    scores are then only rounded and clipped.
    """
    w = len(raw)
    clipped = [min(high, max(low, round(x))) for x in raw]
    if w > high - low + 1:
        return clipped
    order = sorted(range(w), key=lambda i: (-raw[i], i))
    vals = [clipped[i] for i in order]
    for j in range(1, w):
        vals[j] = min(vals[j], vals[j - 1] - 1)
    for j in range(w - 1, -1, -1):
        vals[j] = max(vals[j], low + (w - 1 - j))
    out = [0] * w
    for rank, i in enumerate(order):
        out[i] = vals[rank]
    return out


class SimulatedJudge(BaseJudge):
    """A deterministic judge driven by latent relevance; see the module docstring.

    Parameters
    ----------
    latent : latent relevance per document: ``{query_id: {doc_id: float}}`` or a corpus-wide
        ``{doc_id: float}``. Documents not listed get ``unknown_latent``.
    decisiveness : tournament scale, one float or ``{query_id: float}`` (default 1.0).
    shift : tournament offset, one float or ``{query_id: float}`` (default 0.0).
    noise : standard deviation of the tournament's per-document noise (score points).
    gamma, beta : rubric item slopes and difficulties, one per criterion. When a template asks for a
        different number of criteria K, K difficulties are spread evenly over [beta[0], beta[-1]]
        with the mean slope.
    malformed_rate : share of attempts answered with a malformed answer, in [0, 1].
    latency : seconds each call waits before answering (simulates a server).
    seed : base of every random stream.
    decorate : wrap some valid answers in a code fence or a ``<think>`` block (seeded), to exercise
        tolerant decoding.
    list_noise : lists stage: standard deviation of the noise on the relative DCG difference.
    position_bias : lists stage: advantage of the list shown first (relative DCG units).
    severity, discrimination : rubric only: a stricter (severity > 0) or more decisive (discrimination > 1)
        judge of the same criteria, ``P(yes) = sigmoid(discrimination * gamma_c (latent - beta_c - severity))``;
        a second judge for the pooled calibration (:mod:`rcp_jax.judges`). Part of the family only when not
        the defaults (0, 1), so other judges keep their record ids.
    """

    def __init__(
        self,
        latent: Mapping[str, float] | Mapping[str, Mapping[str, float]],
        *,
        decisiveness: float | Mapping[str, float] = 1.0,
        shift: float | Mapping[str, float] = 0.0,
        noise: float = 0.5,
        gamma: Sequence[float] = DEFAULT_GAMMA,
        beta: Sequence[float] = DEFAULT_BETA,
        malformed_rate: float = 0.0,
        latency: float = 0.0,
        seed: int = 0,
        decorate: bool = True,
        unknown_latent: float = 0.0,
        model: str = "simulated",
        prompts: Mapping[str, PromptTemplate | str] | None = None,
        max_window_chars: int | None = DEFAULT_MAX_WINDOW_CHARS,
        list_noise: float = 0.01,
        position_bias: float = 0.0,
        severity: float = 0.0,
        discrimination: float = 1.0,
    ) -> None:
        super().__init__(model, prompts=prompts, max_window_chars=max_window_chars)
        if not 0.0 <= malformed_rate <= 1.0:
            raise ValueError(f"malformed_rate must be in [0, 1], got {malformed_rate}")
        if len(gamma) != len(beta):
            raise ValueError(f"gamma has {len(gamma)} entries but beta has {len(beta)}; give one pair per criterion")
        self.latent = PerQuery(latent, what="latent relevance")
        self._decisiveness = decisiveness
        self._shift = shift
        self.noise = float(noise)
        self.gamma = tuple(float(g) for g in gamma)
        self.beta = tuple(float(b) for b in beta)
        self.malformed_rate = float(malformed_rate)
        self.latency = float(latency)
        self.seed = int(seed)
        self.decorate = decorate
        self.unknown_latent = float(unknown_latent)
        if list_noise < 0:
            raise ValueError(f"list_noise must be >= 0, got {list_noise}")
        self.list_noise = float(list_noise)
        self.position_bias = float(position_bias)
        if not discrimination > 0:
            raise ValueError(f"discrimination must be > 0, got {discrimination}")
        self.severity = float(severity)
        self.discrimination = float(discrimination)

    # -- settings -------------------------------------------------------------------------------------

    def decoding(self) -> dict[str, Any]:
        return {
            **super().decoding(),
            "simulator": {
                "seed": self.seed,
                "noise": self.noise,
                "gamma": list(self.gamma),
                "beta": list(self.beta),
                "malformed_rate": self.malformed_rate,
                "decorate": self.decorate,
                **({"severity": self.severity} if self.severity else {}),
                **({"discrimination": self.discrimination} if self.discrimination != 1.0 else {}),
            },
        }

    def family(self, stage: str) -> JudgeFamily:
        """As :meth:`BaseJudge.family`; the lists settings enter only the lists family, so tournament and
        rubric records keep their ids whatever they are."""
        fam = super().family(stage)
        if stage != "lists":
            return fam
        extra = {"list_noise": self.list_noise, "position_bias": self.position_bias}
        return replace(fam, decoding={**fam.decoding, "simulator": {**fam.decoding["simulator"], **extra}})

    def _gain(self, latent: float) -> float:
        total = sum(self.gamma)
        return sum(g * _sigmoid(g * (latent - b)) for g, b in zip(self.gamma, self.beta, strict=True)) / total

    def _dcg(self, latents: Sequence[float]) -> float:
        return sum(self._gain(x) / math.log2(r + 2) for r, x in enumerate(latents))

    def _per_query(self, value: float | Mapping[str, float], query_id: str, default: float) -> float:
        if isinstance(value, Mapping):
            return float(value.get(query_id, default))
        return float(value)

    def _latent(self, query_id: str, doc_id: str | None) -> float:
        if doc_id is None:
            return self.unknown_latent
        try:
            return float(self.latent.get(query_id, doc_id))
        except KeyError:
            return self.unknown_latent

    def _items(self, n_criteria: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
        if n_criteria == len(self.beta):
            return self.gamma, self.beta
        mean_gamma = sum(self.gamma) / len(self.gamma)
        lo, hi = self.beta[0], self.beta[-1]
        betas = tuple(lo + (hi - lo) * k / max(n_criteria - 1, 1) for k in range(n_criteria))
        return (mean_gamma,) * n_criteria, betas

    # -- answers --------------------------------------------------------------------------------------

    def answer(
        self,
        stage: str,
        query_id: str,
        doc_ids: Sequence[str | None],
        n_criteria: int = 5,
        attempt: int = 1,
        split: int = 0,
    ) -> tuple[str, str]:
        """Answer text and finish reason for a window (real ids in shown order; ``None`` = unknown doc).

        ``split`` (lists stage only) is the length of list A. The valid content depends only on (seed,
        stage, query, documents, split); whether this attempt is malformed depends on the attempt number too.
        """
        if not doc_ids:
            return "There are no documents in this request to judge.", "stop"
        key = (self.seed, stage, query_id, list(doc_ids)) + ((split,) if stage == "lists" else ())
        rng = _rng(*key)
        pos = positional_ids(len(doc_ids))
        latents = [self._latent(query_id, d) for d in doc_ids]
        if stage == "lists":
            if not 1 <= split < len(doc_ids):
                return "I need two non-empty lists to compare.", "stop"
            pos = list_positional_ids(len(doc_ids), split)
            dcg_a, dcg_b = self._dcg(latents[:split]), self._dcg(latents[split:])
            top = max(dcg_a, dcg_b, 1e-12)
            margin = (dcg_a - dcg_b) / top + self.position_bias + self.list_noise * rng.gauss(0.0, 1.0)
            pick = "A" if margin >= 0 else "B"
            obj: dict[str, Any] = {
                "reasoning": f"List {pick} places the more useful documents nearer the top.",
                "better": pick,
            }
        elif stage == "tournament":
            dec = self._per_query(self._decisiveness, query_id, 1.0)
            sh = self._per_query(self._shift, query_id, 0.0)
            raw = [dec * lat + sh + self.noise * rng.gauss(0.0, 1.0) for lat in latents]
            scores = distinct_scores(raw)
            ranking = [pos[i] for i in sorted(range(len(pos)), key=lambda i: -scores[i])]
            obj = {
                "reasoning": f"{ranking[0]} serves the query best and {ranking[-1]} least; the rest fall between.",
                "ranking": ranking,
                "scores": {p: s for p, s in zip(pos, scores, strict=True)},
            }
        else:
            gammas, betas = self._items(n_criteria)
            obj = {}
            for p, lat in zip(pos, latents, strict=True):
                ans = {
                    f"C{k + 1}": int(rng.random() < _sigmoid(self.discrimination * g * (lat - b - self.severity)))
                    for k, (g, b) in enumerate(zip(gammas, betas, strict=True))
                }
                obj[p] = {"reasoning": f"Meets {sum(ans.values())} of {n_criteria} criteria.", "criteria": ans}
        malformed = _rng(*key, "malformed", attempt)
        if self.malformed_rate > 0 and malformed.random() < self.malformed_rate:
            return self._malformed(malformed.choice(MALFORMED_KINDS), stage, obj, pos)
        text = json.dumps(obj)
        if self.decorate:
            style = rng.random()
            if style < 0.15:
                text = f"```json\n{text}\n```"
            elif style < 0.25:
                text = f"<think>Weighing the documents against the query.</think>\n{text}"
        return text, "stop"

    def _malformed(self, kind: str, stage: str, obj: dict[str, Any], pos: Sequence[str]) -> tuple[str, str]:
        obj = json.loads(json.dumps(obj))
        if stage == "lists" and kind in ("missing_doc", "unknown_doc", "out_of_range"):
            if kind == "missing_doc":
                obj.pop("better")
            else:
                obj["better"] = "C" if kind == "unknown_doc" else "both"
            return json.dumps(obj), "stop"
        inner = obj["scores"] if stage == "tournament" else obj
        if kind == "truncated":
            text = json.dumps(obj)
            return text[: max(1, int(len(text) * 0.6))], "length"
        if kind == "missing_doc":
            inner.pop(pos[-1])
            if stage == "tournament":
                obj["ranking"] = [r for r in obj["ranking"] if r != pos[-1]]
        elif kind == "unknown_doc":
            extra = f"doc_{len(pos) + 1}"
            inner[extra] = 0 if stage == "tournament" else {"reasoning": "", "criteria": dict(inner[pos[0]]["criteria"])}
        elif kind == "out_of_range":
            if stage == "tournament":
                inner[pos[0]] = 9
            else:
                inner[pos[0]]["criteria"]["C1"] = 2
        elif kind == "prose":
            return f"All things considered, {pos[0]} looks the most useful of these.", "stop"
        elif kind == "refusal":
            return "I'm sorry, but I can't help with that request.", "stop"
        elif kind == "broken_json":
            return json.dumps(obj).replace(":", " ", 1), "stop"
        return json.dumps(obj), "stop"

    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The simulated judge is free."""
        return 0.0

    async def complete(self, request: JudgeRequest) -> Completion:
        """Answer one request (after ``latency`` seconds)."""
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        window = request.window
        text, finish = self.answer(
            window.stage, window.query_id, window.doc_ids, request.rendered.n_criteria or 5, request.attempt,
            split=window.split,
        )
        usage = Usage(prompt_tokens=len(request.rendered.text) // 4, completion_tokens=len(text) // 4, cost_usd=0.0)
        self.ledger.add(usage)
        return Completion(text=text, finish_reason=finish, usage=usage)


def synthetic_dataset(
    n_queries: int, docs_per_query: int, *, seed: int = 0, doc_chars: int = 400
) -> tuple[dict[str, str], dict[str, dict[str, str]], dict[str, dict[str, float]]]:
    """A small synthetic dataset: (queries, documents, latent).

    Returns ``queries[qid] -> text``, ``documents[qid][doc_id] -> text`` (distinct texts of about
    ``doc_chars`` characters) and ``latent[qid][doc_id] -> float`` (~N(0, 1.5^2)). Deterministic in
    ``seed``; used by tests, the benchmark and the fake server.
    """
    rng = random.Random(seed)
    words = ["alpha", "river", "engine", "protein", "market", "orbit", "lattice", "harbor", "signal", "cobalt"]
    queries: dict[str, str] = {}
    documents: dict[str, dict[str, str]] = {}
    latent: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        queries[qid] = f"what is known about {rng.choice(words)} {rng.choice(words)} ({qid})?"
        documents[qid] = {}
        latent[qid] = {}
        for d in range(docs_per_query):
            did = f"{qid}-d{d}"
            body = " ".join(rng.choice(words) for _ in range(max(1, doc_chars // 7)))
            documents[qid][did] = f"Document {did}. {body}"[:doc_chars]
            latent[qid][did] = rng.gauss(0.0, 1.5)
    return queries, documents, latent
