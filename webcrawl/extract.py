"""What the crawler takes from an HTML page: title, visible text, outlinks."""

from __future__ import annotations

import re

from parsel import Selector

_SPACE = re.compile(r"\s+")
_INVISIBLE = ("script", "style", "noscript", "template", "svg", "head", "iframe", "object")
_VISIBLE_TEXT = "//body//text()[not(" + " or ".join(f"ancestor::{tag}" for tag in _INVISIBLE) + ")]"


def normalize_space(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def title(selector: Selector) -> str:
    return normalize_space(" ".join(selector.xpath("//title//text()").getall()))


def visible_text(selector: Selector) -> str:
    """The page's readable text: no script, style or markup, whitespace collapsed.

    Text of block elements is separated by single spaces; a page without a
    ``<body>`` (a fragment) falls back to all its text outside those tags.
    """
    parts = selector.xpath(_VISIBLE_TEXT).getall()
    if not parts and not selector.xpath("//body"):
        parts = selector.xpath(
            "//text()[not(" + " or ".join(f"ancestor::{t}" for t in _INVISIBLE) + ")]"
        ).getall()
    return normalize_space(" ".join(parts))
