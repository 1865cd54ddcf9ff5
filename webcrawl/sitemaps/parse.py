"""Read one sitemap file (sitemaps.org) from an untrusted host, within bounds (plain logic).

:func:`parse_sitemap` takes the body as it came (gzip is told by its magic bytes, not by
the name or the headers) and returns a :class:`Sitemap`: its kind (``urlset``,
``sitemapindex``, ``text`` or ``unknown``), its entries or child sitemaps, and what went
wrong.  URLs come back as written (stripped), neither resolved nor canonicalised: scope and
canonical form are the caller's.

The threats, and what is done about each:

- *Too much*: sitemaps.org allows 50 000 URLs and 50 MB (uncompressed) per file.
  Elsewhere these are declared and not kept: crawler-commons names both limits but applies
  neither to XML (crawler-commons issue 611), StormCrawler inflates a gzipped sitemap with
  no bound on the output (StormCrawler issue 2100), crawlee-python had to cap it at 50 MB
  (its pull request 2012: a repro's peak memory went from ~680 MB to ~15 MB).  Here both
  are enforced while reading (:data:`MAX_URLS`, entries and child sitemaps together;
  :data:`MAX_BYTES`, after decompression): what came before a limit is kept and
  ``too_many`` or ``too_large`` says the list is not the whole file.
- *Gzip bombs*: the body is inflated :data:`CHUNK` bytes at a time
  (``zlib.decompressobj(16 + MAX_WBITS)`` with ``max_length``), and each piece goes to the
  parser before the next is made, so a file of zeros or of repeated ``<url>`` that inflates
  to gigabytes costs :data:`MAX_BYTES` of inflating and one piece of memory.
- *XML attacks*: a pull parser that loads no DTD, expands no entity (``resolve_entities=
  False``: a billion-laughs file expands nothing; libxml2 refuses it anyway at the first
  reference, "Maximum entity amplification factor exceeded", and the file is malformed
  from there), reads no external file or URL (a resolver answers every one with nothing:
  libxml2 reads external parameter entities in more cases than ``load_dtd=False``
  suggests), and keeps libxml2's limits (``huge_tree=False``: 256 levels deep, 10 MB of
  text in a node).  A value that holds an entity reference is not trusted: a ``<loc>``
  with one is skipped, a ``<lastmod>`` with one is unknown.
- *Memory in the tree*: the parser reports only the elements we read, and after each
  piece the tree is cut back to the open elements, so a file of millions of elements
  holds one piece's worth.  One start tag may not run over :data:`_MAX_TAG_BYTES` (libxml2
  builds ~17 bytes of tree per byte of one element's attributes), and the root must start
  within :data:`_ROOT_WITHIN` (no room for a prolog of DTD declarations).
- *Broken files*: a file cut short, or with garbage after some entries, keeps the entries
  read before the fault and says so in ``malformed``.  libxml2's recover mode is not used:
  it ends a cut-off ``<loc>`` where the data ends (a truncated URL becomes an entry) and
  reports no error.  A text sitemap has no end marker: one cut short by its server ends
  with the start of its last URL (one cut by ``max_bytes`` loses that line).

Cost: a 50 000-URL file (8 MB) takes ~0.4 s; a hostile 50 MB file made of the elements we
read (``<url/>`` after ``<url/>``) up to ~6 s of CPU, other junk ~2 s: callers on the
reactor thread should read sitemaps in a worker thread.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date

from lxml import etree

MAX_URLS = 50_000  # sitemaps.org: URLs per file (an index: sitemaps per file)
MAX_BYTES = 50 * 1024 * 1024  # sitemaps.org: 52,428,800 bytes per file, uncompressed
# sitemaps.org: a loc "must be less than 2,048 characters"; we skip one longer than 2048
MAX_URL_LENGTH = 2048
CHUNK = 64 * 1024  # bytes inflated, and fed to the parser, at a time

URLSET, SITEMAPINDEX, TEXT, UNKNOWN = "urlset", "sitemapindex", "text", "unknown"
CHANGEFREQS = frozenset(("always", "hourly", "daily", "weekly", "monthly", "yearly", "never"))

_GZIP_MAGIC = b"\x1f\x8b"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF16_BOM1 = (b"\xff", b"\xfe")  # a UTF-16 BOM's first byte, the second to come
_BOM = b"\xef\xbb\xbf"
_FIELDS = frozenset(("loc", "lastmod", "changefreq", "priority"))
_TAGS = [f"{{*}}{name}" for name in (URLSET, SITEMAPINDEX, "url", "sitemap", *_FIELDS)]
# a sitemap's root element starts within this many bytes (prolog: declaration, comments)
_ROOT_WITHIN = 256 * 1024
_MAX_TAG_BYTES = 256 * 1024  # bytes without a ">": more is an attribute bomb, not a sitemap
# a text line longer than this many bytes cannot hold a URL we keep: it is skipped unread
_MAX_LINE_BYTES = 4 * MAX_URL_LENGTH + 1024
_REASON_CHARS = 200  # of a parser's message kept in ``malformed``


@dataclass(slots=True)
class Entry:
    """One ``<url>`` of a urlset, one ``<sitemap>`` of an index (``url`` and ``lastmod``
    only), or one line of a text sitemap (``url`` only)."""

    url: str
    lastmod: float | None = None  # Unix time, UTC (see parse_lastmod)
    changefreq: str | None = None  # one of CHANGEFREQS
    priority: float | None = None  # 0.0 to 1.0


@dataclass(slots=True)
class Sitemap:
    """What one file said, and what stopped it being read to its end."""

    # URLSET, SITEMAPINDEX, TEXT, or UNKNOWN (empty, another root, none in the first 256 KiB)
    kind: str = UNKNOWN
    entries: list[Entry] = field(default_factory=list)  # urlset, text
    sitemaps: list[Entry] = field(default_factory=list)  # sitemapindex: the child sitemaps
    skipped: int = 0  # entries or lines dropped: no loc, not http(s), too long, not UTF-8
    too_large: bool = False  # more than max_bytes after decompression: the rest unread
    too_many: bool = False  # more than max_urls entries and sitemaps: the rest unread
    # what is wrong with the file: XML or gzip broken (the entries before it are kept),
    # empty, a text line not UTF-8; "" if nothing
    malformed: str = ""
    bytes_read: int = 0  # decompressed bytes handed to the parser

    @property
    def complete(self) -> bool:
        """Read to its end: what it does not list, the file does not list."""
        return not (self.too_large or self.too_many or self.malformed)


def parse_sitemap(body: bytes, *, max_urls: int = MAX_URLS, max_bytes: int = MAX_BYTES) -> Sitemap:
    """Read a sitemap file's body (gzip or not; XML, or text if its first byte that is not
    whitespace or a BOM is not ``<``; XML may be UTF-16 with a BOM), at most
    ``max_bytes`` of it after decompression and at most ``max_urls`` entries and child
    sitemaps.  Never raises on any body."""
    if max_urls < 0 or max_bytes < 0:
        raise ValueError(f"max_urls and max_bytes must be >= 0, not {max_urls}, {max_bytes}")
    result = Sitemap()
    reader: _XmlReader | _TextReader | None = None
    head = b""  # the start of the file until its first byte that is not whitespace
    at_start = True  # a BOM may still be there
    try:
        for piece in _bounded(_inflated(body), max_bytes, result):
            chunk = piece
            if reader is None:
                head, at_start, reader = _opening(head + chunk, at_start, result)
                if reader is None:
                    continue
                chunk, head = head, b""
            if not reader.feed(chunk, max_urls):
                return result
    except _GzipError as exc:  # the entries read so far are kept; the last is not ended
        _fault(result, f"gzip: {exc}")
        return result
    if reader is None:
        if not result.too_large:
            _fault(result, "empty")
    elif not result.too_large:  # the file has ended, it was not cut by max_bytes
        reader.close(max_urls)
    return result


def _opening(
    head: bytes, at_start: bool, result: Sitemap
) -> tuple[bytes, bool, _XmlReader | _TextReader | None]:
    """The file's start so far, whether a BOM may still come, and its reader once the
    start tells (XML, in UTF-8 or, with its BOM, UTF-16; else text, which is UTF-8)."""
    if at_start:
        if (len(head) < len(_BOM) and _BOM.startswith(head)) or head in _UTF16_BOM1:
            return head, True, None
        if head[:2] in _UTF16_BOMS:  # lxml reads the BOM
            return head, False, _XmlReader(result)
        head = head.removeprefix(_BOM)
    head = head.lstrip()
    if not head:
        return head, False, None
    return head, False, _XmlReader(result) if head[:1] == b"<" else _TextReader(result)


_LASTMOD = re.compile(
    r"(\d{4})(?:-(\d\d)(?:-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?"
    r"(Z|[+-]\d\d(?::?\d\d)?)?)?)?)?",
    re.ASCII | re.IGNORECASE,
)
_EPOCH_DAY = date(1970, 1, 1).toordinal()


def parse_lastmod(text: str) -> float | None:
    """A W3C datetime as sitemaps.org allows it (``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``,
    ``YYYY-MM-DDThh:mm[:ss[.s]]TZD``, TZD ``Z`` or ``+hh:mm``/``-hh:mm``) as Unix time.

    Lenient: no TZD is UTC; a space may stand for ``T``; ``+hhmm`` and ``+hh`` are
    offsets; letters in either case.  A leap second (``:60``) counts as ``:59``.  Years run
    0001 to 9999; nothing is judged too old or too far ahead here.  Anything else, an
    impossible date (Feb 30, hour 24) included, is None; never raises."""
    text = text.strip()
    match = _LASTMOD.fullmatch(text) if len(text) <= 64 else None
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        days = date(int(year), int(month or 1), int(day or 1)).toordinal() - _EPOCH_DAY
    except ValueError:  # year 0, month 13, Feb 30
        return None
    hours, minutes, seconds = int(hour or 0), int(minute or 0), int(second or 0)
    if hours > 23 or minutes > 59 or seconds > 60:
        return None
    offset = 0
    if zone and zone.upper() != "Z":
        zone_hours, zone_minutes = int(zone[1:3]), int(zone[-2:]) if len(zone) > 3 else 0
        if zone_hours > 23 or zone_minutes > 59:
            return None
        offset = (zone_hours * 60 + zone_minutes) * 60 * (-1 if zone[0] == "-" else 1)
    total = days * 86400 + hours * 3600 + minutes * 60 + min(seconds, 59) - offset
    return total + float("0." + fraction) if fraction else float(total)


def _fault(result: Sitemap, reason: str) -> None:
    """Record why the file broke off; the first fault is the one that counts."""
    if not result.malformed:
        result.malformed = " ".join(reason.split())[:_REASON_CHARS]


class _GzipError(Exception):
    """A gzip body that is corrupt or cut short."""


def _inflated(body: bytes) -> Iterator[bytes]:
    """``body`` in pieces of at most CHUNK bytes, inflated if it starts with gzip's magic
    bytes (members one after another; anything after the last is ignored).  Inflates no
    more than is read: a gzip bomb costs what is taken from it.  Raises _GzipError."""
    view = memoryview(body)
    if body[:2] != _GZIP_MAGIC:
        for start in range(0, len(body), CHUNK):
            yield bytes(view[start : start + CHUNK])
        return
    position = 0  # of the input not yet given to an inflater
    while view[position : position + 2] == _GZIP_MAGIC:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        tail: bytes | memoryview = b""
        while not inflater.eof:
            if not tail:
                tail = view[position : position + CHUNK]
                position += len(tail)
            try:
                piece = inflater.decompress(tail, CHUNK)
            except zlib.error as exc:
                raise _GzipError(exc) from None
            tail = inflater.unconsumed_tail
            if piece:
                yield piece
            elif not (tail or inflater.eof) and position >= len(view):  # no input left
                raise _GzipError("cut off")
        position -= len(inflater.unused_data)


def _bounded(pieces: Iterator[bytes], max_bytes: int, result: Sitemap) -> Iterator[bytes]:
    """The first ``max_bytes`` of ``pieces``; sets ``too_large`` if there is more."""
    for piece in pieces:
        room = max_bytes - result.bytes_read
        if len(piece) > room:
            result.too_large = True
            if room:
                result.bytes_read = max_bytes
                yield piece[:room]
            return
        result.bytes_read += len(piece)
        yield piece


def _keep(result: Sitemap, entry: Entry, into: list[Entry], max_urls: int) -> bool:
    """Keep ``entry`` if its URL is one and there is room; False once there is none."""
    url = entry.url
    if len(url) > MAX_URL_LENGTH or not url[:8].lower().startswith(("http://", "https://")):
        result.skipped += 1
        return True
    if len(result.entries) + len(result.sitemaps) >= max_urls:
        result.too_many = True
        return False
    into.append(entry)
    return True


def _local(tag: str) -> str:
    """An element's name without its namespace (``{uri}url``)."""
    return tag.rpartition("}")[2]


class _RefuseExternal(etree.Resolver):
    """Every external DTD or entity (``file:``, ``http:``, any) reads as empty.  Whether
    libxml2 asks depends on more than ``load_dtd=False``: with lxml's ``collect_ids=False``
    it opens the file of an external parameter entity (``<!ENTITY % pe SYSTEM
    "file:///dev/stdin"> %pe;`` then blocks on stdin); this makes sure it never does."""

    def resolve(self, system_url: str, public_id: str, context: object) -> object:
        return self.resolve_string("", context)


_REFUSE_EXTERNAL = _RefuseExternal()


class _XmlReader:
    """A urlset or sitemapindex, fed to a pull parser piece by piece.

    Elements are read by their local names, whatever their namespace; the parser reports
    only the ones we read (the rest cost no Python), and after each piece the tree is cut
    back to the path of open elements, so that no element outlives its piece."""

    def __init__(self, result: Sitemap) -> None:
        self.result = result
        self.parser = etree.XMLPullParser(
            events=("start", "end"),
            tag=_TAGS,
            resolve_entities=False,
            load_dtd=False,
            no_network=True,
            huge_tree=False,
            recover=False,
            remove_comments=True,
            remove_pis=True,
            # not collect_ids=False: lxml sets XML_SKIP_IDS in libxml2's loadsubset, and
            # libxml2 (2.14) reads external parameter entities when loadsubset is not 0
        )
        self.parser.resolvers.add(_REFUSE_EXTERNAL)
        self.root: etree._Element | None = None
        self.item = ""  # "url" in a urlset, "sitemap" in an index
        self.current: etree._Element | None = None  # the item being read...
        self.fields: dict[str, str | None] = {}  # ...and its fields so far
        self.fed = 0  # bytes given to the parser
        self.since_gt = 0  # of them, since the last ">"

    def feed(self, chunk: bytes, max_urls: int) -> bool:
        """Parse one more piece; False once reading should stop."""
        if not self._markup_ends(chunk):
            _fault(self.result, f"xml: over {_MAX_TAG_BYTES} bytes without a '>'")
            return False
        try:
            self.parser.feed(chunk)
        except etree.XMLSyntaxError as exc:
            self._read_events(max_urls)  # what came before the fault
            _fault(self.result, f"xml: {exc}")
            return False
        self.fed += len(chunk)
        if not self._read_events(max_urls):
            return False
        if self.root is None:
            return self.fed <= _ROOT_WITHIN
        node = self.root  # cut the tree back to the open elements (and the last closed one)
        while len(node):
            if len(node) > 1:
                del node[:-1]
            node = node[-1]
        return True

    def close(self, max_urls: int) -> None:
        """The file has ended: a document still open is malformed."""
        try:
            self.parser.close()
        except etree.XMLSyntaxError as exc:
            self._read_events(max_urls)
            _fault(self.result, f"xml: {exc}")
            return
        self._read_events(max_urls)

    def _markup_ends(self, chunk: bytes) -> bool:
        """No run of _MAX_TAG_BYTES without a ">": libxml2 builds ~17 bytes of tree per
        byte of one element's attributes, and holds a start tag until its end has come."""
        first = chunk.find(b">")
        if first < 0:
            self.since_gt += len(chunk)
        elif self.since_gt + first > _MAX_TAG_BYTES:
            return False
        else:
            self.since_gt = len(chunk) - chunk.rfind(b">") - 1
        return self.since_gt <= _MAX_TAG_BYTES

    def _read_events(self, max_urls: int) -> bool:
        for event, element in self.parser.read_events():
            name = _local(element.tag)
            if self.root is None:  # the first event: the root's start, if it is a sitemap
                if element.getparent() is not None or name not in (URLSET, SITEMAPINDEX):
                    return False  # an RSS feed, an HTML page: not a sitemap we read
                self.root, self.result.kind = element, name
                self.item = "url" if name == URLSET else "sitemap"
            elif event == "start":
                if name == self.item and element.getparent() is self.root:
                    self.current, self.fields = element, {}
            elif self.current is None:
                continue
            elif element is self.current:
                self.current = None
                if not self._add(max_urls):
                    return False
            elif (
                name in _FIELDS and name not in self.fields and element.getparent() is self.current
            ):
                # children here are entity references (or stray elements): an unknown value
                self.fields[name] = None if len(element) else (element.text or "")
        return True

    def _add(self, max_urls: int) -> bool:
        result, fields = self.result, self.fields
        loc = fields.get("loc")
        if loc is None:  # none, or an entity reference in it
            result.skipped += 1
            return True
        lastmod = fields.get("lastmod")
        entry = Entry(loc.strip(), parse_lastmod(lastmod) if lastmod else None)
        if result.kind == SITEMAPINDEX:
            return _keep(result, entry, result.sitemaps, max_urls)
        entry.changefreq = _changefreq(fields.get("changefreq"))
        entry.priority = _priority(fields.get("priority"))
        return _keep(result, entry, result.entries, max_urls)


def _changefreq(text: str | None) -> str | None:
    value = text.strip().lower() if text else None
    return value if value in CHANGEFREQS else None


_PRIORITY = re.compile(r"\d{1,3}(?:\.\d{0,16})?|\.\d{1,16}", re.ASCII)


def _priority(text: str | None) -> float | None:
    value = text.strip() if text else ""
    if not _PRIORITY.fullmatch(value):
        return None
    number = float(value)
    return number if number <= 1.0 else None


# a line that is an http(s) URL and has no byte that is not UTF-8 (surrogateescape's)
_URL_LINE = re.compile(
    r"^[ \t\r\f\v]*(https?://[^\n\udc80-\udcff]*)$", re.ASCII | re.IGNORECASE | re.MULTILINE
)
_BLANKS = b" \t\r\f\v"


class _TextReader:
    """A text sitemap: one URL per line, UTF-8; a line that is not an http(s) URL is
    skipped.  A line is kept only once it has ended: a file cut short loses its last.
    Lines are found by regular expressions, so a file of short junk lines costs no Python
    per line."""

    def __init__(self, result: Sitemap) -> None:
        self.result = result
        result.kind = TEXT
        self.line = b""  # the line begun and not yet ended
        self.overlong = False  # that line is too long: the rest of it is dropped unread

    def feed(self, chunk: bytes, max_urls: int) -> bool:
        """Read one more piece; False once reading should stop."""
        end = chunk.rfind(b"\n") + 1
        if not end:
            self._extend(chunk)
            return True
        block = chunk[:end]  # whole lines, the first one begun in an earlier piece
        if self.overlong:
            self.overlong = False
            self.result.skipped += 1
            block = block[block.index(b"\n") + 1 :]
        else:
            block = self.line + block
        self.line = b""
        if not self._lines(block, max_urls):
            return False
        self._extend(chunk[end:])
        return True

    def close(self, max_urls: int) -> None:
        """The file has ended: its last line needs no line break."""
        if self.overlong:
            self.result.skipped += 1
        elif self.line:
            self._lines(self.line, max_urls)

    def _extend(self, part: bytes) -> None:
        if not self.overlong:
            self.line += part
            if len(self.line) > _MAX_LINE_BYTES:
                self.line, self.overlong = b"", True

    def _lines(self, block: bytes, max_urls: int) -> bool:
        result = self.result
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError:
            text = block.decode("utf-8", "surrogateescape")
            _fault(result, "text: not UTF-8")
        candidates = 0
        for match in _URL_LINE.finditer(text):
            if not _keep(result, Entry(match[1].strip()), result.entries, max_urls):
                before = text[: match.start()].encode("utf-8", "surrogateescape")
                result.skipped += _nonblank_lines(before) - candidates
                return False
            candidates += 1
        result.skipped += _nonblank_lines(block) - candidates
        return True


def _nonblank_lines(block: bytes) -> int:
    return len(block.translate(None, _BLANKS).split())
