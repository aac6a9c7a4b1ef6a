"""The asynchronous LLM judging layer of rcp-jax: windows in, validated judgements out, stored durably.

This package never imports JAX, NumPyro, ``models`` or ``rcp_jax`` (a test enforces it), and imports
litellm only when a :class:`LiteLLMJudge` first calls it, so ``import judging`` stays cheap.

Public surface
--------------
- :class:`Window`, :class:`Judgement`, :class:`JudgeFamily`, :func:`record_id`: the records.
- :func:`judge_windows` (async) / :func:`judge_windows_sync`: judge windows into a store, resuming.
- :func:`judge_windows_batch` (async) / :func:`judge_windows_batch_sync`: the same windows as batches through a
  :class:`ProviderBatches` (a provider's batch API) or :class:`FileBatches` (files for ``vllm run-batch``),
  journaled so a killed run resumes without submitting twice; :class:`BatchPending`, :class:`BatchError`.
- :class:`LiteLLMJudge`: any litellm model string, one endpoint or several; :class:`SimulatedJudge`:
  an offline judge driven by latent relevance; :class:`ProcessJudge`: a judge's calls spread over
  worker processes (``judge_windows(..., processes=N)``).
- :class:`JudgementStore`, :func:`read_judgements`, :func:`reparse_store`: the append-only store.
- :func:`estimate_cost`: calls, tokens and cost of a plan before spending anything.
- :class:`PromptTemplate`, :func:`builtin_template`, :func:`render_window`: prompts.
- :class:`Rubric`, :func:`load_rubric`, :func:`builtin_rubric`, :class:`RubricError`: rubric files (the criteria
  of the rubric windows; ``SimulatedJudge(..., prompts={"rubric": load_rubric("my.toml")})``).
- :func:`parse_answer`, :func:`parse_tournament`, :func:`parse_rubric`, :func:`parse_lists`,
  :data:`PARSER_VERSION`.
- Errors: :class:`JudgeError` and subclasses.

Runnable example: see :mod:`rcp_jax.judging.run`.
"""

from rcp_jax.judging.answers.parse import PARSER_VERSION, ParseResult, parse_answer, parse_lists, parse_rubric, parse_tournament
from rcp_jax.judging.answers.reparse import reparse_store
from rcp_jax.judging.batch.backends import BatchBackend, BatchError, BatchPending, FileBatches, ProviderBatches
from rcp_jax.judging.batch.runner import BatchProgress, judge_windows_batch, judge_windows_batch_sync
from rcp_jax.judging.errors import (
    InvalidAnswersError,
    JudgeAuthError,
    JudgeCredentialsError,
    JudgeError,
    JudgeInputError,
    JudgeNotFoundError,
    JudgeRequestError,
    JudgeStructuredOutputError,
    JudgeTimeoutError,
    JudgeTransportError,
    JudgeVerdictError,
    PromptError,
    StoreError,
    StoreLockedError,
)
from rcp_jax.judging.estimate import Estimate, estimate_cost
from rcp_jax.judging.judge import BaseJudge, Completion, JudgeRequest, Ledger
from rcp_jax.judging.offline import SimulatedJudge, synthetic_dataset
from rcp_jax.judging.prompts.pages import Document, ImageLimits, PageImage
from rcp_jax.judging.prompts.render import RenderedWindow, builtin_template, render_window
from rcp_jax.judging.prompts.rubric import Rubric, RubricError, builtin_rubric, load_rubric
from rcp_jax.judging.prompts.template import PromptTemplate
from rcp_jax.judging.run import JudgeProgress, judge_windows, judge_windows_sync
from rcp_jax.judging.store.jsonl import JudgementStore, read_judgements
from rcp_jax.judging.store.records import INVALID_CATEGORIES, STAGES, JudgeFamily, Judgement, Usage, Window, record_id
from rcp_jax.judging.transport.client import LiteLLMJudge
from rcp_jax.judging.transport.procs import ProcessJudge

__all__ = [
    "INVALID_CATEGORIES",
    "PARSER_VERSION",
    "STAGES",
    "BaseJudge",
    "BatchBackend",
    "BatchError",
    "BatchPending",
    "BatchProgress",
    "Completion",
    "Document",
    "Estimate",
    "FileBatches",
    "ImageLimits",
    "InvalidAnswersError",
    "JudgeAuthError",
    "JudgeCredentialsError",
    "JudgeError",
    "JudgeFamily",
    "JudgeInputError",
    "JudgeNotFoundError",
    "JudgeProgress",
    "JudgeRequest",
    "JudgeRequestError",
    "JudgeStructuredOutputError",
    "JudgeTimeoutError",
    "JudgeTransportError",
    "JudgeVerdictError",
    "Judgement",
    "JudgementStore",
    "Ledger",
    "PageImage",
    "LiteLLMJudge",
    "ParseResult",
    "ProcessJudge",
    "PromptError",
    "ProviderBatches",
    "PromptTemplate",
    "RenderedWindow",
    "Rubric",
    "RubricError",
    "SimulatedJudge",
    "StoreError",
    "StoreLockedError",
    "Usage",
    "Window",
    "builtin_rubric",
    "builtin_template",
    "estimate_cost",
    "judge_windows",
    "judge_windows_batch",
    "judge_windows_batch_sync",
    "judge_windows_sync",
    "load_rubric",
    "parse_answer",
    "parse_lists",
    "parse_rubric",
    "parse_tournament",
    "read_judgements",
    "record_id",
    "render_window",
    "reparse_store",
    "synthetic_dataset",
]
