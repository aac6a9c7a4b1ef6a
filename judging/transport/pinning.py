"""Whether a model string pins one model, or is a provider alias that may move to a newer model mid-run.

The rule (:func:`floating_alias`), on a litellm model string ``provider/name``:

1. **Exempt** (never warned): self-hosted models, whose name is whatever the server was started with and
   moves only when its owner restarts it: the providers in :data:`SELF_HOSTED_PROVIDERS` (``hosted_vllm``,
   ``ollama``, ``ollama_chat``, ``llamafile``, ``lm_studio``, ...), any model sent to an ``api_base`` of the
   user's own (``openai/<name>`` against a vLLM, SGLang or llama.cpp server), Azure deployments (the
   deployment fixes its model version; the name is the user's), and the offline ``simulated`` judge.
2. **Floating**: a name holding ``latest`` as a word (``claude-3-5-sonnet-latest``, ``chatgpt-4o-latest``,
   ``mistral-large-latest``), or a provider-hosted name with no version pin: no date (``2024-07-18``,
   ``20241022``, ``06-05``), no four-digit snapshot (``gpt-4-0613``, ``mistral-large-2411``), no three-digit
   version (``gemini-1.5-pro-002``, ``@001``) and no Bedrock ``-v1:0``. So ``openai/gpt-4o-mini`` and
   ``anthropic/claude-sonnet-4-5`` float; ``gpt-4o-mini-2024-07-18`` and ``claude-sonnet-4-5-20250929`` do not.

It is a warning, not a refusal: some undated names are fixed (an open-weight model on a hosted API). What
a store's answers actually came from is recorded per record either way
(:attr:`rcp_jax.judging.store.records.Judgement.served_model`) and checked by ``rcp-jax judge`` and ``fit``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: litellm providers whose models run on the user's own servers (never warned about).
SELF_HOSTED_PROVIDERS = frozenset({
    "hosted_vllm", "vllm", "ollama", "ollama_chat", "llamafile", "lm_studio", "llamacpp", "openai_like",
    "custom_openai", "xinference", "triton", "oobabooga", "petals", "azure", "azure_ai",
})
_LATEST = re.compile(r"(^|[-_.:@/])latest($|[-_.:@/])", re.IGNORECASE)
_PIN = re.compile(
    r"(19|20)\d{2}-?\d{2}-?\d{2}"  # a date: 2024-07-18, 20241022
    r"|[-@]\d{2}-\d{2}($|[-_:])"  # a month-day preview pin: -06-05
    r"|[-@]\d{3,4}($|[-_:.])"  # a snapshot or version number: -0613, -2411, -002, @001
    r"|-v\d+(:\d+)?$",  # Bedrock's model version: -v1:0
    re.IGNORECASE,
)


def floating_alias(model: str, *, api_base: str | None = None) -> str | None:
    """Why ``model`` may move to another model mid-run (one sentence), or ``None`` when it is pinned or
    exempt; the rule is the module docstring's."""
    provider, _, name = model.partition("/") if "/" in model else ("", "", model)
    if model == "simulated" or provider.lower() in SELF_HOSTED_PROVIDERS or api_base:
        return None
    if _LATEST.search(name):
        return f"{model!r} is a '-latest' alias: the provider points it at its newest model, which can change mid-run"
    if _PIN.search(name):
        return None
    return f"{model!r} names no dated snapshot: a provider alias that can move to a newer model mid-run"


def pinned_snapshots(model: str, known: Iterable[str]) -> list[str]:
    """Dated snapshots of ``model``'s name among ``known`` model names (e.g. litellm's cost map keys), newest
    first: ``gpt-4o-mini`` -> ``['gpt-4o-mini-2024-07-18']``."""
    name = model.rpartition("/")[2]
    found = {k.rpartition("/")[2] for k in known if k.rpartition("/")[2].startswith(name + "-")}
    dated = [k for k in found if re.fullmatch(r"(19|20)\d{2}-?\d{2}-?\d{2}", k[len(name) + 1:])]
    return sorted(dated, reverse=True)


def floating_note(model: str, *, api_base: str | None = None, known: Iterable[str] = ()) -> str | None:
    """The warning shown before judging with a floating alias (with pinned snapshots to use instead, when
    ``known`` names some), or ``None``."""
    why = floating_alias(model, api_base=api_base)
    if why is None:
        return None
    pins = pinned_snapshots(model, known)
    fix = (f"pin a snapshot, e.g. --model {model.rpartition('/')[0] + '/' if '/' in model else ''}{pins[0]}"
           if pins else "pin a dated snapshot of the model")
    return (f"{why}. Answers from two models in one store make two judges: `rcp-jax fit` refuses such a store "
            f"(each record keeps the model that answered). To avoid it, {fix}")
