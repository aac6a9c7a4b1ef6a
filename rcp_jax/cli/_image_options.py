"""The page-image options of the judge (``--image-max-side``, ``--image-max-bytes``, ``--images-per-window``).

The defaults repeat :mod:`judging.pages` (a test keeps them equal), so building the parser imports nothing.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judging.pages import ImageLimits

#: judging.pages defaults, repeated so that `rcp-jax --help` imports nothing
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
                   help="most page images in one judge call; later documents of the window are shown by their text "
                        "with a note (match vLLM's --limit-mm-per-prompt) (default "
                        f"{DEFAULT_MAX_IMAGES})")


def image_limits(args) -> ImageLimits:
    """The :class:`judging.pages.ImageLimits` of ``args`` (defaults for a namespace without the options)."""
    from judging.pages import ImageLimits

    return ImageLimits(
        max_side=getattr(args, "image_max_side", DEFAULT_MAX_SIDE),
        max_bytes=getattr(args, "image_max_bytes", DEFAULT_MAX_BYTES),
        max_images=getattr(args, "images_per_window", DEFAULT_MAX_IMAGES),
    )
