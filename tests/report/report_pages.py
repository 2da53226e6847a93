"""Read a report page the way a browser's parser does (html.parser), for assertions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    text: str = ""


@dataclass
class ParsedPage:
    elements: list[Element] = field(default_factory=list)
    scripts: list[Element] = field(default_factory=list)
    text: str = ""

    def find(self, tag: str, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.elements
            if e.tag == tag
            and all(e.attrs.get(k.rstrip("_").replace("_", "-")) == v for k, v in attrs.items())
        ]

    def table_data(self) -> dict[str, Any]:
        island = [s for s in self.scripts if s.attrs.get("id") == "dl-data"]
        assert len(island) == 1, "the page must hold exactly one table data island"
        data: dict[str, Any] = json.loads(island[0].text)
        return data

    def table_rows(self) -> list[dict[str, Any]]:
        """The table's rows as dicts, with kind names instead of numbers."""
        data = self.table_data()
        names = ["idx", "key", "status", "kinds", "q", "message", "details", "duration", "nbytes", "tb"]
        rows = []
        for raw in data["rows"]:
            row = dict(zip(names, raw, strict=True))
            row["kinds"] = [data["kinds"][k] for k in row["kinds"]]
            row["traceback"] = data["tracebacks"][row["tb"]] if row["tb"] is not None else None
            rows.append(row)
        return rows


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = ParsedPage()
        self._open: list[Element] = []
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.page.elements.append(element)
        if tag == "script":
            self.page.scripts.append(element)
        if tag not in ("meta", "input", "img", "br", "hr", "link", "line"):
            self._open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.elements.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                return

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.text += data
        if not self._open or self._open[-1].tag not in ("script", "style"):
            self._text.append(data)

    def close(self) -> None:
        super().close()
        self.page.text = "".join(self._text)


def parse_page(path: Path) -> ParsedPage:
    parser = _Parser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser.page
