"""Domain errors of the judging layer.

Every message names the model, endpoint, window, file or id that is wrong and says what to do about it.
No message ever contains an API key: errors built from a provider's reply go through
:func:`rcp_jax.judging.transport.redaction.redact` first, and the provider's own exception is never chained.
"""

from __future__ import annotations


class JudgeError(Exception):
    """Base class of every error the judging layer raises on purpose."""


class JudgeInputError(JudgeError, ValueError):
    """The windows, documents, queries or prompt given to the judge are malformed or inconsistent."""


class PromptError(JudgeInputError):
    """A prompt template is unusable (missing placeholder, unknown stage, bad criteria count)."""


class JudgeAuthError(JudgeError):
    """The endpoint refused the credentials (HTTP 401 or 403). Never retried."""


class JudgeNotFoundError(JudgeError):
    """The endpoint does not serve the model (HTTP 404 or an unknown model name). Never retried."""


class JudgeRequestError(JudgeError):
    """The endpoint rejected the request itself (HTTP 400/422: context too long, unsupported option)."""


class JudgeStructuredOutputError(JudgeRequestError):
    """The endpoint rejected the structured-output request (``response_format``) it was sent. Never retried;
    the message names the mode sent and the modes to try instead."""


class JudgeCredentialsError(JudgeAuthError):
    """No credentials reached the provider (no key given and none in its environment variable). Never
    retried; the message names the variable to set, never a key."""


class JudgeTransportError(JudgeError):
    """Rate limits, server errors or timeouts persisted through every transport retry."""


class JudgeTimeoutError(JudgeTransportError):
    """Every attempt of one call ran past its total deadline (``timeout`` seconds, connect to last byte)."""


class InvalidAnswersError(JudgeError):
    """Windows still have no valid answer after their attempts: the judge answered, but not usably.

    Attributes
    ----------
    summary : the :class:`rcp_jax.judging.answers.verdict.InvalidSummary` of the invalid answers (by category, one
        example), or ``None``.
    """

    def __init__(self, message: str, summary: object | None = None) -> None:
        super().__init__(message)
        self.summary = summary

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.summary))


class JudgeVerdictError(InvalidAnswersError):
    """The run stopped early: the first ``stop_after_invalid`` answers were all invalid, so this judge (model,
    settings, structured-output mode) is not answering usably; the message says by category how, shows
    one answer, and what to try."""


class StoreError(JudgeError):
    """The judgement store is corrupt, locked by another writer, or used in a way it cannot support."""


class StoreLockedError(StoreError):
    """Another process holds the store's write lock."""
