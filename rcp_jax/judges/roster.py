"""Which judges a judgement store holds, and each one's tables.

A *judge* is a model with its decoding settings: the tournament family and the rubric family that share
them (:class:`rcp_jax.judging.store.records.JudgeFamily`; one fit already requires both stages from the same model and
settings). Several judges live in one store side by side: their records have distinct ids, and the
store's schedule identity (:mod:`rcp_jax.store_identity`) guarantees they were scheduled alike.

Each judge's tables are :func:`rcp_jax.store_tables` with ``family=dict(judge.families)``.

A judge's name is its model string (``openai/gpt-4o-mini``), or ``model@<6 hex>`` when the store holds
the same model under two decoding settings. ``--judges`` picks judges by name, model string or family-id
prefix, and may rename them: ``--judges gpt=openai/gpt-4o-mini,qwen=hosted_vllm/qwen``.

A model string whose answers came from several served models (a provider alias that moved mid-store; each
record keeps the model its reply named, :attr:`rcp_jax.judging.store.records.Judgement.served_model`) is
several judges, one per served model, named ``model~served`` (``model~unrecorded`` for answers that name
none): ``fit`` refuses to fit them as one (:func:`check_one_served_model`), and ``--judges`` pools them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rcp_jax.errors import DataError

STAGES = ("tournament", "rubric")


@dataclass(frozen=True)
class JudgeInfo:
    """One judge of a store.

    Attributes:
        name: the judge's name (model string, ``model@hash``, or the alias given to ``--judges``).
        model: the model string. decoding: its decoding settings (JSON-able).
        families: stage -> family id (``tournament``, ``rubric``; a stage never judged is absent).
        answers: stage -> number of valid records.
        served: the served model this judge's answers came from when its model string was answered by several
            (``""``: the answers that name none); ``None``: all of the model string's answers.
    """

    name: str
    model: str
    decoding: Mapping = field(default_factory=dict)
    families: Mapping[str, str] = field(default_factory=dict)
    answers: Mapping[str, int] = field(default_factory=dict)
    served: str | None = None

    def describe(self) -> str:
        counts = ", ".join(f"{self.answers.get(s, 0)} {s}" for s in STAGES)
        by = "" if self.served is None else f", served model {self.served or 'not recorded'!r}"
        return f"{self.name!r} (model {self.model!r}{by}; valid windows: {counts})"


def _decoding_key(decoding: Mapping) -> str:
    return json.dumps(decoding, sort_keys=True, separators=(",", ":"), default=str)


def list_judges(store: str | Path) -> list[JudgeInfo]:
    """Every judge with valid tournament or rubric answers in ``store``, in order of first appearance."""
    from rcp_jax.judging import read_judgements
    from rcp_jax.judging.store.records import content_hash

    store = Path(store)
    if not store.is_dir():
        raise DataError(f"{store}: no such judgement store folder; run `rcp-jax judge --store {store}` first")
    records = {stage: read_judgements(store, stage, valid_only=True) for stage in STAGES}
    served_by: dict[tuple[str, str], set[str]] = {}  # (model, decoding) -> the served models named
    for stage in STAGES:
        for j in records[stage]:
            if j.served_model is not None:
                served_by.setdefault((j.family.model, _decoding_key(j.family.decoding)), set()).add(j.served_model)
    found: dict[tuple[str, str, str | None], dict] = {}
    for stage in STAGES:
        for j in records[stage]:
            base = (j.family.model, _decoding_key(j.family.decoding))
            served = (j.served_model or "") if len(served_by.get(base, ())) > 1 else None  # split: several served
            entry = found.setdefault((*base, served),
                                     {"decoding": dict(j.family.decoding), "families": {}, "answers": {}})
            fams = entry["families"].setdefault(stage, {})
            fams[j.family.family_id] = fams.get(j.family.family_id, 0) + 1
    models = list(dict.fromkeys((m, d) for m, d, _ in found))
    names = [m for m, _ in models]
    out = []
    for (model, dkey, served), entry in found.items():
        name = model if names.count(model) == 1 else f"{model}@{content_hash(dkey, 6)}"
        if served is not None:
            name += f"~{served or 'unrecorded'}"
        families, answers = {}, {}
        for stage, fams in entry["families"].items():
            # several prompt templates or parser versions under one model and decoding: the most answered
            fid = max(fams, key=fams.get)
            families[stage], answers[stage] = fid, fams[fid]
        out.append(JudgeInfo(name=name, model=model, decoding=entry["decoding"], families=families, answers=answers,
                             served=served))
    return out


def check_one_served_model(store: str | Path, families: Mapping[str, str], *, judge: str = "") -> list[str]:
    """Refuse a judge (``families``: stage -> family id) whose answers came from more than one served model;
    return notes on fingerprint changes (reported, never refused: providers rotate them).

    Answers that name no served model (records written before it was kept) count for no model.

    Raises:
        DataError: the valid answers of these families name two or more served models; the message gives
            each with its number of answers and the two ways on (re-judge pinned, or pool them as judges).
    """
    from rcp_jax.judging import read_judgements
    from rcp_jax.judging.store.provenance import counts_text, serving

    store = Path(store)
    wanted = set(families.values())
    fams = [f for stage in STAGES for f in serving(read_judgements(store, stage, valid_only=True))
            if f.family_id in wanted and families.get(f.stage) == f.family_id]
    served: dict[str | None, int] = {}
    prints: dict[str | None, int] = {}
    for f in fams:
        for k, n in f.served.items():
            served[k] = served.get(k, 0) + n
        for k, n in f.fingerprints.items():
            prints[k] = prints.get(k, 0) + n
    named = [m for m in served if m is not None]
    model = fams[0].model if fams else judge
    if len(named) > 1:
        split = [f"{model}~{m}" for m in named] + ([f"{model}~unrecorded"] if None in served else [])
        raise DataError(
            f"{store}: the answers of judge {judge or model!r} came from {len(named)} served models "
            f"({counts_text(served)}): the model string {model!r} moved to another model mid-store, so these "
            "answers are several judges, and one calibration would mix them. Either re-judge into a fresh store with "
            "a pinned model (a dated snapshot, e.g. --model openai/gpt-4o-mini-2024-07-18) so one model answers "
            f"every window, or pool them as several judges: rcp-jax fit --store {store} --judges "
            f"{','.join(split)} (one severity offset per served model)"
        )
    fingerprints = [k for k in prints if k is not None]
    if len(fingerprints) > 1:
        note = (f"the answers of judge {judge or model!r} came from {len(fingerprints)} system fingerprints "
                f"({counts_text(prints)}) of one served model: the provider changed its backend configuration "
                "mid-store (reported, not refused: providers rotate fingerprints)")
        return [note]
    return []


def _matches(judge: JudgeInfo, selector: str) -> bool:
    return selector in (judge.name, judge.model) or any(f.startswith(selector) for f in judge.families.values())


def select_judges(store: str | Path, spec: str | Sequence[str], *, option: str = "--judges") -> list[JudgeInfo]:
    """The judges ``spec`` names (``"a,b"`` or a list; ``alias=selector`` renames), checked.

    Raises:
        DataError: fewer than two judges, a selector no judge (or several) of the store matches, a judge
            picked twice, two judges with one name, or a judge missing a stage.
    """
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    held = list_judges(store)
    listing = "; ".join(j.describe() for j in held) or "no valid answers at all"
    if len(items) < 2:
        raise DataError(
            f"{option} needs at least two judges to pool, got {len(items)} ({', '.join(items) or 'none'}); the "
            f"store {store} holds {listing}. To fit one judge alone, use --family MODEL instead"
        )
    chosen: list[JudgeInfo] = []
    for item in items:
        alias, _, selector = item.partition("=") if "=" in item else ("", "", item)
        hits = [j for j in held if j.name == selector] or [j for j in held if _matches(j, selector)]
        if not hits:
            raise DataError(f"judge {selector!r} named in {option} is not in the store {store}; it holds {listing}. "
                            "Name judges by model string, by the names listed, or by a family id prefix")
        if len(hits) > 1:
            raise DataError(f"judge {selector!r} named in {option} matches {len(hits)} judges of {store}: "
                            f"{'; '.join(j.describe() for j in hits)}; use one of the names listed")
        judge = hits[0] if not alias else replace(hits[0], name=alias)
        if any(c.families == judge.families and c.served == judge.served for c in chosen):
            raise DataError(f"{option} names the judge {judge.model!r} twice ({item!r}); name each judge once")
        if any(c.name == judge.name for c in chosen):
            raise DataError(f"{option} gives two judges the name {judge.name!r}; rename one with alias=MODEL")
        missing = [s for s in STAGES if s not in judge.families]
        if missing:
            raise DataError(f"judge {judge.describe()} of {store} has no valid {' or '.join(missing)} answers; a "
                            f"judge is pooled with its tournament and its rubric: judge both stages with it first")
        chosen.append(judge)
    return chosen
