"""What every judge shares: its prompts, its family, the request it gets and the completion it returns.

A judge turns a rendered window into answer *text*; parsing and storing happen outside it (in
:mod:`rcp_jax.judging.run`), so the litellm judge and the offline judges go through the very same
render -> text -> parse path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rcp_jax.judging.answers.parse import PARSER_VERSION
from rcp_jax.judging.errors import PromptError
from rcp_jax.judging.prompts.pages import ImageLimits, approx_image_tokens, message_images, message_text
from rcp_jax.judging.prompts.render import RenderedWindow, builtin_template, render_window
from rcp_jax.judging.prompts.rubric import Rubric
from rcp_jax.judging.prompts.template import PromptTemplate
from rcp_jax.judging.store.records import STAGES, JudgeFamily, Usage, Window

#: Default budget for a window's document text: ~15k tokens at ~4 characters per token.
DEFAULT_MAX_WINDOW_CHARS = 60_000


@dataclass(frozen=True)
class JudgeRequest:
    """One call: the window, its rendering and the 1-based answer attempt (re-asks after invalid answers).

    ``previous`` is ``(category, detail)`` of the window's last invalid answer when this is a re-ask (from
    this run or an earlier one), so a judge can vary the request and say what was wrong; ``None`` otherwise.
    """

    window: Window
    rendered: RenderedWindow
    attempt: int = 1
    previous: tuple[str, str] | None = None


@dataclass(frozen=True)
class Completion:
    """The judge's reply to one request.

    Attributes
    ----------
    text : the answer text (``""`` when the endpoint returned no content).
    finish_reason : ``"stop"``, ``"length"``, ``"content_filter"``, ... or ``None`` when unknown.
    usage : tokens and cost of the call (cost ``None`` when unknown).
    transport_retries : rate-limit / server-error / timeout retries this call needed.
    malformed : when the endpoint's reply held no answer at all (empty or null ``choices``, no message,
        ``content: null`` without tool calls), a one-line description; the answer is then stored invalid
        with category ``"malformed_response"`` and re-asked like any invalid answer. ``""`` otherwise.
    reask : what this call varied as a re-ask (see :attr:`rcp_jax.judging.store.records.Judgement.reask`); ``None``.
    served_model, system_fingerprint : the reply's ``model`` and ``system_fingerprint`` (the model the answer
        actually came from, and the provider's backend configuration), ``None`` where the reply gives none;
        stored on the record (:attr:`rcp_jax.judging.store.records.Judgement.served_model`).
    """

    text: str
    finish_reason: str | None
    usage: Usage
    transport_retries: int = 0
    malformed: str = ""
    reask: Mapping[str, Any] | None = None
    served_model: str | None = None
    system_fingerprint: str | None = None


@dataclass
class Ledger:
    """Running totals of a judge's calls. ``cost_usd`` sums the calls whose cost is known.

    ``calls`` counts answered calls; ``failed_calls`` calls that raised after their retries;
    ``transport_retries`` every retried transport failure; ``unpriced_calls`` answered calls of unknown cost;
    ``cached_tokens`` the part of ``prompt_tokens`` served from the provider's prompt cache (priced at the
    cached-input rate in ``cost_usd``). Every field is a number (worker processes send their totals).
    """

    calls: int = 0
    failed_calls: int = 0
    transport_retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    cached_tokens: int = 0

    def add(self, usage: Usage, retries: int = 0) -> None:
        self.calls += 1
        self.transport_retries += retries
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_tokens += usage.cached_tokens
        if usage.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += usage.cost_usd

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def resolve_prompts(prompts: Mapping[str, PromptTemplate | Rubric | str] | None) -> dict[str, PromptTemplate]:
    """Built-in templates, overridden per stage by ``prompts`` (a :class:`PromptTemplate`; for ``"rubric"`` a
    :class:`rcp_jax.judging.prompts.rubric.Rubric`, e.g. ``load_rubric("my.toml")``, whose criteria fill the built-in rubric
    prompt; or a plain string taken as the text of a custom template; a custom rubric string keeps K = 5)."""
    out = {stage: builtin_template(stage) for stage in STAGES}
    for stage, value in (prompts or {}).items():
        if stage not in STAGES:
            raise PromptError(f"prompts: unknown stage {stage!r}; stages are {STAGES}")
        if isinstance(value, Rubric):
            if stage != "rubric":
                raise PromptError(f"prompts[{stage!r}] is a rubric; a rubric only sets the 'rubric' stage's prompt")
            value = value.template()
        if isinstance(value, str):
            value = PromptTemplate(stage=stage, text=value, n_criteria=5 if stage == "rubric" else 0)
        if value.stage != stage:
            raise PromptError(f"prompts[{stage!r}] is a {value.stage} template")
        out[stage] = value
    return out


class BaseJudge:
    """Shared part of every judge: prompts, text budget and family. Subclasses implement :meth:`complete`.

    Parameters
    ----------
    model : the model string recorded in the family.
    prompts : per-stage templates overriding the built-in ones (see :func:`resolve_prompts`).
    max_window_chars : characters of document text allowed per window (``None``: no limit).

    Attributes
    ----------
    max_attempts, stop_after_invalid : the run policy :func:`rcp_jax.judging.judge_windows` uses when its own
        arguments are left ``None`` (``None`` here too: the module defaults). Set on a judge, they reach every
        run made with it, also through wrappers that do not pass them on (e.g. ``rcp_jax.judge_collection``);
        ``rcp-jax`` sets them from ``--max-attempts`` / ``--stop-after-invalid``. Not part of the family.
    image_limits : size and count limits of page images (:class:`rcp_jax.judging.prompts.pages.ImageLimits`; ``rcp-jax`` sets
        them from ``--image-max-side`` / ``--image-max-bytes`` / ``--images-per-window``). Not part of the
        family (text windows keep their ids): windows showing images carry them in their image hash.
    """

    max_attempts: int | None = None
    stop_after_invalid: int | None = None
    image_limits: ImageLimits = ImageLimits()

    def __init__(
        self,
        model: str,
        *,
        prompts: Mapping[str, PromptTemplate | Rubric | str] | None = None,
        max_window_chars: int | None = DEFAULT_MAX_WINDOW_CHARS,
    ) -> None:
        self.model = model
        self.prompts = resolve_prompts(prompts)
        self.max_window_chars = max_window_chars
        self.ledger = Ledger()

    def decoding(self) -> dict[str, Any]:
        """Settings that change answers (part of the family); subclasses extend it."""
        return {"max_window_chars": self.max_window_chars}

    def family(self, stage: str) -> JudgeFamily:
        """The family of this judge's ``stage`` answers."""
        template = self.prompts[stage]
        return JudgeFamily(
            model=self.model,
            prompt_hash=template.hash,
            parser_version=PARSER_VERSION,
            decoding=self.decoding(),
            n_criteria=template.n_criteria,
            rubric=template.rubric.summary() if template.rubric is not None and not template.rubric.builtin else None,
        )

    def render(self, window: Window, query_text: str, doc_texts: Sequence[str]) -> RenderedWindow:
        """Render ``window`` with this judge's template and text budget."""
        return render_window(
            self.prompts[window.stage],
            query_text,
            window.doc_ids,
            doc_texts,
            max_window_chars=self.max_window_chars,
            split=window.split,
            image_limits=self.image_limits,
        )

    async def complete(self, request: JudgeRequest) -> Completion:  # pragma: no cover - interface
        raise NotImplementedError

    def prepare(self) -> None:
        """Load what the first call would otherwise load (no-op by default); worker processes call it
        before taking calls (see :class:`rcp_jax.judging.transport.procs.ProcessJudge`)."""

    def count_tokens(self, messages: Sequence[Mapping[str, Any]]) -> tuple[int, str]:
        """Prompt tokens of ``messages`` and the method used; the base judge estimates chars/4 (images: the
        approximation of :func:`rcp_jax.judging.prompts.pages.approx_image_tokens`)."""
        text = sum(len(message_text(m["content"])) for m in messages) // 4
        images = [u for m in messages for u in message_images(m["content"])]
        if not images:
            return text, "chars/4 (no tokenizer for this judge)"
        pix = sum(approx_image_tokens(u, self.image_limits) for u in images)
        return text + pix, "chars/4 (no tokenizer for this judge) + images ~ 28x28-pixel patches (approximation)"

    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD cost of a call with these token counts; ``None`` when unknown."""
        return None

    async def aclose(self) -> None:
        """Release connections (no-op by default)."""

