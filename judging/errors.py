"""Domain errors of the judging layer.

Every message names the model, endpoint, window, file or id that is wrong and says what to do about it.
No message ever contains an API key: errors built from a provider's reply go through
:func:`judging.redact.redact` first, and the provider's own exception is never chained.
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


class JudgeTransportError(JudgeError):
    """Rate limits, server errors or timeouts persisted through every transport retry."""


class StoreError(JudgeError):
    """The judgement store is corrupt, locked by another writer, or used in a way it cannot support."""


class StoreLockedError(StoreError):
    """Another process holds the store's write lock."""
