"""Answer-quality signals of a judge: do its stored answers follow the documents, or something else?

A judge can write perfectly valid answers that say nothing: the same score pattern in every window
(``doc_1: 1, doc_2: 2, ...``), every document of a window tied, scores that follow the slot a document
sits in rather than the document, or the prompt's own answer template copied back (its placeholders, e.g.
``"<a few sentences comparing the documents>"``). Such answers parse, fit and produce numbers, and the
numbers mean nothing. The functions here read arrays and tables of stored answers (no LLM call) and
measure each of these; :func:`assess` turns the measures into :class:`Signal` s with a verdict.

What makes the signals work is the schedule. In the tournament's rounds 1 and 2 (phases ``round1``,
``round2`` and their ``*_reversed`` copies) the documents are placed in random slots and every window is
asked a second time reversed (:mod:`rcp_jax.schedule`). So for a judge that reads the documents:

- a window's scores, read slot by slot, are a random arrangement of its scores: their rank correlation
  with the slot has mean 0 and variance ``1 / (n - 1)`` for ``n`` documents (the exact null variance of
  Spearman's rho without ties), and two windows show the same slot-by-slot ranking only by chance;
- a document keeps its score when the window is reversed: the document-level rank correlation between a
  window and its reversed copy is the judge's test-retest reliability (near 1 for a consistent judge),
  while a judge that scores the slots gives the *slot* the score and the correlation is -1 for any
  monotone slot pattern.

Round-3 windows (and extension windows) show documents in BT order, best first: a good judge's scores fall
with the slot there, so only the shuffled phases are read (:data:`SHUFFLED_PHASES`).

The thresholds (each signal's docstring gives its argument) are fixed here so that ``doctor``, ``fit`` and
``diagnose`` say the same thing about the same answers:

==================  =====================================================  ==================================
signal              statistic                                              fails when
==================  =====================================================  ==================================
``all_tied``        share of windows whose documents all got one score     >= 0.5
``position``        mean Spearman rho(slot, score) over windows            ``|rho| >= 0.5`` and ``|z| >= 3``
``repeated``        share of windows showing the most common ranking       >= 0.5, with chance bound <= 1e-3
``mirror``          mean rho(score in window, score reversed) per document ``rho <= -0.5`` and ``z <= -3``
``echo``            share of answers holding a template placeholder        >= 0.1 (and at least one)
==================  =====================================================  ==================================

A signal that has too little to rest on (e.g. no reversed pair answered) is reported with ``value=None``
and never fails.

Example::

    from rcp_jax.answer_quality import assess
    signals = assess(window_scores, texts=raw_answers)   # window_scores as rcp_jax.store_tables returns it
    [s.message for s in signals if s.failed]
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas only where a table is read
    import pandas as pd

#: Tournament phases whose documents sit in random slots (their ``*_reversed`` copies included).
SHUFFLED_PHASES = ("round1", "round2")
REVERSED_SUFFIX = "_reversed"

#: Failure thresholds (module docstring; each function's docstring justifies its own).
ALL_TIED_SHARE = 0.5
POSITION_RHO = 0.5
POSITION_Z = 3.0
REPEATED_SHARE = 0.5
REPEATED_CHANCE = 1e-3
MIRROR_RHO = -0.5
MIRROR_Z = -3.0
ECHO_SHARE = 0.1


@dataclass(frozen=True)
class Signal:
    """One answer-quality measure and its verdict.

    Attributes
    ----------
    name : ``all_tied``, ``position``, ``repeated``, ``mirror`` or ``echo``.
    value : the statistic (a share in [0, 1] or a mean rank correlation in [-1, 1]); ``None`` when there
        was too little to compute it (then ``failed`` is False).
    n : how many windows, reversed pairs or answers it rests on.
    failed : whether it crosses its threshold (the answers ignore the documents).
    decidable : whether the answers it rests on could make it fail at all (``False``: too few windows or
        documents; even a perfect slot pattern would stay within chance, so a pass says nothing).
    threshold : the failing condition, as text.
    message : one sentence: what was measured, how strong, and what it means.
    brief : a few words with the strength, for a one-line verdict (e.g. ``"rho(slot, score) +1.00 over 4
        windows"``).
    """

    name: str
    value: float | None
    n: int
    failed: bool
    threshold: str
    message: str
    decidable: bool = True
    brief: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The signal as plain JSON-ready fields (fit.json, doctor --json)."""
        return asdict(self)


# -- array-level measures -------------------------------------------------------------------------------


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based) of ``x``: tied values share the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1, dtype=np.float64)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation of two float[n] (average ranks for ties); NaN when either is constant
    or ``n < 2``."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} values against {len(y)}")
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    rx, ry = _ranks(x) - (len(x) + 1) / 2, _ranks(y) - (len(y) + 1) / 2
    return float(rx @ ry / math.sqrt((rx @ rx) * (ry @ ry)))


def _tied(s: np.ndarray) -> bool:
    return len(s) >= 2 and float(np.ptp(s)) == 0.0


def all_tied_share(windows: Sequence[np.ndarray]) -> tuple[float | None, int, int]:
    """(share, tied, counted): windows of two documents or more whose scores are all equal.

    ``windows`` holds one float[n] of scores per window. A tournament prompt asks for a different score
    per document; a judge reading the documents ties a whole window only when it can tell none of them
    apart, which the simulated judge never does. A tied window carries no comparison at all, so once half
    the windows are tied (:data:`ALL_TIED_SHARE`) half the tournament is empty, whatever the reason.
    """
    counted = [np.asarray(s, dtype=np.float64) for s in windows if len(s) >= 2]
    if not counted:
        return None, 0, 0
    tied = sum(_tied(s) for s in counted)
    return tied / len(counted), tied, len(counted)


def position_correlation(windows: Sequence[np.ndarray]) -> tuple[float | None, float | None, int]:
    """(mean rho, z, counted): Spearman's rho between slot (0, 1, ...) and score, averaged over windows.

    Only windows of three documents or more, not all tied, count. Under the null of a judge that scores
    documents placed in random slots, each window's rho has mean 0 and variance ``1 / (n_w - 1)``
    (exact for Spearman's rho without ties), so ``z = mean / sqrt(sum_w 1 / (n_w - 1)) * W`` is about
    standard normal; a reversed copy answered by such a judge has rho equal to minus its original's, which
    only narrows the null, so the z is conservative. The signal fails at ``|mean| >= 0.5`` (the slot decides
    most of the ordering; a modest position bias stays below) *and* ``|z| >= 3`` (a one-sided chance of
    about 0.1% under the null: with 4 windows of 10 documents, ``|mean| >= 0.5`` alone gives ``z >= 3``).
    """
    rhos, inv = [], 0.0
    for s in windows:
        s = np.asarray(s, dtype=np.float64)
        if len(s) < 3 or _tied(s):
            continue
        rho = spearman(np.arange(len(s)), s)
        if math.isfinite(rho):
            rhos.append(rho)
            inv += 1.0 / (len(s) - 1)
    if not rhos:
        return None, None, 0
    mean = float(np.mean(rhos))
    return mean, float(mean * len(rhos) / math.sqrt(inv)), len(rhos)


def _pattern(s: np.ndarray) -> tuple[int, ...]:
    """The slot-by-slot ranking of ``s`` (dense ranks, ties equal): what two windows share when a judge
    repeats one answer shape whatever the documents."""
    _, inverse = np.unique(s, return_inverse=True)
    return tuple(int(i) for i in inverse)


def _log_chance(pattern: tuple[int, ...]) -> float:
    """log P(a random arrangement of a window's scores shows ``pattern``) = log(prod m_i! / n!), the
    m_i being the tie multiplicities: an upper bound for any judge that reads documents in random slots."""
    counts = Counter(pattern).values()
    return sum(math.lgamma(m + 1) for m in counts) - math.lgamma(len(pattern) + 1)


def repeated_pattern(windows: Sequence[np.ndarray]) -> tuple[float | None, int, int, float | None]:
    """(share, count, counted, chance bound): the most common slot-by-slot ranking among the windows.

    Only windows of three documents or more, not all tied (:func:`all_tied_share` counts those), count;
    windows of different sizes never share a ranking. Under the null of a judge that reads documents
    placed in random slots, a window shows a given ranking with probability at most
    ``q = prod m_i! / n!`` (``m_i`` the tie multiplicities), so ``c`` windows out of the ``W_n`` of that
    size share one by chance with probability at most ``C(W_n, c) q^(c - 1)`` (the union bound returned
    as the chance bound). The signal fails when that bound is at most 1e-3 *and* the ranking holds half
    the windows or more: a judge then answers the slots, not the documents, in most of the tournament.
    """
    counted = [np.asarray(s, dtype=np.float64) for s in windows if len(s) >= 3 and not _tied(np.asarray(s))]
    if not counted:
        return None, 0, 0, None
    patterns = Counter(_pattern(s) for s in counted)
    top, count = max(patterns.items(), key=lambda kv: (kv[1], -len(kv[0])))
    same_size = sum(1 for s in counted if len(s) == len(top))
    log_bound = (math.lgamma(same_size + 1) - math.lgamma(count + 1) - math.lgamma(same_size - count + 1)
                 + (count - 1) * _log_chance(top))
    bound = 1.0 if count < 2 else min(1.0, math.exp(log_bound))
    return count / len(counted), count, len(counted), bound


def mirror_agreement(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[float | None, float | None, int]:
    """(mean rho, z, counted): per reversed pair, Spearman's rho between each document's score in the window
    and its score in the reversed copy, averaged over pairs.

    ``pairs`` holds (float[n], float[n]) aligned *by document* (the second array is the reversed copy's
    scores put back in the original's document order); pairs of fewer than three documents or with a tied
    side are skipped. A judge that reads the documents repeats its own ranking: rho is its test-retest
    reliability, >= 0 (the simulated judge on the demo: about 0.7 at its default noise, 0.4 with noise as
    large as the spread of relevance; many equally irrelevant documents keep it below 1). A judge that
    scores the slots reverses its ranking: rho = -1 for any score that rises or falls with the slot. With
    ``z = mean * W / sqrt(sum_w 1 / (n_w - 1))`` (a pure-noise judge, the worst that still reads nothing
    into the slots, has per-pair rho of mean 0 and variance ``1 / (n_w - 1)``), the signal fails at
    ``mean <= -0.5`` (the copy mostly reverses the ranking) *and* ``z <= -3`` (chance about 0.1% for any
    judge whose scores follow the documents, however noisy): with doctor's two pairs of ten documents that
    takes a mean of -0.71 or lower. The positional judge gives -1; the simulated judge's lowest over 200
    doctor-sized draws on the demo was +0.07 at its default noise 0.5, -0.37 at noise 3 and -0.45 at noise
    5 (both beyond the spread of relevance, sd 2.2 within a query).
    """
    rhos, inv = [], 0.0
    for a, b in pairs:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if len(a) < 3 or _tied(a) or _tied(b):
            continue
        rho = spearman(a, b)
        if math.isfinite(rho):
            rhos.append(rho)
            inv += 1.0 / (len(a) - 1)
    if not rhos:
        return None, None, 0
    mean = float(np.mean(rhos))
    return mean, float(mean * len(rhos) / math.sqrt(inv)), len(rhos)


# -- placeholders of the answer template -----------------------------------------------------------------

_ANGLE = re.compile(r"<([^<>\n]{1,80})>")


def template_placeholders(prompt: str) -> list[str]:
    """The placeholders of a prompt's answer template: every ``<...>`` span that is not a tag, in order.

    A tag is a span with a closing ``</name>`` in the prompt (``<query>``, ``<documents>``), a closing tag
    itself, or one carrying attributes (``<doc id="doc_1">``). Documents and queries cannot add spans:
    rendering escapes their ``<`` and ``>``. The built-in tournament template gives ``<a few sentences
    comparing the documents>``, ``<most relevant id>``, ``<least relevant id>`` and ``<number>``.
    """
    out: list[str] = []
    for m in _ANGLE.finditer(prompt):
        inner = m.group(1).strip()
        if not inner or inner.startswith("/") or "=" in inner or inner.startswith("!"):
            continue
        name = inner.split()[0]
        if f"</{name}>" in prompt:
            continue
        if inner not in out:
            out.append(inner)
    return out


def builtin_placeholders() -> list[str]:
    """The placeholders of the built-in tournament, rubric and lists templates (:mod:`rcp_jax.judging.prompts.render`)."""
    from rcp_jax.judging.prompts.render import STAGES, builtin_template

    out: list[str] = []
    for stage in STAGES:
        for p in template_placeholders(builtin_template(stage).text):
            if p not in out:
                out.append(p)
    return out


def echoed_placeholder(text: str | None, placeholders: Iterable[str]) -> str | None:
    """The first placeholder ``text`` copies, or ``None``.

    A placeholder counts when the answer holds it with its brackets (``<most relevant id>``), or, for a
    phrase of four words or more, as a whole JSON string (``"reasoning": "a few sentences comparing the
    documents"``): a judge writing its own reasoning does not produce the template's wording verbatim.
    Case and surrounding spaces are ignored.
    """
    if not text:
        return None
    low = text.lower()
    for p in placeholders:
        inner = p.strip().lower()
        if f"<{inner}>" in low:
            return p
        if len(inner.split()) >= 4 and re.search(r'"\s*' + re.escape(inner) + r'[\s.]*"', low):
            return p
    return None


def echo_share(texts: Sequence[str | None], placeholders: Iterable[str] | None = None
               ) -> tuple[float | None, int, int, str | None]:
    """(share, echoing, counted, first placeholder seen): answers that copy a template placeholder.

    ``placeholders`` default to :func:`builtin_placeholders`. The placeholders are template wording no
    reasoning produces by itself, so a single echo is a sign; the signal fails from a tenth of the answers
    (:data:`ECHO_SHARE`, at least one), which lets a rare glitch in a large store pass with its count shown
    while any echo among ``doctor``'s handful of answers fails it.
    """
    ph = list(builtin_placeholders() if placeholders is None else placeholders)
    counted = [t for t in texts if t]
    if not counted:
        return None, 0, 0, None
    hits = [echoed_placeholder(t, ph) for t in counted]
    found = [h for h in hits if h is not None]
    return len(found) / len(counted), len(found), len(counted), (found[0] if found else None)


# -- tables -> signals ----------------------------------------------------------------------------------


def _phase(window_id: str) -> tuple[str, str]:
    """(phase, sequence key) of a ``phase#sequence[@hash]`` window id."""
    phase, _, rest = str(window_id).partition("#")
    return phase, rest.split("@", 1)[0]


def shuffled_windows(window_scores: pd.DataFrame) -> list[tuple[str, str, list[str], np.ndarray]]:
    """(query_id, window_id, doc ids in slot order, float[n] scores) of every round-1 / round-2 window.

    ``window_scores``: the long table ``query_id, window_id, doc_id, score`` of
    :func:`rcp_jax.pipeline.store_tables` (``rcp-jax fit`` writes it as window_scores.csv), its rows in
    slot order within a window (as written), or with a ``slot`` column giving it.
    """
    missing = {"query_id", "window_id", "doc_id", "score"} - set(window_scores.columns)
    if missing:
        from rcp_jax.errors import DataError

        raise DataError(f"window scores table lacks column(s) {sorted(missing)}; expected query_id, window_id, "
                        "doc_id, score (as `rcp-jax fit` writes window_scores.csv)")
    df = window_scores
    if "slot" in df.columns:
        df = df.sort_values(["query_id", "window_id", "slot"], kind="stable")
    out = []
    for (q, w), g in df.groupby(["query_id", "window_id"], sort=False):
        phase, _ = _phase(w)
        if phase.removesuffix(REVERSED_SUFFIX) not in SHUFFLED_PHASES:
            continue
        out.append((str(q), str(w), [str(d) for d in g["doc_id"]], g["score"].to_numpy(dtype=np.float64)))
    return out


def mirror_pairs(windows: Sequence[tuple[str, str, list[str], np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each answered window with its answered reversed copy: (scores, reversed copy's scores in the
    original's document order); a pair is the same query, base phase, sequence and document set."""
    originals, copies = {}, {}
    for q, w, docs, s in windows:
        phase, seq = _phase(w)
        key = (q, phase.removesuffix(REVERSED_SUFFIX), seq, frozenset(docs))
        (copies if phase.endswith(REVERSED_SUFFIX) else originals)[key] = dict(zip(docs, s))
    pairs = []
    for key, orig in originals.items():
        rev = copies.get(key)
        if rev is not None and len(orig) == len(rev):
            docs = list(orig)
            pairs.append((np.array([orig[d] for d in docs]), np.array([rev[d] for d in docs])))
    return pairs


def _z_scale(sizes: Sequence[int]) -> float:
    """``W / sqrt(sum_w 1 / (n_w - 1))``: the z of a mean rank correlation of 1 over windows of ``sizes``."""
    return len(sizes) / math.sqrt(sum(1.0 / (n - 1) for n in sizes)) if sizes else 0.0


def _repeat_decidable(sizes: Sequence[int]) -> bool:
    """Whether some window size is common enough that every window of it showing one ranking (distinct
    scores) would push the chance bound of :func:`repeated_pattern` to :data:`REPEATED_CHANCE`."""
    return any(w >= 2 and (w - 1) * math.lgamma(n + 1) >= -math.log(REPEATED_CHANCE)
               for n, w in Counter(sizes).items())


def assess(window_scores: pd.DataFrame | None, texts: Sequence[str | None] | None = None, *,
           placeholders: Iterable[str] | None = None) -> list[Signal]:
    """Every signal of the module docstring, in its table's order.

    Args:
        window_scores: tournament answers, the long table of :func:`shuffled_windows` (``None``: the four
            score signals are not computed).
        texts: raw answer texts (any stage) for the placeholder echo (``None``: not computed).
        placeholders: the template placeholders to look for (default: :func:`builtin_placeholders`).

    Returns:
        ``[all_tied, position, repeated, mirror, echo]`` signals. A signal that could not fail on so few
        answers has ``decidable=False`` and says so in its message.
    """
    windows = shuffled_windows(window_scores) if window_scores is not None else []
    scores = [s for *_, s in windows]
    ranked = [len(s) for s in scores if len(s) >= 3 and not _tied(s)]  # what position / repeated rest on
    few = " (too few to decide: even a perfect slot pattern would stay within chance; ask more windows)"
    out = []

    share, tied, n = all_tied_share(scores)
    failed = share is not None and share >= ALL_TIED_SHARE
    out.append(Signal("all_tied", share, n, failed, f">= {ALL_TIED_SHARE}",
                      "not computed: no round-1 or round-2 tournament answers" if share is None else
                      f"{tied} of {n} tournament windows have every document tied ({share:.0%}; fails at "
                      f"{ALL_TIED_SHARE:.0%})" + (": the judge gave one score to documents it was asked to tell "
                                                  "apart" if failed else ""),
                      decidable=share is not None, brief=f"{tied} of {n} windows all tied"))

    mean, z, n = position_correlation(scores)
    decidable = mean is not None and _z_scale(ranked) >= POSITION_Z
    out.append(Signal("position", mean, n, decidable and abs(mean) >= POSITION_RHO and abs(z) >= POSITION_Z,
                      f"|rho| >= {POSITION_RHO} and |z| >= {POSITION_Z:g}",
                      "not computed: no window of 3+ documents with distinct scores" if mean is None else
                      f"mean Spearman rho(slot, score) {mean:+.2f} over {n} windows (z {z:+.1f}; fails at "
                      f"|rho| >= {POSITION_RHO} with |z| >= {POSITION_Z:g}; a judge reading documents in random "
                      f"slots: 0, one scoring the slots: +-1)" + ("" if decidable else few),
                      decidable=decidable,
                      brief="" if mean is None else f"rho(slot, score) {mean:+.2f} over {n} windows, z {z:+.1f}"))

    share, count, n, bound = repeated_pattern(scores)
    decidable = share is not None and _repeat_decidable(ranked)
    out.append(Signal("repeated", share, n,
                      decidable and count >= 2 and share >= REPEATED_SHARE and bound <= REPEATED_CHANCE,
                      f">= {REPEATED_SHARE} with chance <= {REPEATED_CHANCE:g}",
                      "not computed: no window of 3+ documents with distinct scores" if share is None else
                      f"the most common slot-by-slot ranking is shown by {count} of {n} windows ({share:.0%}; "
                      f"chance bound "
                      f"{bound:.1g} for a judge reading documents in random slots; fails at {REPEATED_SHARE:.0%} "
                      f"with chance <= {REPEATED_CHANCE:g})" + ("" if decidable else few),
                      decidable=decidable,
                      brief="" if share is None else f"one slot-by-slot ranking in {count} of {n} windows, chance "
                                                     f"{bound:.1g}"))

    pairs = mirror_pairs(windows)
    mean, z, n = mirror_agreement(pairs)
    sizes = [len(a) for a, b in pairs if len(a) >= 3 and not _tied(a) and not _tied(b)]
    decidable = mean is not None and _z_scale(sizes) >= -MIRROR_Z
    out.append(Signal("mirror", mean, n, decidable and mean <= MIRROR_RHO and z <= MIRROR_Z,
                      f"rho <= {MIRROR_RHO} and z <= {MIRROR_Z:g}",
                      "not computed: no window answered together with its reversed copy (both with distinct "
                      "scores)" if mean is None else
                      f"a document's score in a window and in its reversed copy agree at mean Spearman rho "
                      f"{mean:+.2f} over {n} pairs (z {z:+.1f}; fails at rho <= {MIRROR_RHO} with z <= "
                      f"{MIRROR_Z:g}; a judge reading the documents repeats its ranking, rho > 0; one scoring the "
                      "slots reverses it, -1)" + ("" if decidable else few),
                      decidable=decidable,
                      brief="" if mean is None else f"rho {mean:+.2f} between a window and its reversed copy over "
                                                    f"{n} pairs, z {z:+.1f}"))

    if texts is None:
        out.append(Signal("echo", None, 0, False, f">= {ECHO_SHARE}", "not computed: no answer texts given",
                          decidable=False))
    else:
        share, k, n, first = echo_share(texts, placeholders)
        failed = share is not None and k >= 1 and share >= ECHO_SHARE
        out.append(Signal("echo", share, n, failed, f">= {ECHO_SHARE}",
                          "not computed: no answer text" if share is None else
                          f"{k} of {n} answers copy a placeholder of the prompt's answer template" +
                          (f" (e.g. {'<' + first + '>'!r})" if first else "") + f" ({share:.0%}; fails at "
                          f"{ECHO_SHARE:.0%})" + (": the judge fills in the template instead of reading the "
                                                  "documents" if failed else ""),
                          decidable=share is not None,
                          brief="" if share is None else f"{k} of {n} answers copy a template placeholder"))
    return out


def failed(signals: Iterable[Signal]) -> list[Signal]:
    """The signals that failed."""
    return [s for s in signals if s.failed]


def warning_lines(signals: Iterable[Signal]) -> list[str]:
    """One line per failed signal, for ``fit`` / ``diagnose`` (empty when none failed)."""
    return [f"the judge's answers ignore the documents ({s.name}): {s.message}" for s in failed(signals)]
