"""Documents that are pages: a page image (PNG or JPEG), its extracted text, or both.

A corpus value is either a plain ``str`` (a text document, as before) or a :class:`Document` holding
``text`` and an optional :class:`PageImage`. A page image is a local file, an inline ``data:`` URL or a
remote ``http(s)`` URL:

- a file or a data URL is read here, checked to be PNG or JPEG, and sent inline as a base64 ``data:``
  URL, scaled down to the window's :class:`ImageLimits` (longest side at most ``max_side`` pixels,
  encoded size at most ``max_bytes``; PNG stays PNG while it fits, else it is re-encoded as JPEG,
  quality 85, shrinking by a quarter until it fits). An image already within the limits is sent
  byte for byte;
- a remote URL is sent as it is (the provider fetches it): no limit can be applied, and its identity
  is the URL.

Identity (:func:`window_images_hash`): a window showing images is keyed by the SHA-256 of each image's
*bytes* (never its path) plus the limits, so a changed image is a new window and a moved or renamed file
is the same window. Text-only windows carry no image hash and keep their exact record ids.

Checks before any call (:func:`check_window_images`, run by :func:`rcp_jax.judging.judge_windows`): every local image of
the windows is read and decoded once (a damaged file, a ``data:`` URL of another media type, a format other than
PNG/JPEG fails here, naming the document, never after other windows went out), and a window holding more page-only
documents (an image, no text) than ``max_images`` is refused: such a document would not be shown at all, so no
answer about it could mean anything. A window's image slots go to its page-only documents first; documents with
text beyond the limit are shown by their text with a note.

Image tokens (:func:`approx_image_tokens`): where litellm has no image rule for the model, one token per
28 x 28-pixel patch of the image as sent (the Qwen2-VL / Qwen2.5-VL rule; Anthropic's published
width x height / 750 is within 5% of it).

Pillow is imported only when an image is encoded (``import judging`` stays cheap).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rcp_jax.judging.errors import JudgeInputError

#: File name endings of page images (``--images DIR`` looks for ``<doc id><ending>``).
IMAGE_SUFFIXES: tuple[str, ...] = (".png", ".jpg", ".jpeg")
#: Default longest side of an image as sent, in pixels (a page at ~100 dpi stays legible).
DEFAULT_MAX_SIDE = 1024
#: Default largest encoded image as sent, in bytes (before base64, which adds a third).
DEFAULT_MAX_BYTES = 1_000_000
#: Default most images in one window (vLLM's --limit-mm-per-prompt must allow as many).
DEFAULT_MAX_IMAGES = 10
#: Pixels per side of the patch the image-token approximation counts.
PATCH_PIXELS = 28

_MIME = {"PNG": "image/png", "JPEG": "image/jpeg"}
#: media types a ``data:`` URL of a page image may declare
_DATA_MEDIA = ("image/png", "image/jpeg", "image/jpg")


class ImageError(JudgeInputError):
    """A page image cannot be read or is not PNG/JPEG; the message names the document and the file."""


@dataclass(frozen=True)
class ImageLimits:
    """How large the images of one window may be.

    Attributes
    ----------
    max_side : longest side in pixels of an image as sent (larger ones are scaled down).
    max_bytes : largest encoded size in bytes of an image as sent (larger ones are re-encoded, then shrunk).
    max_images : most images in one window. Page-only documents (no text) get the slots first; documents with
        text past it are shown by their text alone, with a note saying so (see
        :attr:`rcp_jax.judging.prompts.render.RenderedWindow.omitted_images`); a window with more page-only documents is refused
        (:func:`check_window_images`).
    """

    max_side: int = DEFAULT_MAX_SIDE
    max_bytes: int = DEFAULT_MAX_BYTES
    max_images: int = DEFAULT_MAX_IMAGES

    def __post_init__(self) -> None:
        for name, low in (("max_side", 16), ("max_bytes", 1024), ("max_images", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise JudgeInputError(f"image limits: {name} must be an integer >= {low}, got {value!r}")

    def to_dict(self) -> dict[str, int]:
        return {"max_side": self.max_side, "max_bytes": self.max_bytes, "max_images": self.max_images}


class PageImage:
    """One page image: a file path, a ``data:`` URL or a remote URL (see the module docstring).

    The bytes of a file are read on first use and kept (``sha256`` too), so a corpus of many pages costs
    nothing until its windows are rendered.
    """

    __slots__ = ("source", "_data", "_sha")

    def __init__(self, source: str | Path) -> None:
        self.source = str(source)
        self._data: bytes | None = None
        self._sha: str | None = None

    @property
    def remote(self) -> bool:
        """Whether the image is a remote URL (sent as is, never read here)."""
        return self.source.startswith(("http://", "https://"))

    def read(self) -> bytes:
        """The image's bytes (a file's content, a data URL decoded); raises :class:`ImageError`."""
        if self._data is None:
            if self.remote:
                raise ImageError(f"image {self.source}: a remote URL is not read here (it is sent as is)")
            if self.source.startswith("data:"):
                head, _, payload = self.source.partition(",")
                media = head[5:].split(";")[0].strip().lower()
                if media not in _DATA_MEDIA:
                    raise ImageError(f"image data URL {self.source[:40]}...: its media type is {media or 'missing'!r}, "
                                     "not a PNG or JPEG image; give data:image/png;base64,... or "
                                     "data:image/jpeg;base64,..., or a file path")
                if not head.endswith(";base64"):
                    raise ImageError(f"image data URL {self.source[:40]}...: only base64 data URLs are read; "
                                     "give a file path or data:image/png;base64,...")
                try:
                    self._data = base64.b64decode(payload, validate=True)
                except (binascii.Error, ValueError):
                    raise ImageError(f"image data URL {self.source[:40]}...: the base64 payload is damaged") from None
            else:
                try:
                    self._data = Path(self.source).read_bytes()
                except OSError as err:
                    raise ImageError(f"image file {self.source}: cannot be read ({err.strerror or err}); fix the "
                                     "path (relative paths count from the corpus file's folder)") from None
        return self._data

    @property
    def sha256(self) -> str:
        """SHA-256 hex of the bytes (of the URL itself for a remote image)."""
        if self._sha is None:
            data = self.source.encode("utf-8") if self.remote else self.read()
            self._sha = hashlib.sha256(data).hexdigest()
        return self._sha

    @property
    def label(self) -> str:
        """The source for messages (a data URL shortened to its head)."""
        return self.source if not self.source.startswith("data:") else f"{self.source[:30]}... ({len(self.source)} chars)"

    def __repr__(self) -> str:
        shown = self.source if len(self.source) <= 60 else self.source[:57] + "..."
        return f"PageImage({shown!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PageImage) and other.sha256 == self.sha256

    def __hash__(self) -> int:
        return hash(self.sha256)

    def __reduce__(self) -> tuple[Any, ...]:
        return (PageImage, (self.source,))


@dataclass(frozen=True)
class Document:
    """A document of a corpus: text, a page image, or both (a page with its extracted text).

    Attributes
    ----------
    text : the document's text ("" for an image alone).
    image : the page image, or ``None`` for a text document.
    """

    text: str = ""
    image: PageImage | None = None


def doc_text(value: str | Document) -> str:
    """The text of a corpus value (a ``str`` is its own text)."""
    return value.text if isinstance(value, Document) else str(value)


def doc_image(value: str | Document) -> PageImage | None:
    """The page image of a corpus value, or ``None``."""
    return value.image if isinstance(value, Document) else None


def page_only(value: str | Document) -> bool:
    """Whether a corpus value is a page image without text (shown only through its image)."""
    return doc_image(value) is not None and not doc_text(value).strip()


@dataclass(frozen=True)
class EncodedImage:
    """An image as sent: ``url`` (a ``data:`` URL, or the remote URL as given), its size in pixels and bytes
    (``None`` when unknown: remote URLs) and whether it was scaled or re-encoded to fit the limits."""

    url: str
    width: int | None
    height: int | None
    n_bytes: int | None
    resized: bool = False


_CACHE: OrderedDict[tuple[str, int, int], EncodedImage] = OrderedDict()
_CACHE_SIZE = 512
_LOCK = threading.Lock()


def _pil() -> Any:
    try:
        from PIL import Image  # noqa: PLC0415 - only when an image is encoded
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib
        raise ImageError("page images need Pillow (pip install pillow); it normally comes with matplotlib") from None
    return Image


def encode_image(image: PageImage, limits: ImageLimits = ImageLimits(), *, doc_id: str = "?") -> EncodedImage:
    """``image`` as sent within ``limits`` (module docstring); cached by (bytes hash, limits).

    Raises :class:`ImageError` (naming ``doc_id`` and the file) for unreadable or non-PNG/JPEG images.
    """
    if image.remote:
        return EncodedImage(url=image.source, width=None, height=None, n_bytes=None)
    key = (image.sha256, limits.max_side, limits.max_bytes)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    out = _encode(_read(image, doc_id), limits, f"document {doc_id!r}: image {image.label}")
    with _LOCK:
        _CACHE[key] = out
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return out


def _read(image: PageImage, doc_id: str) -> bytes:
    """``image.read()``, its error naming the document."""
    try:
        return image.read()
    except ImageError as err:
        raise ImageError(f"document {doc_id!r}: {err}") from None


def _open(data: bytes, where: str) -> tuple[Any, str]:
    """(decoded Pillow image, format) of PNG/JPEG ``data``; :class:`ImageError` starting with ``where`` otherwise."""
    Image = _pil()
    try:
        img = Image.open(io.BytesIO(data))
        fmt = img.format
        img.load()
    except Exception as err:  # noqa: BLE001 - Pillow raises several kinds for damaged files
        why = "not an image Pillow recognises" if type(err).__name__ == "UnidentifiedImageError" else str(err)
        raise ImageError(f"{where} cannot be read as an image ({why}); give a PNG or JPEG file") from None
    if fmt not in _MIME:
        raise ImageError(f"{where} is {fmt or 'an unknown format'}, not PNG or JPEG; convert it (e.g. to PNG)")
    return img, fmt


_CHECKED: set[str] = set()  # SHA-256 of the images check_image decoded fine (bounded below)
_CHECKED_MAX = 200_000


def check_image(image: PageImage, *, doc_id: str = "?") -> None:
    """Read and decode ``image`` as :func:`encode_image` would (a remote URL is not read: nothing to check);
    raises :class:`ImageError` naming ``doc_id`` and the image. Images that passed are remembered (by bytes hash),
    so checking the same image again costs a hash lookup."""
    if image.remote:
        return
    data = _read(image, doc_id)
    if image.sha256 in _CHECKED:
        return
    _open(data, f"document {doc_id!r}: image {image.label}")
    with _LOCK:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED.add(image.sha256)


def check_window_images(windows: Sequence[Any], docs: Any, limits: ImageLimits | None = None) -> None:
    """Before any call: every image of ``windows`` (:class:`judging.Window`, ``docs`` a
    :class:`rcp_jax.judging.lookup.PerQuery` of corpus values) decodes as PNG/JPEG (:func:`check_image`), and no window
    holds more page-only documents than ``limits.max_images`` (such a document would not be shown at all).

    Raises :class:`ImageError` naming the window or document and the fix."""
    limits = limits or ImageLimits()
    for w in windows:
        values = [docs.get(w.query_id, d) for d in w.doc_ids]
        if not any(doc_image(v) is not None for v in values):
            continue
        only = [d for d, v in zip(w.doc_ids, values) if page_only(v)]
        if len(only) > limits.max_images:
            raise ImageError(
                f"window {w.label}: {len(only)} of its documents are page images without text ({', '.join(only[:5])}"
                f"{' ...' if len(only) > 5 else ''}) but at most {limits.max_images} images are shown per window, so "
                f"{len(only) - limits.max_images} would not be shown at all and their scores would mean nothing. "
                f"Raise the image limit to {len(only)} or more (rcp-jax: --images-per-window; the server's limit too, "
                "e.g. vLLM --limit-mm-per-prompt), or give those documents their extracted text")
        for d, v in zip(w.doc_ids, values):
            image = doc_image(v)
            if image is not None:
                check_image(image, doc_id=d)


def _encode(data: bytes, limits: ImageLimits, where: str) -> EncodedImage:
    img, fmt = _open(data, where)
    Image = _pil()
    width, height = img.size
    if max(width, height) <= limits.max_side and len(data) <= limits.max_bytes:
        return EncodedImage(_data_url(_MIME[fmt], data), width, height, len(data))
    scale = min(1.0, limits.max_side / max(width, height))
    fmt_out = fmt
    while True:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        frame = img.resize(size, Image.LANCZOS) if size != img.size else img
        body = _save(frame, fmt_out)
        if len(body) > limits.max_bytes and fmt_out == "PNG":
            fmt_out = "JPEG"  # a page scan compresses far better as JPEG
            body = _save(frame, fmt_out)
        if len(body) <= limits.max_bytes or max(size) <= 16:
            return EncodedImage(_data_url(_MIME[fmt_out], body), size[0], size[1], len(body), resized=True)
        scale *= 0.75


def _save(img: Any, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "JPEG":
        if img.mode not in ("RGB", "L"):
            img = img.convert("RGB")
        img.save(buf, format="JPEG", quality=85, optimize=True)
    else:
        img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def data_url_size(url: str) -> tuple[int, int] | None:
    """(width, height) of the image in a ``data:`` URL (``None`` for other URLs or unreadable data)."""
    if not url.startswith("data:"):
        return None
    try:
        img = _pil().open(io.BytesIO(base64.b64decode(url.partition(",")[2])))
        return int(img.size[0]), int(img.size[1])
    except Exception:  # noqa: BLE001 - an estimate must not fail on one odd image
        return None


def approx_image_tokens(url: str, limits: ImageLimits = ImageLimits()) -> int:
    """The documented approximation of one image's prompt tokens: ``ceil(w / 28) * ceil(h / 28)`` of the image
    as sent (a remote URL, whose size is unknown here, counts as a ``max_side`` square)."""
    size = data_url_size(url) or (limits.max_side, limits.max_side)
    return math.ceil(size[0] / PATCH_PIXELS) * math.ceil(size[1] / PATCH_PIXELS)


def window_images_hash(doc_values: Sequence[str | Document], limits: ImageLimits) -> str:
    """The image identity of a window whose documents are ``doc_values`` (in window order): a 16-hex hash of
    each image's bytes (``None`` for a document without one) and the limits; ``""`` when no document of the
    window has an image (its record id then stays that of a text window)."""
    from rcp_jax.judging.store.records import content_hash  # noqa: PLC0415 - records imports nothing from here

    shas = [img.sha256 if (img := doc_image(v)) is not None else None for v in doc_values]
    if not any(shas):
        return ""
    return content_hash({"images": shas, "limits": limits.to_dict()})


def message_text(content: str | Sequence[Mapping[str, Any]]) -> str:
    """The text of a chat message's content: the string itself, or its text parts joined."""
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")


def message_images(content: str | Sequence[Mapping[str, Any]]) -> list[str]:
    """The image URLs of a chat message's content parts, in order (none for a plain string)."""
    if isinstance(content, str):
        return []
    out = []
    for p in content:
        if p.get("type") == "image_url":
            inner = p.get("image_url")
            out.append(inner.get("url", "") if isinstance(inner, Mapping) else str(inner))
    return out


def stamp_images(windows: Sequence[Any], docs: Any, limits: ImageLimits | None = None) -> list[Any]:
    """``windows`` (:class:`judging.Window`) with :attr:`~judging.Window.images` set on those showing a page
    image (``docs`` a :class:`rcp_jax.judging.lookup.PerQuery` of corpus values); text windows come back unchanged."""
    import dataclasses  # noqa: PLC0415

    limits = limits or ImageLimits()
    out = []
    for w in windows:
        values = [docs.get(w.query_id, d) for d in w.doc_ids]
        for d, v in zip(w.doc_ids, values):  # an unreadable image: the error names its document
            if (image := doc_image(v)) is not None and not image.remote:
                _read(image, d)
        stamp = window_images_hash(values, limits)
        out.append(dataclasses.replace(w, images=stamp) if stamp != w.images else w)
    return out
