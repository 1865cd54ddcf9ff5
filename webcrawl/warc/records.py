"""WARC/1.1 records of one fetch, from the bytes on the wire (plain Python, no Scrapy).

A fetch gives a ``request`` record (the request as sent) and a ``response`` record (the
response as received: status line, headers in their order and case, the body before any
transfer or content decoding), linked by ``WARC-Concurrent-To``, then a ``metadata``
record of our verdicts.  In place of the response:

- a 304 is a ``revisit`` of the server-not-modified profile;
- a response whose payload digest equals the page's last full capture's is a ``revisit``
  of the identical-payload-digest profile, whose ``WARC-Refers-To-*`` point at that
  capture (its own status line and headers are in it: pywb replays them with the
  original's payload).

Digests.  ``WARC-Payload-Digest`` is written as warcio writes and ``warcio check``
verifies it: over the body as received, chunk framing included (warcio#74, open since
2019).  The WARC 1.1 text (section 6.3.2, iipc/warc-specifications#22) means the entity
body with the transfer encoding removed, and Heritrix has just moved there
(heritrix3#769); we follow the checker archives run today, and decide revisits on the
entity body itself (:func:`entity_digest`, chunks removed), so that the same payload sent
in other chunks is still a revisit (whose ``WARC-Payload-Digest`` is its original's).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from warcio.bufferedreaders import ChunkedDataReader
from warcio.recordbuilder import RecordBuilder
from warcio.statusandheaders import StatusAndHeaders

WARC_VERSION = "WARC/1.1"
PROFILE_IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
PROFILE_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"

_builder = RecordBuilder(warc_version=WARC_VERSION)


@dataclass
class Exchange:
    """One fetch as it went over the wire, and what we made of it."""

    url: str
    sent: bytes
    received: bytes
    peer: str = ""
    date: float = 0.0  # Unix time the request left
    truncated: str = ""  # WARC-Truncated's value when the body was cut ("length", "time")
    proxy: bool = False  # sent through a proxy: the peer is the proxy, not the site
    verdicts: dict[str, Any] = field(default_factory=dict)  # the metadata record's fields


@dataclass(frozen=True)
class Original:
    """The last full capture of a page, as the webtable keeps it (``warc_original``)."""

    target: str
    date: str  # WARC-Date, ISO 8601
    digest: str  # its WARC-Payload-Digest, "sha1:BASE32"
    entity: str = ""  # chunked: the digest of its entity body (chunks removed); else ""


def sha1_digest(data: bytes) -> str:
    return _b32(hashlib.sha1(data))


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # 10 bits -> two digits
_SHIFTS = tuple(range(150, -1, -10))


def _b32(sha1: Any) -> str:
    """``sha1:`` and the base32 of a sha1's 20 bytes (no padding: 160 bits are 32
    digits), two digits a lookup.  ``base64.b32encode`` is pure Python in 3.11 and
    costs 5 µs each of a page's 4 digests; this 3 µs (``tests/test_warc.py`` checks
    they agree)."""
    n = int.from_bytes(sha1.digest(), "big")
    pairs = _PAIRS
    return "sha1:" + "".join([pairs[(n >> shift) & 1023] for shift in _SHIFTS])


_EMPTY_DIGEST = sha1_digest(b"")


def warc_date(unix: float) -> str:
    """WARC-Date of a Unix time, to the nearest microsecond (always six digits: warcio
    leaves them out of a whole second)."""
    seconds, micros = divmod(round(unix * 1e6), 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{micros:06d}Z"


def _cdx_stamp(date: str) -> str:
    """The 14-digit timestamp of a WARC-Date (``2026-11-26T04:56:57.123456Z``)."""
    return date[0:4] + date[5:7] + date[8:10] + date[11:13] + date[14:16] + date[17:19]


def _record_ids(count: int) -> list[str]:
    """``count`` record ids, random (version 4) UUIDs as ``uuid.uuid4`` makes them, from
    one read of the system's random source."""
    raw = bytearray(os.urandom(16 * count))
    ids = []
    for i in range(0, len(raw), 16):
        raw[i + 6] = (raw[i + 6] & 0x0F) | 0x40  # version 4
        raw[i + 8] = (raw[i + 8] & 0x3F) | 0x80  # RFC 4122 variant
        h = raw[i : i + 16].hex()
        ids.append(f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}>")
    return ids


class RawHeaders(StatusAndHeaders):
    """Parsed HTTP headers that warcio writes as they were received.

    warcio writes a record's HTTP header block from its parsed form (``to_bytes``),
    which folds spaces and drops what it cannot parse: not the bytes on the wire.  This
    keeps the block as it came and hands it to the writer (and its block digest)
    instead; ``tests/test_warc.py`` fails if warcio stops asking for it this way.  The
    block is parsed when first asked (``statusline``, ``headers``, ``protocol``): a
    fetch's records are written from the raw bytes alone."""

    def __init__(self, raw: bytes) -> None:  # (StatusAndHeaders.__init__ parses)
        self.raw = raw
        self.headers_buff = raw
        self.total_len = len(raw)
        self.plain: bool | None = None  # no folded line, odd CR or byte (see _header)
        self.found: dict[str, str] = {}  # header name -> value, as _header found it

    def __getattr__(self, name: str) -> Any:
        if name not in ("statusline", "headers", "protocol"):
            raise AttributeError(name)
        self.statusline, self.headers, self.protocol = _parse_head(self.raw)
        return getattr(self, name)

    def compute_headers_buffer(self, header_filter: Any = None) -> None:
        self.headers_buff = self.raw


_HEAD_END = re.compile(rb"\n\r?\n")


def header_end(data: bytes, start: int = 0) -> int:
    """Where the header block that begins at ``start`` ends (the offset after its empty
    line), by Twisted's rule, the one Scrapy's parser followed: lines end at ``\n``, a
    ``\r`` before it is dropped, the first empty line ends the block (not a first line
    of its own: the block's own first line is its start line).  -1: it never ends."""
    found = _HEAD_END.search(data, start)
    return -1 if found is None else found.end()


def split_message(data: bytes, response: bool = False) -> tuple[RawHeaders, bytes] | None:
    """The headers of a raw HTTP message (kept as they are, :class:`RawHeaders`) and the
    raw body after them (None when the header block never ended: nothing to archive).
    For a response, interim 1xx answers before it (100 Continue, 103 Early Hints) are
    skipped, as Twisted skips them: the record is the final response."""
    start = 0
    while True:
        end = header_end(data, start)
        if end < 0:
            return None
        if not (response and _interim(data[start:end])):
            break
        start = end
    return RawHeaders(_without_blank_lines(data[start:end])), data[end:]


def _interim(head: bytes) -> bool:
    """Whether a response's header block is an interim 1xx answer (Twisted's reading:
    the status code as an integer)."""
    parts = head.split(b"\n", 1)[0].split(b" ", 2)
    try:
        return 100 <= int(parts[1]) < 200
    except (IndexError, ValueError):
        return False


_WHITESPACE_LINE = re.compile(rb"\n[ \t\r]+\n")


def _without_blank_lines(head: bytes) -> bytes:
    """A header block without its lines of only spaces, tabs or CRs before its end.

    Twisted reads past such a line (it folds it into the header before it); warcio,
    pywb and cdxj-indexer end the block there, and would read the headers after it as
    the body (``warcio check`` then fails its digest).  A server that sends one is
    archived without it: the one change made to the bytes received."""
    body = head[:-1]  # (the block's own last, empty line is not looked at)
    if not _WHITESPACE_LINE.search(body):
        return head
    while _WHITESPACE_LINE.search(body):
        body = _WHITESPACE_LINE.sub(b"\n", body)
    return body + head[-1:]


def _parse_head(raw: bytes) -> tuple[str, list[tuple[str, str]], str]:
    """(status line after its protocol, headers, protocol) of a raw header block, read
    as Scrapy's lenient parser reads it: lines end at LF (a CR before it dropped), a line
    that begins with a space or tab continues the one before, a line without a colon is
    skipped.  (warcio's parser does the same, at six times the cost.)"""
    lines = raw.decode("latin-1").split("\n")
    first = lines[0].removesuffix("\r")
    protocol, _, statusline = first.partition(" ")
    headers: list[tuple[str, str]] = []
    for text in lines[1:]:
        line = text.removesuffix("\r")
        if not line:
            continue
        if line[0] in " \t" and headers:
            name, value = headers[-1]
            headers[-1] = (name, f"{value} {line.strip()}")
        elif ":" in line:
            name, value = line.split(":", 1)
            headers.append((name.strip(), value.strip()))
    return statusline.strip(), headers, protocol


_TRANSFER_ENCODING = re.compile(rb"(?im)^transfer-encoding[ \t]*:([^\r\n]*)")
_CONTENT_TYPE = re.compile(rb"(?im)^content-type[ \t]*:([^\r\n]*)")
_CONTENT_ENCODING = re.compile(rb"(?im)^content-encoding[ \t]*:([^\r\n]*)")
# what the parser reads otherwise than a line-by-line search: a folded line, a CR that
# does not end a line, a byte that str.strip() would take for space (or not ASCII)
_UNPLAIN = re.compile(rb"\n[ \t]|\r(?!\n)|[^\t\r\n\x20-\x7e]")


def _header(head: RawHeaders, name: str, pattern: re.Pattern[bytes]) -> str:
    """The value of a header (its first), as the parsed block gives it ("" if none),
    found without parsing a plain block (most: printable ASCII, no folded line)."""
    value = head.found.get(name)
    if value is not None:
        return value
    raw = head.raw
    if head.plain is None:
        head.plain = _UNPLAIN.search(raw) is None
    if head.plain:
        found = pattern.search(raw, raw.find(b"\n") + 1)  # (not in the status line)
        value = found.group(1).strip().decode("ascii") if found else ""
    else:
        value = head.get_header(name) or ""
    head.found[name] = value
    return value


def _chunked(head: RawHeaders) -> bool:
    return "chunked" in _header(head, "Transfer-Encoding", _TRANSFER_ENCODING).lower()


def _mime(head: RawHeaders) -> str:
    """The media type of a response's Content-Type, as pywb indexes it."""
    return _header(head, "Content-Type", _CONTENT_TYPE).split(";")[0].strip()


# content codings that compress (not a server's "utf-8", "none" or "identity")
_PACKED_CODINGS = frozenset(("gzip", "x-gzip", "br", "zstd", "deflate", "compress", "x-compress"))
# media types whose bytes are compressed already: deflate finds nothing more in them
_PACKED_TYPES = frozenset(
    (
        "application/gzip application/x-gzip application/zip application/zstd "
        "application/x-xz application/x-bzip2 application/x-7z-compressed "
        "application/x-rar-compressed application/vnd.rar font/woff font/woff2 "
        "image/jpeg image/png image/gif image/webp image/avif image/heic"
    ).split()
)


def packed(head: RawHeaders) -> bool:
    """Whether a response's body is compressed already, by its headers: a content coding
    (gzip, br, zstd: most pages of real sites), or a compressed media type (images,
    audio, video but WAV, archives).  Such a body is stored in its WARC member, not deflated
    again, which costs some 30 times the CPU for the same size (``Members``).  A server
    that says so wrongly costs file size, never correctness."""
    codings = _header(head, "Content-Encoding", _CONTENT_ENCODING).lower().split(",")
    if any(coding.strip() in _PACKED_CODINGS for coding in codings):
        return True
    mime = _mime(head).lower()
    if mime in ("audio/wav", "audio/x-wav", "audio/wave"):
        return False
    return mime in _PACKED_TYPES or mime.startswith(("video/", "audio/"))


_PROXY_AUTHORIZATION = re.compile(rb"(?im)^(proxy-authorization[ \t]*:)[^\r\n]*")


def redact(sent: bytes) -> bytes:
    """The request as sent, but for a proxy's credentials (``Proxy-Authorization``)."""
    end = header_end(sent)
    head = sent if end < 0 else sent[:end]
    clean = _PROXY_AUTHORIZATION.sub(rb"\1 [redacted]", head)
    return clean if end < 0 else clean + sent[end:]


def entity_digest(chunked_body: bytes) -> str:
    """The digest of the entity body of a chunked response: its chunks, joined."""
    reader = ChunkedDataReader(io.BytesIO(chunked_body), raise_exceptions=False)
    out = io.BytesIO()
    while chunk := reader.read(65536):
        out.write(chunk)
    return sha1_digest(out.getvalue())


def _status(head: bytes) -> str:
    """The status code of a response's header block, as the parsed block gives it."""
    first = head.split(b"\n", 1)[0].decode("latin-1").removesuffix("\r")
    return first.partition(" ")[2].strip().split(" ", 1)[0]


def _number(status: str) -> int:
    try:
        return int(status)
    except ValueError:
        return 0


def fetch_records(
    exchange: Exchange, original: Original | None, dedup: bool = True
) -> tuple[list[Record], Original | None]:
    """The records of one fetch (request, response or revisit, metadata) and the page's
    last full capture after it (this one's when it wrote a full response).  An exchange
    whose response never got past its headers gives no records."""
    parsed = split_message(exchange.received, response=True)
    if parsed is None:
        return [], original
    headers, body = parsed
    date = warc_date(exchange.date)
    common = [("WARC-Date", date)]
    if exchange.peer and not exchange.proxy:
        common.append(("WARC-IP-Address", exchange.peer))
    digest = sha1_digest(body)
    # chunked: the entity body decides (other chunk boundaries, same payload); a replay
    # tool joins a revisit's headers to its original's raw body, so a revisit needs the
    # same framing as its original: both chunked, or the very same bytes
    entity = entity_digest(body) if _chunked(headers) else ""
    status = _status(headers.raw)
    ids = _record_ids(3)
    if dedup and _number(status) == 304:
        response = _not_modified(exchange, headers, body, common, original, record_id=ids[1])
        after = original
    elif (
        dedup
        and original is not None
        and not exchange.truncated
        and (original.digest == digest or (entity and original.entity == entity))
    ):
        response = _identical(
            exchange, headers, original.digest, common, original, record_id=ids[1]
        )
        after = original
    else:  # (a cut body is never the payload of a revisit, nor an original)
        response = _full(exchange, headers, body, digest, common, record_id=ids[1])
        after = original if exchange.truncated else Original(exchange.url, date, digest, entity)
    response.cdx = (
        exchange.url,
        _cdx_stamp(date),
        "warc/revisit" if response.rec_type == "revisit" else _mime(headers),
        status,
        response.payload_digest,
    )
    sent = redact(exchange.sent)
    split = split_message(sent)
    request_headers, request_body = split if split is not None else (None, sent)
    request = Record(
        "request",
        exchange.url,
        [
            *common,
            ("WARC-Concurrent-To", ids[1]),
            ("WARC-Payload-Digest", sha1_digest(request_body) if request_body else _EMPTY_DIGEST),
        ],
        content_type=_REQUEST_TYPE,
        http_headers=request_headers,
        payload=request_body,
        record_id=ids[0],
    )
    records = [request, response]
    if exchange.verdicts:
        records.append(metadata_record(exchange.url, date, ids[1], exchange.verdicts, ids[2]))
    return records, after


class _WarcHeaders:
    """A record's WARC headers, read as warcio's are (``get_header``)."""

    __slots__ = ("headers",)

    def __init__(self, headers: list[tuple[str, str]]) -> None:
        self.headers = headers

    def get_header(self, name: str, default: str | None = None) -> str | None:
        lower = name.lower()
        for key, value in self.headers:
            if key.lower() == lower:
                return value
        return default


class Record:
    """One WARC/1.1 record, serialised by hand.

    warcio builds and writes a record through parsed header objects, digesters and
    streams: about 0.1 ms a record, a third of the worker's whole cost of WARC output in
    ``webcrawl bench crawl`` (py-spy).  The records of a fetch are simple (their HTTP
    block is the bytes on the wire, their digests are sha1 over it), so they are written
    here; warcio writes the ``warcinfo`` record, reads every file back (repair) and
    checks them (``tests/test_warc.py`` compares both writers' output, and runs ``warcio
    check``).  The attributes warcio's records have and the index needs: ``rec_type``,
    ``rec_headers``, ``http_headers``, ``raw_stream``; ``cdx``: a response's or
    revisit's index fields (url, timestamp, mime, status, digest)."""

    __slots__ = (
        "cdx",
        "http_headers",
        "packed",
        "payload",
        "payload_digest",
        "rec_headers",
        "rec_type",
        "record_id",
    )

    def __init__(
        self,
        rec_type: str,
        url: str,
        headers: list[tuple[str, str]],
        *,
        content_type: str,
        http_headers: RawHeaders | None,
        payload: bytes,
        record_id: str = "",
        payload_digest: str = "",
        packed: bool = False,
    ) -> None:
        self.rec_type = rec_type
        self.record_id = record_id or _record_ids(1)[0]
        self.http_headers = http_headers
        self.payload = payload
        self.packed = packed  # the payload is compressed already (see packed())
        self.payload_digest = payload_digest
        self.cdx: tuple[str, str, str, str, str] | None = None
        block = hashlib.sha1()
        length = len(payload)
        if http_headers is not None:
            block.update(http_headers.raw)
            length += len(http_headers.raw)
        block.update(payload)
        self.rec_headers = _WarcHeaders(
            [
                ("WARC-Type", rec_type),
                ("WARC-Record-ID", self.record_id),
                ("WARC-Target-URI", url),
                *headers,
                ("WARC-Block-Digest", _b32(block)),
                ("Content-Type", content_type),
                ("Content-Length", str(length)),
            ]
        )

    @property
    def raw_stream(self) -> io.BytesIO:
        """The block after its HTTP headers (warcio's ``raw_stream``)."""
        return io.BytesIO(self.payload)

    def parts(self) -> tuple[bytes, bytes, bytes]:
        """The record's bytes in three parts: up to its payload, the payload, after it."""
        head = "".join([f"{name}: {value}\r\n" for name, value in self.rec_headers.headers])
        block_head = self.http_headers.raw if self.http_headers is not None else b""
        return (
            b"".join((b"WARC/1.1\r\n", head.encode("utf-8"), b"\r\n", block_head)),
            self.payload,
            b"\r\n\r\n",
        )

    def serialize(self) -> bytes:
        return b"".join(self.parts())


_RESPONSE_TYPE = "application/http; msgtype=response"
_REQUEST_TYPE = "application/http; msgtype=request"


def _answer(
    kind: str,
    exchange: Exchange,
    extra: list,
    headers: RawHeaders,
    payload: bytes,
    *,
    record_id: str,
    digest: str = "",
) -> Record:
    return Record(
        kind,
        exchange.url,
        extra,
        content_type=_RESPONSE_TYPE,
        http_headers=headers,
        payload=payload,
        record_id=record_id,
        payload_digest=digest,
        packed=len(payload) > _PACKED_FROM and packed(headers),
    )


_PACKED_FROM = 256  # bytes of payload: below, deflating it costs next to nothing


def _full(
    exchange: Exchange,
    headers: RawHeaders,
    body: bytes,
    digest: str,
    common: list,
    *,
    record_id: str,
) -> Record:
    extra = [*common, ("WARC-Payload-Digest", digest)]
    if exchange.truncated:
        extra.append(("WARC-Truncated", exchange.truncated))
    return _answer("response", exchange, extra, headers, body, record_id=record_id, digest=digest)


def _identical(
    exchange: Exchange,
    headers: RawHeaders,
    digest: str,
    common: list,
    original: Original,
    *,
    record_id: str,
) -> Record:
    """The headers of the answer, and the original's payload by reference."""
    extra = [
        *common,
        ("WARC-Profile", PROFILE_IDENTICAL),
        ("WARC-Refers-To-Target-URI", original.target),
        ("WARC-Refers-To-Date", original.date),
        ("WARC-Payload-Digest", digest),
    ]
    return _answer("revisit", exchange, extra, headers, b"", record_id=record_id, digest=digest)


def _not_modified(
    exchange: Exchange,
    headers: RawHeaders,
    body: bytes,
    common: list,
    original: Original | None,
    *,
    record_id: str,
) -> Record:
    extra = [*common, ("WARC-Profile", PROFILE_NOT_MODIFIED)]
    if original is not None:
        extra.append(("WARC-Refers-To-Target-URI", original.target))
        extra.append(("WARC-Refers-To-Date", original.date))
    return _answer("revisit", exchange, extra, headers, body, record_id=record_id)


_LINE_BREAKS = re.compile(r"[\r\n]")


def metadata_record(
    url: str, date: str, concurrent_to: str, fields: dict[str, Any], record_id: str = ""
) -> Record:
    """A ``metadata`` record of ``application/warc-fields``: one ``name: value`` line per
    verdict (a list gives one line per item, as Heritrix writes ``outlink``)."""
    lines = []
    for name, value in fields.items():
        if isinstance(value, list):
            lines.extend([f"{name}: {item}\r\n" for item in value if item is not None])
        elif value is not None:
            lines.append(f"{name}: {value}\r\n")
    text = "".join(lines)
    if text.count("\n") != len(lines) or text.count("\r") != len(lines):
        # a value holds a line break of its own: made a space
        text = "".join(_LINE_BREAKS.sub(" ", line[:-2]) + "\r\n" for line in lines)
    extra = [("WARC-Date", date), ("WARC-Concurrent-To", concurrent_to)]
    return Record(
        "metadata",
        url,
        extra,
        content_type="application/warc-fields",
        http_headers=None,
        payload=text.encode("utf-8"),
        record_id=record_id,
    )


def warcinfo_record(filename: str, info: dict[str, str]) -> Any:
    """The ``warcinfo`` record that opens a file."""
    return _builder.create_warcinfo_record(filename, info)
