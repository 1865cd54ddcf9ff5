"""``python -m tools.bench warc_members``: the cost of a WARC record's gzip member.

Each response record of the demo web's pages (as served: plain HTML) and of the same
pages gzip-encoded (``Content-Encoding: gzip``, as most real sites send them) is made
into a gzip member by :class:`webcrawl.warc.files.Members` (zlib-ng; a compressed payload
in stored blocks) and by the standard library's zlib, as the writer did before: µs per
record (the best of ``--repeat`` passes) and the members' bytes per page.
"""

from __future__ import annotations

import argparse
import gzip
import time
import zlib
from collections.abc import Callable
from typing import Any

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _stdlib(level: int) -> Callable[[bytes, bytes, bytes, bool], bytes]:
    deflate = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)

    def member(head: bytes, payload: bytes, tail: bytes, packed: bool) -> bytes:
        raw = head + payload + tail
        body = deflate.compress(raw) + deflate.flush(zlib.Z_FULL_FLUSH)
        crc = zlib.crc32(raw).to_bytes(4, "little") + len(raw).to_bytes(4, "little")
        return _GZIP_HEADER + body + b"\x03\x00" + crc

    return member


def _ours(members: Any) -> Callable[[bytes, bytes, bytes, bool], bytes]:
    def member(head: bytes, payload: bytes, tail: bytes, packed: bool) -> bytes:
        return members.member(head, payload, tail, packed=packed)

    return member


def _records(pages: int, encoded: bool) -> list[tuple[bytes, bytes, bytes, bool]]:
    from webcrawl.demo.web import DemoWeb
    from webcrawl.warc.records import Exchange, fetch_records

    web = DemoWeb([f"127.0.0.{i}:8000" for i in range(2, 6)], pages_per_host=pages // 3)
    out = []
    for page in list(web.pages.values())[:pages]:
        body, content_type = web.render(page)
        coding = b""
        if encoded:
            body, coding = gzip.compress(body, 6), b"Content-Encoding: gzip\r\n"
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: "
            + content_type.encode()
            + b"\r\n"
            + coding
            + b"Content-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
        )
        exchange = Exchange(url=page.url, sent=b"GET / HTTP/1.1\r\n\r\n", received=head + body)
        records, _ = fetch_records(exchange, None)
        response = records[1]
        out.append((*response.parts(), response.packed))
    return out


def run(args: argparse.Namespace) -> int:
    from webcrawl.warc.files import GZIP_LEVEL, Members

    print(f"{'payload':<22} {'members by':<34} {'µs/record':>10} {'bytes/page':>11}")
    for encoded in (False, True):
        records = _records(args.pages, encoded)
        makers: list[tuple[str, Callable[..., bytes]]] = [
            (f"zlib {GZIP_LEVEL} (stdlib), all deflated", _stdlib(GZIP_LEVEL)),
            ("Members (zlib-ng)", _ours(Members())),
        ]
        for name, make in makers:
            best, size = float("inf"), 0
            for _ in range(args.repeat):
                start = time.perf_counter()
                size = sum(len(make(*record)) for record in records)
                best = min(best, time.perf_counter() - start)
            label = "gzip-encoded HTML" if encoded else "plain HTML"
            print(
                f"{label:<22} {name:<34} {best / len(records) * 1e6:>10.1f} "
                f"{size / len(records):>11.0f}"
            )
    return 0
