"""Escape-by-default markup: the one way the report builds HTML and SVG.

A plain `str` child or attribute value is always escaped; only `Html` (markup this module
built, or a constant the report wrote itself) passes through. File names, messages and
tracebacks from the index are untrusted, and with this helper forgetting to escape one is
not possible: it would have to be wrapped in `Html` on purpose.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

VOID = frozenset({"meta", "input", "img", "br", "hr", "link"})
SVG_EMPTY = frozenset({"line", "path", "circle"})


class Html(str):
    """Text that is already markup; never built from untrusted input except through `el`."""

    __slots__ = ()


def text(value: object) -> Html:
    return Html(escape(str(value), quote=True))


def join(parts: Iterable[object]) -> Html:
    return Html("".join(_render_child(part) for part in parts))


def _render_child(child: object) -> str:
    if child is None or child is False:
        return ""
    if isinstance(child, Html):
        return child
    if isinstance(child, str | int | float):
        return text(child)
    if isinstance(child, Iterable):
        return join(child)
    return text(child)


def _attributes(attrs: dict[str, object]) -> str:
    out = []
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        # class_ -> class, data_idx -> data-idx, aria_label -> aria-label
        attr = name.rstrip("_").replace("_", "-")
        out.append(f" {attr}" if value is True else f' {attr}="{escape(str(value), quote=True)}"')
    return "".join(out)


def el(tag: str, *children: object, **attrs: object) -> Html:
    """One element; children and attribute values are escaped unless they are `Html`."""
    opening = f"<{tag}{_attributes(attrs)}"
    if tag in VOID:
        return Html(opening + ">")
    if tag in SVG_EMPTY and not children:
        return Html(opening + "/>")
    return Html(f"{opening}>{join(children)}</{tag}>")
