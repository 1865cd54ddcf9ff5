"""URL canonicalisation and Nutch 2 row keys (reversed host).

``http://www.example.com/about/`` is stored under ``com.example.www:http/about/``
so that the rows of one site sort together.  The format is Nutch's
``TableUtil.reverseUrl``: reversed host labels, ``:``, scheme, ``:port`` when
the URL has a non-default port, then path and query.  IPv6 hosts are kept in
their brackets and not reversed (they have no labels).  Keys round-trip:
``key_to_url(url_to_key(u)) == canonical_url(u)``.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

DEFAULT_PORTS = {"http": 80, "https": 443}
SCHEMES = frozenset(DEFAULT_PORTS)


class BadURLError(ValueError):
    """The string is not an absolute http(s) URL we can crawl."""


def canonical_url(url: str) -> str:
    """Return the canonical form of an absolute http(s) URL.

    w3lib's ``canonicalize_url`` (sorted query, percent-encoding, IDNA host,
    no fragment), then: lower-case scheme, no user info, no default port,
    ``/`` for an empty path.  Raises :class:`BadURLError` for anything else.
    """
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadURLError(f"not a URL: {url!r} ({exc})") from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise BadURLError(f"not an absolute URL (no scheme): {url!r}")
    if scheme not in SCHEMES:
        raise BadURLError(f"unsupported scheme {scheme!r} in {url!r} (only http, https)")
    if not parts.hostname:
        raise BadURLError(f"no host in URL: {url!r}")
    try:
        canon = canonicalize_url(url, keep_fragments=False)
    except (ValueError, UnicodeError) as exc:
        raise BadURLError(f"not a URL: {url!r} ({exc})") from None
    parts = urlsplit(canon)
    host = parts.hostname or ""
    if not host:  # w3lib read the host as part of the path (http://\\/ is http:///)
        raise BadURLError(f"no host in URL: {url!r}")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path, query = strip_session_ids(parts.path or "/", parts.query)
    return urlunsplit((scheme, netloc, path, query, ""))


# Query and path parameters that carry a session (Java's jsessionid, PHP's PHPSESSID,
# ColdFusion's CFID/CFTOKEN, ASP's ASPSESSIONID<x>, ...): one page, one URL.
SESSION_PARAMS = frozenset(
    {
        "jsessionid",
        "phpsessid",
        "sid",
        "sessionid",
        "session_id",
        "sessid",
        "cfid",
        "cftoken",
        "zenid",
        "oscsid",
    }
)
# ASP.NET's cookieless sessions: a path segment like (S(kdh3ocbq5ydfa42mm5rm0zuy))
_ASPNET_SESSION = re.compile(r"^\((?:[A-Z]\([^()/]*\))+\)$")


def _is_session(name: str) -> bool:
    name = unquote(name).lower()
    return name in SESSION_PARAMS or name.startswith("aspsessionid")


def strip_session_ids(path: str, query: str) -> tuple[str, str]:
    """``path`` and ``query`` without session identifiers: query parameters with a
    session name, ``;jsessionid=...`` path parameters, ASP.NET ``(S(...))`` segments."""
    if ";" in path or "(" in path:
        segments = []
        for segment in path.split("/"):
            if _ASPNET_SESSION.match(segment):
                continue
            name, *params = segment.split(";")
            kept = [p for p in params if not _is_session(p.partition("=")[0])]
            segments.append(";".join([name, *kept]))
        path = "/".join(segments) or "/"
    if query:
        query = "&".join(p for p in query.split("&") if not _is_session(p.partition("=")[0]))
    return path, query


def _reverse_host(host: str) -> str:
    if host.startswith("["):
        return host
    return ".".join(reversed(host.split(".")))


def url_to_key(url: str) -> str:
    """Nutch 2 row key of ``url`` (canonicalised first)."""
    parts = urlsplit(canonical_url(url))
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    key = f"{_reverse_host(host)}:{parts.scheme}"
    if parts.port is not None:
        key += f":{parts.port}"
    key += parts.path
    if parts.query:
        key += "?" + parts.query
    return key


def key_to_url(key: str) -> str:
    """Inverse of :func:`url_to_key`."""
    if key.startswith("["):
        end = key.find("]")
        if end < 0:
            raise BadURLError(f"not a row key: {key!r}")
        host, rest = key[: end + 1], key[end + 1 :]
        if not rest.startswith(":"):
            raise BadURLError(f"not a row key: {key!r}")
        rest = rest[1:]
    else:
        host, sep, rest = key.partition(":")
        if not sep:
            raise BadURLError(f"not a row key: {key!r}")
    slash = rest.find("/")
    if slash < 0:
        raise BadURLError(f"not a row key (no path): {key!r}")
    scheme_port, path = rest[:slash], rest[slash:]
    scheme, _, port = scheme_port.partition(":")
    netloc = _reverse_host(host) + (f":{port}" if port else "")
    return f"{scheme}://{netloc}{path}"


def site_prefix(url: str) -> str:
    """Row-key prefix shared by every page of ``url``'s site (host, scheme, port)."""
    key = url_to_key(url)
    return key[: key.index("/")]
