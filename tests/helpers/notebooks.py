"""What an executed notebook printed."""

from __future__ import annotations


def printed_text(nb) -> str:
    """The text of every code cell's outputs (streams and ``text/plain`` results), one output per line."""
    return "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                     for c in nb.cells if c.cell_type == "code" for o in c.outputs)
