"""Removing secrets from text before it reaches a message, a log line or a record."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Shapes of bearer tokens and provider keys (OpenAI-style "sk-...", Anthropic "sk-ant-...", generic
# long hex/base64 runs after "key"/"token"/"Bearer").
_TOKEN_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-*.]{6,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-.=]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|authorization)[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9_\-.=*]{8,}"),
)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Return ``text`` with every given secret and every key-shaped token replaced by ``***``.

    Parameters
    ----------
    text : the text to clean (an upstream error message, a log line).
    secrets : exact strings to remove (the configured API keys); ``None`` and short strings (< 4
        characters, too short to be a key and too likely to hit ordinary words) are ignored.
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
            # Providers often echo a masked key: its head and tail. Remove the distinctive tail too.
            if len(secret) >= 12:
                text = text.replace(secret[-6:], "***")
    for pattern in _TOKEN_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + "***", text)
        else:
            text = pattern.sub("***", text)
    return text
