"""A page's outlinks, read from its lxml tree, each made absolute and canonical once.

:func:`page_links` gives exactly what ``LinkExtractor(deny_extensions=...,
unique=True).extract_links(response)`` followed by :func:`canonical_url` on
each link gives (first occurrences, in document order; links that are not
http(s), or that canonicalisation refuses, left out), at a fraction of the
cost: Scrapy's extractor splits and joins each URL four times (``urljoin``,
``safe_url_string``, ``urljoin`` again, ``urlparse`` for the extension
check), collects each link's text, builds a ``Link``, and our
canonicalisation parses it three times more.

Here most links take a fast path: an ``href`` made only of characters that
no step changes (letters, digits, ``-._~!$&'*+,=:@/``, no ``%``, ``?``,
``;``, parentheses or non-ASCII) against a plain http(s) base is resolved
with the algorithm of ``urllib.parse.urljoin`` and checked for a denied
extension (a suffix of its path), and its canonical form is then the scheme, the
base's canonical ``host[:port]`` and that path.  Every other ``href`` takes
the slow path, which is Scrapy's steps and :func:`canonical_url` themselves.
Property tests hold the two paths to the same answers
(``tests/test_links.py``), and the whole against ``LinkExtractor`` on real
pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urljoin, urlparse

from lxml import etree
from w3lib.html import strip_html5_whitespace
from w3lib.url import safe_url_string

from webcrawl.urls.urlkey import BadURLError, canonical_url

_XHTML = "{http://www.w3.org/1999/xhtml}"
# LinkExtractor's default tags (also in the XHTML namespace, as it reads them)
LINK_TAGS = ("a", "area", f"{_XHTML}a", f"{_XHTML}area")
# what LinkExtractor lets through before canonicalisation
_VALID_SCHEMES = frozenset({"http", "https", "file", "ftp"})

_SAFE = r"A-Za-z0-9._~!$&'*+,=:@/\-"
# an href every step leaves as it is, but for its resolution and fragment
_FAST_REF = re.compile(rf"([{_SAFE}]*)(?:#[{_SAFE}?%]*)?")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")  # as urllib.parse.urlsplit finds one
_NETLOC = r"[a-z0-9](?:[a-z0-9.\-]*[a-z0-9])?(?::[0-9]{1,5})?"
# a plain absolute URL: lower-case http(s), a lower-case host, a safe path
_FAST_ABSOLUTE = re.compile(rf"(https?)://({_NETLOC})(/[{_SAFE}]*)?")
_FAST_BASE = re.compile(rf"(https?)://({_NETLOC})(/[{_SAFE}]*)?(?:\?[^#]*)?(?:#.*)?")


_UNSET = object()


@lru_cache(maxsize=10_000)
def _canonical_netloc(scheme: str, netloc: str) -> str | None:
    """The canonical ``host[:port]`` of ``scheme://netloc`` (None: not a valid URL)."""
    try:
        return canonical_url(f"{scheme}://{netloc}/").split("/", 3)[2]
    except BadURLError:
        return None


class LinkResolver:
    """Canonical URLs of one page's ``href`` values.

    ``page_url`` is the response's URL, ``base_url`` what Scrapy's
    ``get_base_url(response)`` gives (the ``<base href>``, or the page's
    URL), ``encoding`` the response's (for the query of non-ASCII links).
    """

    def __init__(
        self,
        page_url: str,
        base_url: str,
        encoding: str,
        deny_extensions: Iterable[str] = (),
    ) -> None:
        self.page_url = page_url
        self.base_url = base_url
        self.encoding = encoding
        self.deny = tuple(deny_extensions)  # ".png", ...
        self._base: tuple[str, str, list[str]] | None = None
        self._itself: str | object | None = _UNSET  # where "" and "#..." lead
        base = _FAST_BASE.fullmatch(base_url)
        if base is not None:
            scheme, netloc, path = base.group(1), base.group(2), base.group(3) or ""
            canon = _canonical_netloc(scheme, netloc)
            if canon is not None:
                parts = path.split("/")
                if parts[-1] != "":  # the last segment is not a directory: not used
                    del parts[-1]
                self._base = (scheme, canon, parts)

    def canonical(self, href: str) -> str | None:
        """The canonical URL ``href`` links to, or None (not http(s), a denied
        extension, not a valid URL)."""
        ref = strip_html5_whitespace(href)
        match = _FAST_REF.fullmatch(ref)
        if match is None or self._base is None:
            return self.slow(ref)
        path = match.group(1)
        if not path:  # the base itself (a fragment of it: "#top")
            if self._itself is _UNSET:
                self._itself = self.slow("")
            return self._itself
        if path.startswith("//"):  # another host
            return self.slow(ref)
        if _SCHEME.match(path) is not None:
            return self._absolute(ref, path)
        scheme, netloc, base_parts = self._base
        return self._result(scheme, netloc, _resolve(base_parts, path))

    def _absolute(self, ref: str, path: str) -> str | None:
        """``canonical`` of an ``href`` with a scheme (``path``: without its fragment)."""
        if path.split(":", 1)[0].lower() not in ("http", "https"):
            return None  # mailto:, javascript:, tel:, ftp: ...: never followed
        absolute = _FAST_ABSOLUTE.fullmatch(path)
        if absolute is None:
            return self.slow(ref)
        path = absolute.group(3) or "/"
        segments = path.split("/")
        if "." in segments or ".." in segments:
            return self.slow(ref)  # canonicalisation resolves those: its way
        netloc = _canonical_netloc(absolute.group(1), absolute.group(2))
        if netloc is None:
            return self.slow(ref)
        return self._result(absolute.group(1), netloc, path)

    def _result(self, scheme: str, netloc: str, path: str) -> str | None:
        if path.lower().endswith(self.deny):  # url_has_any_extension: a suffix, not splitext
            return None
        return f"{scheme}://{netloc}{path}"

    def slow(self, ref: str) -> str | None:
        """Scrapy's ``LinkExtractor`` steps for one stripped ``href``, then
        :func:`canonical_url`."""
        try:
            url = safe_url_string(urljoin(self.base_url, ref), encoding=self.encoding)
            url = urljoin(self.page_url, url)  # as LinkExtractor does (where it may raise)
        except ValueError:
            return None
        if url.split("://", 1)[0] not in _VALID_SCHEMES:
            return None
        try:
            # Scrapy's url_has_any_extension, which it would import
            if urlparse(url).path.lower().endswith(self.deny):
                return None
            return canonical_url(url)
        except (BadURLError, ValueError):
            return None


def _resolve(base_parts: list[str], path: str) -> str:
    """``urljoin``'s resolution of a relative ``path`` (no scheme, no host) against a
    base whose path split at ``/`` without its last segment is ``base_parts``."""
    if path[:1] == "/":
        segments = path.split("/")
    else:
        segments = base_parts + path.split("/")
        segments[1:-1] = filter(None, segments[1:-1])  # as urljoin: no "//" made
    resolved: list[str] = []
    for seg in segments:
        if seg == "..":
            if resolved:
                resolved.pop()
        elif seg != ".":
            resolved.append(seg)
    if segments[-1] in (".", ".."):
        resolved.append("")
    path = "/".join(resolved)
    return path if path[:1] == "/" else f"/{path}"  # as urlunparse puts it after a host


def page_links(
    root: etree._Element,
    page_url: str,
    base_url: str,
    encoding: str,
    *,
    deny_extensions: Iterable[str] = (),
) -> list[str]:
    """The canonical URLs of the ``a`` and ``area`` links under ``root`` (an lxml
    tree), each once, in the order of their first link (see :class:`LinkResolver`)."""
    resolver = LinkResolver(page_url, base_url, encoding, deny_extensions)
    known: dict[str, str | None] = {}  # href -> its URL: pages repeat their links
    out: dict[str, None] = {}
    for el in root.iter(*LINK_TAGS):
        href = el.get("href")
        if href is None:
            continue
        if href in known:
            url = known[href]
        else:
            url = known[href] = resolver.canonical(href)
        if url is not None:
            out[url] = None
    return list(out)
