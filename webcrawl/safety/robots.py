"""robots.txt as RFC 9309 says, shared by the whole crawl (plain logic, no Scrapy).

- What an answer means (:func:`from_response`, :func:`from_error`): 2xx, the
  rules in its first 500 KiB (:data:`MAX_BYTES`; a longer file is cut at the
  last whole line); 4xx but 429, or more than five redirects, or a redirect we
  refuse: *unavailable*, everything allowed; 5xx, 429, or no answer at all
  (connection refused, timeout, DNS): *unreachable*, everything disallowed
  until the file is tried again (``retry_at``), at most ``max_tries`` times in a
  row, after which the host's requests fail (recorded) until the entry expires.
  Unless a copy of it is known: a copy over 24 h old is fetched again, and while
  the file is unreachable the copy is kept, up to 48 h old (:data:`KEEP_SECONDS`;
  RFC 9309 2.4 allows it), tried again every ``wait`` seconds.
  An HTML error page or garbage in a 200 is parsed like any file: lines that are
  not rules are ignored (usually: everything allowed).
- What is shared (:class:`RobotsEntry`, JSON in Redis until it is 48 h old; used
  as it is for 24 h, RFC 9309's upper bound for caching): not the file but the
  rules that apply to our user agent (:func:`compact_rules`), as a small
  robots.txt of one group that
  Protego parses to the same answers.  It relies on Protego's private grouping
  helpers (``protego._protego``); if they move, the whole file (cut at 500 KiB)
  is shared instead, and ``tests/test_robots.py`` checks on arbitrary files that
  both give the same answers as the file itself.
- :func:`decompress_prefix`: the first ``limit`` bytes of a compressed body
  (gzip, deflate, br, zstd) without expanding the rest, so a robots.txt bomb
  costs 500 KiB.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from dataclasses import dataclass

from protego import Protego

MAX_BYTES = 500 * 1024  # RFC 9309 2.5: crawlers SHOULD parse at least 500 KiB
MAX_REDIRECTS = 5  # RFC 9309 2.3.1.2: follow at least five consecutive redirects
CACHE_SECONDS = 86400.0  # RFC 9309 2.4: SHOULD NOT use a cached copy longer than 24 h...
# ...unless the file is unreachable: then the last copy is used up to this old (while it
# is tried again every ROBOTSTXT_UNREACHABLE_WAIT), so that one failed refetch does not
# stop, or with the failed-path filter kill, a site that is crawled well
KEEP_SECONDS = 2 * CACHE_SECONDS

RULES, ALLOW_ALL, UNREACHABLE = "rules", "allow", "unreachable"


@dataclass
class RobotsEntry:
    """A host's robots.txt as the crawl knows it."""

    state: str  # RULES, ALLOW_ALL or UNREACHABLE
    rules: str = ""  # RULES: the group that applies to us, as robots.txt text
    fetched_at: float = 0.0
    tries: int = 0  # UNREACHABLE: fetches in a row that got no usable answer
    retry_at: float = 0.0  # UNREACHABLE, or a copy kept: when to try the file again
    reason: str = ""  # why ALLOW_ALL or UNREACHABLE (status, error), or why a copy is kept
    truncated: bool = False
    # UNREACHABLE: no answer at all (no connection, or none in time), not a 5xx or 429:
    # with the failed-path filter on, the site is dead until a re-probe finds it answering
    unanswered: bool = False

    def dumps(self) -> bytes:
        data = {"s": self.state, "t": round(self.fetched_at, 3)}
        for key, value in (
            ("r", self.rules),
            ("n", self.tries),
            ("at", round(self.retry_at, 3)),
            ("why", self.reason),
            ("cut", self.truncated),
            ("u", self.unanswered),
        ):
            if value:
                data[key] = value
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def loads(cls, raw: bytes | str) -> RobotsEntry | None:
        """The entry, or None if ``raw`` is not one (then the file is fetched again)."""
        try:
            data = json.loads(raw)
            entry = cls(
                str(data["s"]),
                str(data.get("r", "")),
                float(data.get("t", 0)),
                int(data.get("n", 0)),
                float(data.get("at", 0)),
                str(data.get("why", "")),
                bool(data.get("cut", False)),
                bool(data.get("u", False)),
            )
        except (ValueError, TypeError, KeyError):
            return None
        return entry if entry.state in (RULES, ALLOW_ALL, UNREACHABLE) else None

    def parser(self) -> Protego | None:
        """Protego for RULES; None when everything is allowed (or disallowed)."""
        return Protego.parse(self.rules) if self.state == RULES else None


def verdict(entry: RobotsEntry | None, now: float, max_tries: int) -> tuple[str, float]:
    """What to do with a request to the host: ``("fetch", 0)`` (the file is not known,
    or it is time to try it again: its copy is over :data:`CACHE_SECONDS` old),
    ``("check", 0)`` (rules known), ``("wait", s)`` (unreachable: disallowed for ``s``
    more seconds) or ``("give_up", 0)``."""
    if entry is None:
        return "fetch", 0.0
    if entry.state != UNREACHABLE:
        if now - entry.fetched_at >= CACHE_SECONDS and now >= entry.retry_at:
            return "fetch", 0.0
        return "check", 0.0
    if entry.tries >= max_tries:
        return "give_up", 0.0
    if now >= entry.retry_at:
        return "fetch", 0.0
    return "wait", entry.retry_at - now


def decode_body(body: bytes) -> tuple[str, bool]:
    """The text of a robots.txt body (UTF-8, RFC 9309 2.2): its first :data:`MAX_BYTES`,
    cut after the last whole line when longer; and whether it was cut."""
    truncated = len(body) > MAX_BYTES
    if truncated:
        body = body[:MAX_BYTES]
        end = max(body.rfind(b"\n"), body.rfind(b"\r"))
        body = body[: end + 1] if end >= 0 else b""
    return body.decode("utf-8", "replace").removeprefix("\ufeff"), truncated


def from_response(  # noqa: PLR0917
    status: int,
    body: bytes,
    now: float,
    user_agent: str,
    previous: RobotsEntry | None,
    wait: float,
) -> RobotsEntry:
    """The entry an HTTP answer to ``/robots.txt`` gives (redirects already followed)."""
    if 200 <= status < 300:
        text, truncated = decode_body(body)
        return RobotsEntry(RULES, compact_rules(text, user_agent), now, truncated=truncated)
    if status == 429 or status >= 500:
        return unreachable(f"HTTP {status}", now, previous, wait)
    return RobotsEntry(ALLOW_ALL, fetched_at=now, reason=f"HTTP {status}")


def unreachable(
    reason: str, now: float, previous: RobotsEntry | None, wait: float, *, unanswered: bool = False
) -> RobotsEntry:
    """The entry after a fetch that got no usable answer (``reason``); ``unanswered``: no
    answer at all (no connection, or none in time).  A usable copy under
    :data:`KEEP_SECONDS` old is kept, tried again in ``wait`` seconds (RFC 9309 2.4)."""
    usable = previous is not None and previous.state != UNREACHABLE
    if usable and now - previous.fetched_at < KEEP_SECONDS:
        return dataclasses.replace(
            previous, retry_at=now + wait, reason=f"kept: the refetch got {reason}"
        )
    tries = previous.tries + 1 if previous is not None and previous.state == UNREACHABLE else 1
    return RobotsEntry(
        UNREACHABLE,
        fetched_at=now,
        tries=tries,
        retry_at=now + wait,
        reason=reason,
        unanswered=unanswered,
    )


def unavailable(reason: str, now: float) -> RobotsEntry:
    """The entry when the file is unavailable (too many redirects, a refused redirect):
    RFC 9309 2.3.1.3, everything is allowed."""
    return RobotsEntry(ALLOW_ALL, fetched_at=now, reason=reason)


MAX_SITEMAP_LINES = 100  # Sitemap: lines kept of one file (shared with the rules)


def compact_rules(text: str, user_agent: str) -> str:
    """The rules of ``text`` that apply to ``user_agent``, as one ``User-agent: *`` group
    that Protego parses to the same answers (and Crawl-delay, Request-rate, Visit-time),
    and the file's ``Sitemap:`` lines (for everyone: Protego's ``sitemaps``)."""
    try:
        from protego._protego import (
            _SITE_WIDE_DIRECTIVES,
            _USER_AGENT_DIRECTIVE,
            _extract_directive,
        )

        parser = Protego.parse(text)
        ruleset = parser._get_matching_rule_set(user_agent)
        token = None if ruleset is None else ruleset.user_agent
    except (ImportError, AttributeError):  # Protego's internals moved: share the file
        return text
    sitemaps = [f"Sitemap: {url}" for url in list(parser.sitemaps)[:MAX_SITEMAP_LINES]]
    if token is None:  # no group applies to us: everything is allowed
        return "User-agent: *\n" + "".join(f"{line}\n" for line in sitemaps) if sitemaps else ""
    kept: list[str] = []
    agents: list[str] = []  # user agents of the current group, as Protego reads them
    previous = None
    for raw in text.splitlines():  # Protego's own grouping (_parse_robotstxt)
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parsed = _extract_directive(line)
        if parsed is None:
            continue
        field, value = parsed
        if (
            field in _USER_AGENT_DIRECTIVE
            and previous is not None
            and previous not in _USER_AGENT_DIRECTIVE
        ):
            agents = []
        if field not in _SITE_WIDE_DIRECTIVES:
            previous = field
        if not value or field in _SITE_WIDE_DIRECTIVES:
            continue
        if field in _USER_AGENT_DIRECTIVE:
            agent = value.strip().lower()
            agents.append(agent)
            if agent != "*" and "*" in agent and agent.replace("*", ""):
                agents.append(agent.replace("*", ""))
        elif token in agents:
            kept.append(f"{field}: {value}")
    kept += sitemaps
    return "User-agent: *\n" + "\n".join(kept) + ("\n" if kept else "")


def decompress_prefix(body: bytes, encodings: list[str], limit: int = MAX_BYTES) -> bytes:
    """The first ``limit`` bytes (or a little more) of ``body`` decoded from its
    Content-Encoding list (applied in order, so decoded last to first); expands no more.

    Raises ValueError for an encoding we do not know or a body that is not one."""
    for encoding in reversed([e.strip().lower() for e in encodings if e.strip()]):
        if encoding == "identity":
            continue
        if encoding in ("gzip", "x-gzip", "deflate"):
            body = _inflate_prefix(body, limit)
        elif encoding == "br":
            import brotli

            try:
                body = brotli.Decompressor().process(body, output_buffer_limit=limit)
            except brotli.error as exc:  # (not a ValueError)
                raise ValueError(f"bad brotli body: {exc}") from None
        elif encoding == "zstd":
            try:
                from compression import zstd  # Python 3.14
            except ImportError:
                from backports import zstd
            try:
                body = zstd.ZstdDecompressor().decompress(body, max_length=limit)
            except zstd.ZstdError as exc:
                raise ValueError(str(exc)) from None
        else:
            raise ValueError(f"unknown Content-Encoding {encoding!r}")
    return body


_CHUNK = 64 * 1024  # compressed bytes fed at a time
MAX_MEMBERS = 1000  # gzip members decoded one after another, at most


def _inflate_prefix(body: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes (or a little more) of a gzip, zlib or raw deflate body,
    and of the gzip members after the first.  Linear in the body: it is read through a
    view, a bounded piece at a time (a body of thousands of empty members once cost a
    copy of its rest per member), and at most :data:`MAX_MEMBERS` members are read."""
    out = bytearray()
    view = memoryview(body)
    pos = members = 0
    while pos < len(view) and len(out) < limit and members < MAX_MEMBERS:
        if members and view[pos : pos + 2] != b"\x1f\x8b":
            break  # trailing garbage after a member
        ended, pos = _inflate_member(view, pos, limit - len(out), out, raw=members == 0)
        members += 1
        if not ended:
            break  # cut short, broken further on, or the limit reached
    return bytes(out)


def _inflate_member(
    view: memoryview, pos: int, room: int, out: bytearray, raw: bool
) -> tuple[bool, int]:
    """Inflate the member at ``pos`` into ``out``, at most ``room`` bytes: (whether it
    ended, the position after what was read).  Raises ValueError for a body that is not
    compressed at all (``raw``: raw deflate is tried too)."""
    modes = (47, -15) if raw else (47,)  # gzip or zlib header; raw deflate (some servers)
    for i, wbits in enumerate(modes):
        inflate = zlib.decompressobj(wbits=wbits)
        start, at = len(out), pos
        try:
            while not inflate.eof and at < len(view) and len(out) - start < room:
                piece = view[at : at + _CHUNK]
                out += inflate.decompress(piece, room - (len(out) - start))
                left = inflate.unused_data if inflate.eof else inflate.unconsumed_tail
                at += len(piece) - len(left)
            return inflate.eof, at
        except zlib.error as exc:
            if len(out) > start:  # broken after a good start: keep what came
                return False, at
            if i + 1 == len(modes):
                raise ValueError(f"bad compressed body: {exc}") from None
    raise AssertionError("unreachable")
