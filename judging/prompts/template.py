"""A prompt template: one stage's text with its placeholders, checked when made, hashed into the judge family.

The text holds ``{{QUERY}}`` and ``{{DOCUMENTS}}`` (required) and ``{{N_DOCS}}``, ``{{DOC_IDS}}`` (optional);
:func:`rcp_jax.judging.prompts.render.render_window` fills them, :func:`rcp_jax.judging.prompts.render.builtin_template`
gives the project's own, :meth:`rcp_jax.judging.prompts.rubric.Rubric.template` makes a rubric stage's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rcp_jax.judging.errors import PromptError
from rcp_jax.judging.store.records import STAGES, content_hash

_REQUIRED = ("{{QUERY}}", "{{DOCUMENTS}}")


@dataclass(frozen=True)
class PromptTemplate:
    """A prompt for one stage.

    Attributes
    ----------
    stage : ``"tournament"``, ``"rubric"`` or ``"lists"``.
    text : the template text with ``{{QUERY}}`` and ``{{DOCUMENTS}}`` placeholders.
    n_criteria : K for a rubric template (criteria C1..CK), 0 for a tournament or lists template.
    name : a label for messages (``"builtin:tournament"``, a file name, ...).
    rubric : the :class:`rcp_jax.judging.prompts.rubric.Rubric` a rubric template was made from
        (:meth:`rcp_jax.judging.prompts.rubric.Rubric.template`), recorded in the judge's rubric family; ``None`` for other
        templates. Not part of :attr:`hash` (the criteria are in the text already).
    """

    stage: str
    text: str
    n_criteria: int = 0
    name: str = "custom"
    rubric: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise PromptError(f"prompt {self.name}: stage {self.stage!r} is not one of {STAGES}")
        missing = [p for p in _REQUIRED if p not in self.text]
        if missing:
            raise PromptError(
                f"prompt {self.name}: placeholder(s) {missing} missing; a template must contain "
                "{{QUERY}} and {{DOCUMENTS}} where the query and the document blocks go"
            )
        if self.stage == "rubric" and self.n_criteria < 1:
            raise PromptError(f"prompt {self.name}: a rubric template needs n_criteria >= 1 (criteria C1..CK)")
        if self.stage != "rubric" and self.n_criteria != 0:
            raise PromptError(f"prompt {self.name}: a {self.stage} template takes no criteria (n_criteria=0)")

    @property
    def hash(self) -> str:
        """16-hex content hash of (stage, text, n_criteria); part of the judge family."""
        return content_hash({"stage": self.stage, "text": self.text, "n_criteria": self.n_criteria})
