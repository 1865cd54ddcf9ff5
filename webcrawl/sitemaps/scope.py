"""Which sitemaps a host offers, and which URLs a sitemap may list (plain logic).

Discovery: the ``Sitemap:`` lines of a host's robots.txt (resolved against the file's
URL, http(s) only), else, when guessing is on, ``/sitemap.xml`` at the host's root.

Scope, as sitemaps.org defines it: a sitemap may list the URLs under its own directory
on its own host (``http://a/news/sitemap.xml`` lists ``http://a/news/...``), and every URL
of a host whose robots.txt lists it ("cross-submission": robots.txt proves the host's
owner chose that file).  A sitemap reached through an index inherits what the index was
allowed, since the index (at the host's root, or listed by its robots.txt) delegated to it:
sites commonly keep their sitemaps under ``/sitemaps/`` and list root URLs in them.
Scheme, host and port must match (``http://a`` does not vouch for ``https://a``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from urllib.parse import urljoin, urlsplit

from webcrawl.urls.urlkey import BadURLError, canonical_url

MAX_LISTED = 100  # sitemaps read from one robots.txt at most (real files list a few dozen)


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower case, without a default port ("" when
    ``url`` is not http(s) or names no host)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if scheme not in ("http", "https") or not host:
        return ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    if port is not None and port != {"http": 80, "https": 443}[scheme]:
        return f"{scheme}://{host}:{port}"
    return f"{scheme}://{host}"


def directory_of(url: str) -> str:
    """The prefix a sitemap at ``url`` may list by itself: its origin and the path up to
    its last ``/`` (``http://a/news/s.xml`` -> ``http://a/news/``), written as the
    canonical URLs it is compared with are (percent-encoding, dot segments)."""
    try:
        url = canonical_url(url)
    except BadURLError:
        return ""
    origin = origin_of(url)
    if not origin:
        return ""
    path = urlsplit(urljoin(origin + "/", urlsplit(url).path or "/")).path
    return origin + path[: path.rfind("/") + 1]


def listed_sitemaps(robots_url: str, lines: list[str]) -> list[str]:
    """The sitemap URLs of a robots.txt's ``Sitemap:`` values, resolved against the file's
    URL (a relative one is a common mistake), http(s) only, each once, at most
    :data:`MAX_LISTED`."""
    out: list[str] = []
    for line in lines:
        try:
            url = urljoin(robots_url, line.strip())
        except ValueError:
            continue
        if origin_of(url) and url not in out:
            out.append(url)
        if len(out) >= MAX_LISTED:
            break
    return out


def guessed_sitemap(origin: str) -> str:
    """The sitemap a host without ``Sitemap:`` lines most often has."""
    return origin + "/sitemap.xml"


@dataclass(frozen=True)
class Authority:
    """What one sitemap may list: the URLs under ``prefixes`` (its own directory, and
    what the index that listed it could list) and every URL of ``origins`` (hosts whose
    robots.txt lists it, or listed the index it came through)."""

    prefixes: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()

    @classmethod
    def of(cls, sitemap_url: str, listed_by: tuple[str, ...] = ()) -> Authority:
        """A sitemap's own authority: its directory, and the robots.txt origins that list
        it (``listed_by``)."""
        own = directory_of(sitemap_url)
        return cls((own,) if own else (), tuple(sorted(set(listed_by))))

    @cached_property
    def _origin_set(self) -> frozenset[str]:
        return frozenset(self.origins)

    def joined(self, other: Authority) -> Authority:
        """This authority and ``other``'s (a child sitemap's own, with its index's)."""
        return Authority(
            tuple(sorted(set(self.prefixes) | set(other.prefixes))),
            tuple(sorted(set(self.origins) | set(other.origins))),
        )

    def allows(self, url: str) -> bool:
        """Whether the sitemap may list ``url`` (canonical: :func:`canonical_url`)."""
        origin = origin_of(url)
        if not origin:
            return False
        if origin in self._origin_set:
            return True
        # on the origin as origin_of writes it, and the path without dot segments
        # (``/news/../admin/`` is not under ``/news/``)
        normal = urljoin(origin + "/", urlsplit(url.strip()).path or "/")
        return any(normal.startswith(prefix) for prefix in self.prefixes)

    def dumps(self) -> dict[str, list[str]]:
        return {"prefixes": list(self.prefixes), "origins": list(self.origins)}

    @classmethod
    def loads(cls, data: object) -> Authority:
        """An authority from a request's meta (an empty one when it is not one)."""
        if not isinstance(data, dict):
            return cls()
        prefixes = data.get("prefixes")
        origins = data.get("origins")
        return cls(
            tuple(str(p) for p in prefixes) if isinstance(prefixes, list) else (),
            tuple(str(o) for o in origins) if isinstance(origins, list) else (),
        )
