"""A request as a host queue's entry (``<seq>|<serialised dict>``, members.py; the dict
kept small), and back: only what the crawl allows (:class:`EntryRules`).

Queue entries come from Redis and from the store's cold tier, which whoever can
write them fills (HBase's Thrift gateway usually has no authentication).  So an
entry is refused, before anything is imported or fetched, when it names a request
class not allowed, a URL of another scheme than http(s) or without a host, or
request meta that chooses where a worker connects (``CONNECT_META``: a proxy, a
bind address, a download slot).  For the same reason a worker's own requests go
into the queue without those keys (said once per key), unless the crawl trusts
them (``FRONTIER_TRUSTED_META``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.http.request import _find_method as request_to_name  # the slow, general path
from scrapy.spiders import CrawlSpider, SitemapSpider
from scrapy.utils.request import request_from_dict

from webcrawl.frontier import serialize

# What a plain Request's constructor gives an argument left out: its queue entry
# leaves these out (workers of every version read it the same way)
_DEFAULTS = {
    "callback": None,
    "errback": None,
    "headers": {},
    "body": b"",
    "cookies": {},
    "meta": {},
    "encoding": "utf-8",
    "flags": [],
    "cb_kwargs": {},
    "dont_filter": False,
    "method": "GET",
    "priority": 0,
}
# ... in the order of the general path's dict (Request.attributes after url, callbacks
# and headers), either side of meta, which may lose keys
_BEFORE_META = (("body", b""), ("cookies", {}))
_AFTER_META = tuple(
    (name, _DEFAULTS[name])
    for name in ("encoding", "flags", "cb_kwargs", "dont_filter", "method", "priority")
)


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of an absolute URL."""
    return "/".join(url.split("/", 3)[:3])


def _own_origin_path(url: str, headers: dict) -> str | None:
    """The path of the request's Referer when it is its only header and of the URL's
    own origin (a link within a site: the usual case), else None."""
    if len(headers) != 1:
        return None
    values = headers.get(b"Referer")
    if not values or len(values) != 1:
        return None
    referer, origin = values[0].decode("latin-1"), _origin(url)
    if referer.startswith(origin + "/") or referer == origin:
        return referer[len(origin) :]
    return None


# Request classes a queue entry may name (``_class``); others are refused before
# anything is imported (FRONTIER_REQUEST_CLASSES adds a project's own).
DEFAULT_REQUEST_CLASSES = (
    "scrapy.http.request.form.FormRequest",
    "scrapy.http.request.json_request.JsonRequest",
    "scrapy.http.request.rpc.XmlRpcRequest",
)


# Request meta that chooses where a worker connects (Scrapy's HttpProxyMiddleware,
# its download handler, its downloader's slots)
CONNECT_META = frozenset({"proxy", "_auth_proxy", "bindaddress", "download_slot"})
# ... and that lift a guard: robots.txt (ours and Scrapy's), the response size limits
GUARD_META = frozenset(
    {
        "dont_obey_robotstxt",
        "robots_txt",
        "download_maxsize",
        "download_warnsize",
        "download_timeout",
    }
)
UNTRUSTED_META = CONNECT_META | GUARD_META
FETCHED_SCHEMES = frozenset({"http", "https"})
# meta of the request that records a refused entry's page as failed (its reason)
REFUSED_META = "webcrawl_refused"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EntryRules:
    """What a queue entry may hold: its request class, its URL's scheme, and which of
    ``CONNECT_META`` its meta may carry."""

    request_classes: frozenset[str] = frozenset(DEFAULT_REQUEST_CLASSES)
    schemes: frozenset[str] = FETCHED_SCHEMES
    trusted_meta: frozenset[str] = field(default_factory=frozenset)


class RefusedEntry(ValueError):
    """A queue entry this worker will not turn into a request.  ``kind``: unreadable,
    class, scheme, url or meta; ``url``: its URL when it is an http(s) URL with a host
    (so the refusal can be recorded as that page's failure), else None."""

    def __init__(self, kind: str, message: str, url: str | None = None) -> None:
        super().__init__(message)
        self.kind, self.url = kind, url


class RefusedQueueEntry(Exception):
    """The failure of a refused entry's page (its request is never sent)."""


def _port_ok(parts: object) -> bool:
    """Whether a split URL's port is one Request takes (``.port`` raises otherwise)."""
    try:
        parts.port  # type: ignore[attr-defined]  # noqa: B018
    except (ValueError, AttributeError):
        return False
    return True


# the generic spiders' own callbacks, which their requests name
_GENERIC_CALLBACKS = {CrawlSpider: {"_callback", "_errback"}, SitemapSpider: {"_parse_sitemap"}}
# set by Scrapy on every request it downloads (a redirect or a retry copies them): left out
# quietly, the worker that fetches sets its own
_SCRAPYS = frozenset({"download_slot", "_auth_proxy", "download_timeout"})


class EntryCodec:
    """Encodes a worker's requests as queue entries, and decodes entries into requests."""

    def __init__(self, spider: Spider, rules: EntryRules | None = None) -> None:
        self.spider = spider
        self.rules = rules or EntryRules()
        self.request_classes = self.rules.request_classes
        self._untrusted = UNTRUSTED_META - self.rules.trusted_meta
        # what the spider's callbacks may be named: its own public methods
        self._spider_base = frozenset(dir(Spider)) - {"parse"}
        self._stripped: set[str] = set()  # meta keys said to be left out
        agent = getattr(spider, "settings", None) and spider.settings.get("USER_AGENT")
        self._own_agent: bytes | None = agent.encode() if agent else None

    def encode(self, request: Request) -> bytes:
        """JSON bytes of ``request.to_dict(spider=...)``, without its per-call cost, and
        small: a plain Request's entry leaves out what its constructor would give anyway
        (``_DEFAULTS``), and a Referer of the URL's own origin is kept as its path
        (``_ref``).  A typical link's entry is then its URL, its depth and that path.

        ``Request.to_dict`` finds a callback's name by scanning every method
        of the spider with ``inspect.getmembers`` for each request (~180 us,
        a quarter of a page's CPU time here).  We resolve names once per
        function and build the same dict.
        """
        headers = self._headers(request)
        if type(request) is Request:
            return self._encode_plain(request, headers)
        d = {
            "url": request.url,
            "callback": self._method_name(request.callback),
            "errback": self._method_name(request.errback),
            "headers": headers,
        }
        for attr in request.attributes:
            d.setdefault(attr, getattr(request, attr))
        if self._untrusted & d["meta"].keys():
            d["meta"] = self._strip(request, d["meta"], headers)
        # another constructor: its own defaults, all kept
        d["_class"] = type(request).__module__ + "." + type(request).__name__
        return serialize.dumps(d)

    def _headers(self, request: Request) -> dict:
        headers = dict(request.headers) if request.headers else {}
        if self._own_agent is not None and headers.get(b"User-Agent") == [self._own_agent]:
            # Set by this worker's UserAgentMiddleware, and copied into redirects:
            # the worker that fetches the request sets its own.
            del headers[b"User-Agent"]
        return headers

    def _encode_plain(self, request: Request, headers: dict) -> bytes:
        """A plain Request's entry: each field read once, and only those that differ
        from ``_DEFAULTS`` (the general path's dict and filter took a third of a link's
        encoding time), in the general path's order."""
        url = request.url
        d: dict = {"url": url}
        if request.callback is not None:
            d["callback"] = self._method_name(request.callback)
        if request.errback is not None:
            d["errback"] = self._method_name(request.errback)
        ref = _own_origin_path(url, headers) if headers else None
        if headers and ref is None:
            d["headers"] = headers
        for name, default in _BEFORE_META:
            if (value := getattr(request, name)) != default:
                d[name] = value
        meta = request.meta
        if meta and self._untrusted & meta.keys():
            meta = self._strip(request, meta, headers)
        if meta:
            d["meta"] = meta
        for name, default in _AFTER_META:
            if (value := getattr(request, name)) != default:
                d[name] = value
        if ref is not None:
            d["_ref"] = ref
        return serialize.dumps(d)

    def _strip(self, request: Request, meta: dict, headers: dict) -> dict:
        """``meta`` without the keys an entry may not carry (the worker that fetches the
        request applies its own proxy settings and guards); with the proxy goes its
        credentials header."""
        left = sorted(self._untrusted & meta.keys())
        for key in left:
            # (Scrapy's downloader sets download_slot, and its proxy middleware the proxy
            # of the environment, on every request: a redirect or a retry copies them)
            if key not in self._stripped and key not in _SCRAPYS and meta[key] is not None:
                self._stripped.add(key)
                logger.info(
                    "Request meta %r (of %s and any later request) is left out of the shared "
                    "queue: an entry may not choose where a worker connects nor lift a guard "
                    "(FRONTIER_TRUSTED_META keeps it)",
                    key,
                    request.url,
                )
        if "proxy" in left or "_auth_proxy" in left:
            headers.pop(b"Proxy-Authorization", None)
        return {k: v for k, v in meta.items() if k not in self._untrusted}

    def _spider_method(self, name: object) -> bool:
        """Whether ``name`` may be a callback: a public method of the spider that
        scrapy.Spider does not define (``parse`` excepted), or a generic spider's own
        (CrawlSpider's ``_callback``, SitemapSpider's ``_parse_sitemap``)."""
        if not isinstance(name, str) or not callable(getattr(self.spider, name, None)):
            return False
        for generic, names in _GENERIC_CALLBACKS.items():
            if name in names and isinstance(self.spider, generic):
                return True
        return not name.startswith("_") and name not in self._spider_base

    def _method_name(self, func: object) -> object:
        if not callable(func):
            return func  # None, or already a name
        underlying = getattr(func, "__func__", None)
        name = getattr(func, "__name__", None)
        if underlying is not None and name is not None:
            own = getattr(self.spider, name, None)
            if getattr(own, "__func__", None) is underlying:
                return name
        return request_to_name(self.spider, func)

    def decode(self, member: bytes) -> Request:
        """The request in a queue member; :class:`RefusedEntry` for one this worker will
        not read (:meth:`_decode`), whatever is wrong with it."""
        try:
            return self._decode(member)
        except RefusedEntry:
            raise
        except Exception as exc:  # garbage of any shape: nested too deep, bad tags...
            raise RefusedEntry("unreadable", f"{type(exc).__name__}: {exc}") from None

    def _decode(self, member: bytes) -> Request:
        """The request in a queue member (``<seq>|<json>``).

        Raises :class:`RefusedEntry` for an entry that is not a request dict, whose URL
        is not of an allowed scheme or has no host, or whose fields are not allowed
        (:meth:`_check_fields`).
        """
        try:
            d = serialize.loads(member.split(b"|", 1)[1])
        except Exception as exc:  # not JSON, or tags ($b, $d) of the wrong shape
            raise RefusedEntry("unreadable", f"not a serialised request: {exc}") from None
        if not isinstance(d, dict) or not isinstance(d.get("url"), str):
            raise RefusedEntry("unreadable", "not a serialised request")
        url = d["url"]
        try:  # (one parse of the URL per entry: this runs for every request popped)
            parts = urlsplit(url)
            scheme, host = parts.scheme.lower(), parts.hostname
        except ValueError:
            scheme, host, parts = "", None, None
        if scheme not in self.rules.schemes:
            allowed = ", ".join(sorted(self.rules.schemes))
            why = f"URL of scheme {scheme or 'none'!r} (FRONTIER_SCHEMES allows {allowed})"
            raise RefusedEntry("scheme", f"{why}: {url[:200]}")
        if not host:
            raise RefusedEntry("url", f"URL without a host: {url[:200]}")
        # the page a refusal is recorded for (an http(s) URL Request takes)
        page = url if scheme in FETCHED_SCHEMES and _port_ok(parts) else None
        self._check_fields(d, url, page)
        ref = d.pop("_ref", None)
        if isinstance(ref, str) and "headers" not in d:
            d["headers"] = {b"Referer": [(_origin(url) + ref).encode("latin-1")]}
        try:
            request = request_from_dict(d, spider=self.spider)
        except Exception as exc:  # bad field types...
            raise RefusedEntry("unreadable", f"{type(exc).__name__}: {exc}", page) from None
        if not isinstance(request, Request):
            raise RefusedEntry("class", f"{type(request).__name__} is not a scrapy Request", page)
        return request

    def _check_fields(self, d: dict, url: str, page: str | None) -> None:
        """Refuse meta that chooses where a worker connects or lifts a guard, a callback
        that is not a public method of the spider, and a request class (``_class``) not
        allowed: its name is checked before anything is imported (on a shared Redis
        whoever can write the queue would otherwise choose what every worker imports)."""
        meta = d.get("meta")
        if meta is not None and not isinstance(meta, dict):
            raise RefusedEntry("unreadable", "meta is not a dict", page)
        # whatever the value: even None or False turns Scrapy's limits or proxy off
        bad = sorted(self._untrusted & (meta or {}).keys())
        if bad:
            keys = ", ".join(map(repr, bad))
            why = f"meta {keys} chooses where a worker connects or lifts a guard"
            raise RefusedEntry("meta", f"{why} (FRONTIER_TRUSTED_META): {url[:200]}", page)
        for which in ("callback", "errback"):
            name = d.get(which)
            if name is not None and not self._spider_method(name):
                why = f"{which} {name!r} is not one of the spider's public methods"
                raise RefusedEntry("callback", f"{why}: {url[:200]}", page)
        name = d.get("_class")
        if name is not None and name not in self.request_classes:
            why = f"request class {name!r} is not in FRONTIER_REQUEST_CLASSES"
            raise RefusedEntry("class", why if isinstance(name, str) else "bad request class", page)
