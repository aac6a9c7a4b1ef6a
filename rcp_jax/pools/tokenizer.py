"""Index terms of a text: lowercase, split at every non-letter-or-digit, drop stopwords, optionally stem plurals.

Used by the lexical retrievers (:mod:`rcp_jax.pools.lexical`) for documents and queries alike; deterministic and
locale-free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


# Our own list of English function words and very common verbs. Deliberately short: it removes words
# that carry no topic, and keeps negations and question words that sometimes matter ("not", "why").
ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each either else few for from
    further had has have having he her here hers herself him himself his i if in into is it its itself
    just me more most my myself nor of off on once only or other our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there these they this those
    through to too under until up upon us very was we were what which while who whom will with would you
    your yours yourself yourselves
    """.split()
)

_TOKEN = re.compile(r"[^\W_]+")


def plural_stem(word: str) -> str:
    """Conflate English plurals with their singular, a light stemmer (after Harman's S-stemmer, 1991).

    Three rules, first match wins: ``-ies`` becomes ``-y`` unless ``a`` or ``e`` precede it ("cherries"
    becomes "cherry"); ``-es`` becomes ``-e`` unless ``a``, ``e`` or ``o`` precede it ("tides" becomes
    "tide"); otherwise a final ``-s`` is dropped unless ``u`` or ``s`` precede it ("bus", "glass" stay).
    Words of three letters or fewer are kept as they are. Like any rule-based stemmer it conflates a few
    words wrongly ("series" becomes "sery"); that costs little, as queries and documents agree.

    Example:
        >>> [plural_stem(w) for w in ["batteries", "tides", "panels", "glass", "gas"]]
        ['battery', 'tide', 'panel', 'glass', 'gas']
    """
    if len(word) <= 3:
        return word
    if word.endswith("ies") and word[-4] not in "ae":
        return word[:-3] + "y"
    if word.endswith("es") and word[-3] not in "aeo":
        return word[:-1]
    if word.endswith("s") and word[-2] not in "us":
        return word[:-1]
    return word


def tokenize(
    text: str,
    *,
    stopwords: Iterable[str] | None = ENGLISH_STOPWORDS,
    stem: bool = False,
) -> list[str]:
    """Split text into index terms: lowercase, cut at every character that is not a letter or digit.

    Deterministic and locale-free: ``str.lower`` then maximal runs of Unicode letters and digits (the
    underscore separates too). Stopwords are removed after lowercasing, before stemming.

    Args:
        text: any string (``None`` or NaN count as empty).
        stopwords: words to drop; default :data:`ENGLISH_STOPWORDS`; ``None`` or ``()`` keeps every word.
        stem: apply :func:`plural_stem` to every kept word.

    Example:
        >>> tokenize("Why do my Sourdough loaves come out FLAT?")
        ['why', 'sourdough', 'loaves', 'come', 'flat']
        >>> tokenize("Bees' wax_cells", stopwords=None, stem=True)
        ['bee', 'wax', 'cell']
    """
    if not isinstance(text, str):
        return []
    stop = stopwords if isinstance(stopwords, (set, frozenset)) else frozenset(stopwords or ())
    words = [w for w in _TOKEN.findall(text.lower()) if w not in stop]
    return [plural_stem(w) for w in words] if stem else words
