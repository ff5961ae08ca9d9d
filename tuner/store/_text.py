"""An error as the store keeps it: its end, whole lines, saying when it was shortened."""

from __future__ import annotations

ERROR_CHARS = 4000
"""The most characters of an error the store keeps (a sweep's or a trial's)."""


def last_lines(text: str, limit: int = ERROR_CHARS, *, cut: bool = False) -> str:
    """The end of `text` in whole lines, about `limit` characters at most.

    A traceback's last lines are the ones that explain it. Where lines were left out, a
    first line says so. A last line longer than `limit` keeps its end, from a word
    boundary.

    Args:
        text: The text.
        limit: About the most characters kept.
        cut: The text is already the end of something longer (a log's tail), so its first
            line starts mid-way and is dropped.

    Returns:
        The end of the text.
    """
    if not cut and len(text) <= limit:
        return text
    lines = text.rstrip("\n").split("\n")
    if cut and len(lines) > 1:
        lines = lines[1:]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if kept and size + len(line) + 1 > limit:
            break
        kept.append(line)
        size += len(line) + 1
    kept.reverse()
    left_out = len(lines) - len(kept)
    if len(kept[0]) > limit:  # one line longer than the limit: its end, from a word
        tail = kept[0][-limit:]
        space = tail.find(" ")
        kept[0] = tail[space + 1 :] if 0 <= space < 200 else tail
        cut = True
    if cut:
        note = "[shortened: its start is left out; the end follows]"
    else:
        word = "line" if left_out == 1 else "lines"
        note = f"[shortened: {left_out} earlier {word} left out, the last {len(kept)} follow]"
    return "\n".join([note, *kept])


__all__ = ["ERROR_CHARS", "last_lines"]
