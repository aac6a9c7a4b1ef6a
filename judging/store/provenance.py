"""Which model each family's answers actually came from: served models and fingerprints per family.

A record's family names the model string that was *requested* (``openai/gpt-4o-mini``); its
``served_model`` names the model the reply said it came from (``gpt-4o-mini-2024-07-18``), and
``system_fingerprint`` the provider's backend configuration. A floating alias can move to a new model in
the middle of a store: the answers of one family then come from two models, and a fit that treats them as
one judge mixes two judges. :func:`serving` counts, per family, the valid answers of each served model and
fingerprint, so ``rcp-jax judge`` can report a change and ``rcp-jax fit`` refuse it.

Records written before the served model was kept (and offline judges' records) have none: they are
counted under ``None`` and never count as a model of their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rcp_jax.judging.store.records import Judgement


@dataclass(frozen=True)
class FamilyServing:
    """The valid answers of one family by served model and fingerprint.

    Attributes
    ----------
    stage, family_id, model : the family (``model`` is the requested model string).
    served : served model -> valid answers, in order of first appearance; ``None`` counts the answers that
        name no served model (older records, offline judges).
    fingerprints : system fingerprint -> valid answers, likewise (``None``: no fingerprint given).
    first_seen : served model -> the ``started_at`` of its first answer (ISO-8601 UTC; ``""`` when unknown).
    """

    stage: str
    family_id: str
    model: str
    served: Mapping[str | None, int] = field(default_factory=dict)
    fingerprints: Mapping[str | None, int] = field(default_factory=dict)
    first_seen: Mapping[str | None, str] = field(default_factory=dict)

    @property
    def served_models(self) -> list[str]:
        """The distinct served models named (``None`` left out)."""
        return [m for m in self.served if m is not None]

    @property
    def fingerprint_values(self) -> list[str]:
        """The distinct fingerprints given (``None`` left out)."""
        return [f for f in self.fingerprints if f is not None]

    @property
    def changed(self) -> bool:
        """Whether the answers name more than one served model or more than one fingerprint."""
        return len(self.served_models) > 1 or len(self.fingerprint_values) > 1

    def describe(self) -> str:
        """One line: the family and its answers per served model (and per fingerprint when they changed)."""
        line = (f"{self.stage} family {self.family_id} (requested {self.model!r}): answers by served model: "
                f"{counts_text(self.served)}")
        if len(self.fingerprint_values) > 1:
            line += f"; by system_fingerprint: {counts_text(self.fingerprints)}"
        return line


def counts_text(counts: Mapping[str | None, int]) -> str:
    """``'a' 120, 'b' 80, not recorded 4``: counts by name, in their order."""
    return ", ".join(f"{k!r} {n}" if k is not None else f"not recorded {n}" for k, n in counts.items())


def serving(records: Iterable[Judgement]) -> list[FamilyServing]:
    """Per (stage, family) of the valid ``records``: the answers by served model and fingerprint.

    ``records`` may hold several attempts of a window; only valid ones are counted, one per record id (the
    first, as :func:`rcp_jax.judging.store.jsonl.read_judgements` keeps with ``valid_only``). Families are
    listed in order of first appearance.
    """
    served: dict[tuple[str, str], Counter[str | None]] = {}
    prints: dict[tuple[str, str], Counter[str | None]] = {}
    first: dict[tuple[str, str], dict[str | None, str]] = {}
    models: dict[tuple[str, str], str] = {}
    seen: set[str] = set()
    for j in records:
        if not j.valid or j.record_id in seen:
            continue
        seen.add(j.record_id)
        key = (j.window.stage, j.family.family_id)
        models.setdefault(key, j.family.model)
        served.setdefault(key, Counter())[j.served_model] += 1
        prints.setdefault(key, Counter())[j.system_fingerprint] += 1
        stamps = first.setdefault(key, {})
        if j.served_model not in stamps or (j.started_at and j.started_at < stamps[j.served_model]):
            stamps[j.served_model] = j.started_at
    return [FamilyServing(stage=k[0], family_id=k[1], model=models[k], served=dict(served[k]),
                          fingerprints=dict(prints[k]), first_seen=first[k]) for k in models]
