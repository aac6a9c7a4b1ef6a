"""The page-image options of the judge (``--image-max-side``, ``--image-max-bytes``, ``--images-per-window``), and
the checks of a collection's page images before any judge call (:func:`check_page_images`).

The defaults repeat :mod:`rcp_jax.judging.prompts.pages` (a test keeps them equal), so building the parser imports nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from rcp_jax.judging.prompts.pages import ImageLimits

#: rcp_jax.judging.prompts.pages defaults, repeated so that `rcp-jax --help` imports nothing
DEFAULT_MAX_SIDE = 1024
DEFAULT_MAX_BYTES = 1_000_000
DEFAULT_MAX_IMAGES = 10


def _at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low} ({what}), got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low} ({what}), got {value}")
        return value

    return parse


def add_image_options(p: argparse.ArgumentParser) -> None:
    """The ``page images`` argument group (every option states its default)."""
    g = p.add_argument_group("page images", "documents that are page images (see the README: Judging page images)")
    g.add_argument("--image-max-side", type=_at_least(16, "pixels"), default=DEFAULT_MAX_SIDE, metavar="PX",
                   help="longest side in pixels of a page image as sent; larger images are scaled down "
                        f"(default {DEFAULT_MAX_SIDE})")
    g.add_argument("--image-max-bytes", type=_at_least(1024, "bytes"), default=DEFAULT_MAX_BYTES, metavar="N",
                   help="largest encoded page image in bytes as sent (before base64); a larger one is re-encoded as "
                        f"JPEG and shrunk until it fits (default {DEFAULT_MAX_BYTES:_})".replace("_", ","))
    g.add_argument("--images-per-window", type=_at_least(1, "images"), default=DEFAULT_MAX_IMAGES, metavar="N",
                   help="most page images in one judge call (match vLLM's --limit-mm-per-prompt): page-only documents "
                        "get them first, other documents past it are shown by their text with a note; a pool whose "
                        "windows could hold more page-only documents than this is refused before any call (default "
                        f"{DEFAULT_MAX_IMAGES})")


def image_limits(args) -> ImageLimits:
    """The :class:`rcp_jax.judging.prompts.pages.ImageLimits` of ``args`` (defaults for a namespace without the options)."""
    from rcp_jax.judging.prompts.pages import ImageLimits

    return ImageLimits(
        max_side=getattr(args, "image_max_side", DEFAULT_MAX_SIDE),
        max_bytes=getattr(args, "image_max_bytes", DEFAULT_MAX_BYTES),
        max_images=getattr(args, "images_per_window", DEFAULT_MAX_IMAGES),
    )


def check_page_images(corpus: pd.DataFrame, documents: Mapping[str, Any], pools: Mapping[str, Sequence[str]],
                      limits: ImageLimits, window_size: int) -> None:
    """Before any judge call: every pooled document's page image decodes as PNG or JPEG (remote URLs are not
    fetched), and no query's windows (``window_size`` documents) could hold more page-only documents than
    ``limits.max_images`` (one past it would not be shown at all).

    ``documents`` are the pipeline's corpus values (:class:`rcp_jax.judging.prompts.pages.Document` for pages), ``corpus`` the table
    they came from (its index the source line), ``pools`` ``{query_id: [doc ids]}``.

    Raises:
        DataError: naming the corpus file and line and the document (a bad image), or the query, the counts and
            the fix (too many page-only documents).
    """
    from rcp_jax.data.table_checks import _where
    from rcp_jax.errors import DataError
    from rcp_jax.judging.prompts.pages import ImageError, check_image, doc_image, page_only

    lines = dict(zip(corpus["doc_id"].astype(str), corpus.index))
    checked: set[str] = set()
    for q, docs in pools.items():
        for d in docs:
            image = doc_image(documents.get(d, ""))
            if image is None or d in checked:
                continue
            checked.add(d)
            try:
                check_image(image, doc_id=d)
            except ImageError as err:
                where = _where(corpus, lines[d]) if d in lines else "the corpus"
                raise DataError(f"{where}: {err}") from None
        only = sum(page_only(documents.get(d, "")) for d in docs)
        most = min(window_size, len(docs), only)
        if most > limits.max_images:
            raise DataError(
                f"query {q!r}: its pool holds {only} page-only documents (an image, no text) and a window shows up to "
                f"{min(window_size, len(docs))} documents, but --images-per-window is {limits.max_images}: a page-only "
                "document past the image limit would not be shown at all, and its score would mean nothing. Give "
                f"--images-per-window {most} or more (and raise the server's per-request image limit to match, e.g. "
                "vLLM --limit-mm-per-prompt), or give those documents their extracted text")
