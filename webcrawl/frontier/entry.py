"""A request as a host queue's entry (``<seq>|<serialised dict>``, the dict kept small),
and back: only as a request class the crawl allows."""

from __future__ import annotations

from collections.abc import Iterable

from scrapy import Request, Spider
from scrapy.http.request import _find_method as request_to_name  # the slow, general path
from scrapy.utils.request import request_from_dict

from webcrawl.frontier import serialize

# What a plain Request's constructor gives an argument left out: its queue entry
# leaves these out (workers of every version read it the same way)
_DEFAULTS = {"callback": None, "errback": None, "headers": {}, "body": b"", "cookies": {},
             "meta": {}, "encoding": "utf-8", "flags": [], "cb_kwargs": {},
             "dont_filter": False, "method": "GET", "priority": 0}  # fmt: skip
_KEEP = object()


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


class RefusedEntry(ValueError):
    """A queue entry this worker will not turn into a request (unreadable, or a class
    that is not allowed)."""


class EntryCodec:
    """Encodes a worker's requests as queue entries, and decodes entries into requests."""

    def __init__(
        self, spider: Spider, request_classes: Iterable[str] = DEFAULT_REQUEST_CLASSES
    ) -> None:
        self.spider = spider
        self.request_classes = frozenset(request_classes)
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
        headers = dict(request.headers)
        if self._own_agent is not None and headers.get(b"User-Agent") == [self._own_agent]:
            # Set by this worker's UserAgentMiddleware, and copied into redirects:
            # the worker that fetches the request sets its own.
            del headers[b"User-Agent"]
        d = {
            "url": request.url,
            "callback": self._method_name(request.callback),
            "errback": self._method_name(request.errback),
            "headers": headers,
        }
        for attr in request.attributes:
            d.setdefault(attr, getattr(request, attr))
        if type(request) is not Request:  # another constructor: its own defaults
            d["_class"] = type(request).__module__ + "." + type(request).__name__
            return serialize.dumps(d)
        ref = _own_origin_path(request.url, headers)
        if ref is not None:
            d["_ref"], d["headers"] = ref, {}
        return serialize.dumps({k: v for k, v in d.items()
                                if k == "url" or _DEFAULTS.get(k, _KEEP) != v})  # fmt: skip

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
        """The request in a queue member (``<seq>|<json>``).

        Raises :class:`RefusedEntry` for an entry that is not a request dict, or
        that names a request class (``_class``) outside ``request_classes``: on a
        shared Redis whoever can write the queue would otherwise choose what every
        worker imports.  The name is checked before anything is imported.
        """
        try:
            d = serialize.loads(member.split(b"|", 1)[1])
        except (IndexError, ValueError, UnicodeDecodeError) as exc:
            raise RefusedEntry(f"not a serialised request: {exc}") from None
        if not isinstance(d, dict) or not isinstance(d.get("url"), str):
            raise RefusedEntry("not a serialised request")
        ref = d.pop("_ref", None)
        if isinstance(ref, str) and "headers" not in d:
            d["headers"] = {b"Referer": [(_origin(d["url"]) + ref).encode("latin-1")]}
        name = d.get("_class")
        if name is not None and name not in self.request_classes:
            raise RefusedEntry(
                f"request class {name!r} is not in FRONTIER_REQUEST_CLASSES"
                if isinstance(name, str) else "bad request class"
            )  # fmt: skip
        try:
            request = request_from_dict(d, spider=self.spider)
        except Exception as exc:  # a bad callback name, bad field types...
            raise RefusedEntry(f"{type(exc).__name__}: {exc}") from None
        if not isinstance(request, Request):
            raise RefusedEntry(f"{type(request).__name__} is not a scrapy Request")
        return request
