"""Sitemap files read within bounds (webcrawl.sitemaps.parse): plain logic, no network."""

import gzip
import inspect
import struct
import subprocess
import sys
import tracemalloc
import zlib
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lxml import etree

from webcrawl.sitemaps import parse
from webcrawl.sitemaps.parse import (
    CHUNK,
    MAX_BYTES,
    MAX_URL_LENGTH,
    MAX_URLS,
    Entry,
    parse_lastmod,
    parse_sitemap,
)

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
MiB = 1024 * 1024


def urlset(*items: str, ns: str | None = NS) -> bytes:
    xmlns = f' xmlns="{ns}"' if ns else ""
    body = "".join(f"<url>{item}</url>" for item in items)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset{xmlns}>{body}</urlset>\n'.encode()


def locs(*urls: str) -> list[str]:
    return [f"<loc>{url}</loc>" for url in urls]


def urls_of(result: parse.Sitemap) -> list[str]:
    return [entry.url for entry in result.entries]


def gzip_bomb(block: bytes, count: int) -> bytes:
    """A valid gzip file of ``block`` repeated ``count`` times, made in milliseconds: after
    a full flush deflate starts afresh, so every block compresses to the same bytes."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    first = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    end = deflate.flush()[:-8]  # the final block, without the trailer for 2 blocks
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    trailer = struct.pack("<II", crc, len(block) * count & 0xFFFFFFFF)
    return first + again * (count - 1) + end + trailer


def traced(body: bytes, **limits: int) -> tuple[parse.Sitemap, int]:
    """The result, and the peak of Python's memory while reading (the body not counted)."""
    tracemalloc.start()
    try:
        result = parse_sitemap(body, **limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


# -- what a sitemap says -----------------------------------------------------------


def test_a_urlset_in_the_sitemaps_namespace():
    body = urlset(
        "<loc> https://example.com/a </loc><lastmod>2024-05-06T07:08:09+02:00</lastmod>"
        "<changefreq> Weekly </changefreq><priority>0.8</priority>",
        "<loc>https://example.com/b?x=1&amp;y=2</loc>",
    )
    result = parse_sitemap(body)
    assert result.kind == "urlset"
    assert result.entries == [
        Entry("https://example.com/a", 1714972089.0, "weekly", 0.8),
        Entry("https://example.com/b?x=1&y=2"),
    ]
    assert (result.sitemaps, result.skipped, result.malformed) == ([], 0, "")
    assert result.complete
    assert result.bytes_read == len(body)


@pytest.mark.parametrize(
    "ns", [None, "http://www.google.com/schemas/sitemap/0.84", "http://wrong.example/"]
)
def test_a_urlset_without_its_namespace_or_in_another_reads_the_same(ns):
    body = urlset(*locs("http://example.com/1", "http://example.com/2"), ns=ns)
    result = parse_sitemap(body)
    assert (result.kind, urls_of(result)) == (
        "urlset",
        ["http://example.com/1", "http://example.com/2"],
    )


def test_a_prefixed_namespace_reads_the_same():
    body = f'<sm:urlset xmlns:sm="{NS}"><sm:url><sm:loc>http://e.com/</sm:loc></sm:url></sm:urlset>'
    assert urls_of(parse_sitemap(body.encode())) == ["http://e.com/"]


def test_a_sitemapindex_lists_child_sitemaps_with_their_lastmod():
    body = (
        f'<sitemapindex xmlns="{NS}">'
        "<sitemap><loc>https://e.com/s1.xml.gz</loc><lastmod>2021-05-06</lastmod></sitemap>"
        "<sitemap><loc>https://e.com/s2.xml</loc><changefreq>daily</changefreq></sitemap>"
        "<sitemap><lastmod>2021</lastmod></sitemap>"
        "<url><loc>https://e.com/not-a-sitemap</loc></url>"
        "</sitemapindex>"
    ).encode()
    result = parse_sitemap(body)
    assert result.kind == "sitemapindex"
    assert result.sitemaps == [
        Entry("https://e.com/s1.xml.gz", 1620259200.0),
        Entry("https://e.com/s2.xml"),
    ]
    assert (result.entries, result.skipped) == ([], 1)


def test_entries_are_skipped_and_counted_not_repaired():
    long_url = "http://e.com/" + "a" * (MAX_URL_LENGTH - len("http://e.com/"))
    body = urlset(
        "<lastmod>2020-01-01</lastmod>",  # no loc
        "<loc>   </loc>",
        "<loc>/relative/path</loc>",
        "<loc>e.com/no-scheme</loc>",
        "<loc>ftp://e.com/file</loc>",
        f"<loc>{long_url}</loc>",
        f"<loc>{long_url}b</loc>",  # 2049 characters
        "<loc>HTTPS://E.COM/Upper</loc>",
        "<loc>http://e.com/first</loc><loc>http://e.com/second</loc>",
    )
    result = parse_sitemap(body)
    assert urls_of(result) == [long_url, "HTTPS://E.COM/Upper", "http://e.com/first"]
    assert len(long_url) == MAX_URL_LENGTH
    assert result.skipped == 6


def test_changefreq_and_priority_outside_the_protocol_are_unknown():
    values = [("always", "0"), ("NEVER", "1.0"), ("sometimes", "1.5"), ("", "-0.1")]
    values += [("daily ", "nan"), ("hourly", "0,5"), ("yearly", "1e-1"), ("weekly", ".25")]
    body = urlset(
        *[
            f"<loc>http://e.com/{i}</loc><changefreq>{c}</changefreq><priority>{p}</priority>"
            for i, (c, p) in enumerate(values)
        ]
    )
    got = [(e.changefreq, e.priority) for e in parse_sitemap(body).entries]
    assert got == [
        ("always", 0.0),
        ("never", 1.0),
        (None, None),
        (None, None),
        ("daily", None),
        ("hourly", None),
        ("yearly", None),
        ("weekly", 0.25),
    ]


def test_only_top_level_items_and_their_own_fields_are_read():
    """Extensions (image:loc) are not a url's loc, and a url outside the root is not one."""
    body = (
        f'<urlset xmlns="{NS}" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        "<wrapper><url><loc>http://e.com/nested</loc></url></wrapper>"
        "<url><image:image><image:loc>http://e.com/img.png</image:loc></image:image>"
        "<loc>http://e.com/page</loc></url>"
        "<loc>http://e.com/stray</loc>"
        "</urlset>"
    ).encode()
    assert urls_of(parse_sitemap(body)) == ["http://e.com/page"]


def test_comments_cdata_and_character_references_are_text():
    body = urlset("<loc>http://e.com/<![CDATA[a&b]]><!-- c -->/&#x63;&lt;</loc>")
    assert urls_of(parse_sitemap(body)) == ["http://e.com/a&b/c<"]


@pytest.mark.parametrize(
    "body",
    [
        b"<rss version='2.0'><channel><item><link>http://e.com/</link></item></channel></rss>",
        b"<!DOCTYPE html><html><body><url><loc>http://e.com/</loc></url></body></html>",
        b"<url><loc>http://e.com/</loc></url>",
    ],
)
def test_another_root_is_unknown_and_read_no_further(body):
    result = parse_sitemap(body)
    assert (result.kind, result.entries, result.sitemaps) == ("unknown", [], [])


def test_a_root_that_does_not_start_early_is_not_looked_for_further():
    body = b"<?xml version='1.0'?>" + b"<!-- padding -->" * 20_000 + urlset("<loc>http://e/</loc>")
    result = parse_sitemap(body)
    assert (result.kind, result.entries) == ("unknown", [])
    assert result.bytes_read < 400 * 1024


# -- text sitemaps -----------------------------------------------------------------


def test_a_text_sitemap_keeps_http_lines_and_counts_the_others():
    body = (
        b"http://e.com/1\r\n"
        b"  https://e.com/2  \n"
        b"\n   \n"
        b"# a comment\n"
        b"/relative\n"
        b"ftp://e.com/x\n"
        b"HTTP://E.COM/3\n"
        b"https://e.com/\xc3\xa9t\xc3\xa9\n"
        b"http://e.com/last-without-newline"
    )
    result = parse_sitemap(body)
    assert result.kind == "text"
    assert urls_of(result) == [
        "http://e.com/1",
        "https://e.com/2",
        "HTTP://E.COM/3",
        "https://e.com/été",
        "http://e.com/last-without-newline",
    ]
    assert (result.skipped, result.malformed) == (3, "")


def test_a_text_line_that_is_not_utf8_is_skipped_and_the_file_marked():
    result = parse_sitemap(b"http://e.com/a\nhttp://e.com/\xff\nhttp://e.com/b\n")
    assert urls_of(result) == ["http://e.com/a", "http://e.com/b"]
    assert (result.skipped, result.malformed) == (1, "text: not UTF-8")


def test_text_lines_too_long_are_skipped_even_across_pieces():
    long_line = b"http://e.com/" + b"x" * (3 * CHUNK)  # longer than a piece
    body = b"http://e.com/a\n" + long_line + b"\nhttp://e.com/b\n" + b"x" * 3000 + b"\n"
    result = parse_sitemap(body + b"http://e.com/" + b"y" * (MAX_URL_LENGTH - 13))
    assert urls_of(result) == ["http://e.com/a", "http://e.com/b", "http://e.com/" + "y" * 2035]
    assert result.skipped == 2


def test_gzip_is_told_by_its_magic_bytes():
    text = b"http://e.com/1\nhttp://e.com/2\n"
    xml = urlset(*locs("http://e.com/3"))
    assert urls_of(parse_sitemap(gzip.compress(text))) == ["http://e.com/1", "http://e.com/2"]
    assert urls_of(parse_sitemap(gzip.compress(xml))) == ["http://e.com/3"]
    assert parse_sitemap(gzip.compress(xml)).bytes_read == len(xml)  # decompressed bytes
    members = gzip.compress(text[:20]) + gzip.compress(text[20:]) + b"trailing junk"
    assert urls_of(parse_sitemap(members)) == ["http://e.com/1", "http://e.com/2"]


def test_a_bom_is_skipped_even_split_across_gzip_members():
    xml = b"\xef\xbb\xbf" + urlset(*locs("http://e.com/x"))
    assert urls_of(parse_sitemap(xml)) == ["http://e.com/x"]
    assert urls_of(parse_sitemap(b"\xef\xbb\xbf \r\nhttp://e.com/t\n")) == ["http://e.com/t"]
    one_byte_members = b"".join(gzip.compress(xml[i : i + 1]) for i in range(len(xml)))
    assert urls_of(parse_sitemap(one_byte_members)) == ["http://e.com/x"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_xml_in_utf16_with_its_bom_is_read(encoding):
    text = urlset(*locs("http://e.com/\u00e9")).decode("utf-8")
    text = text.replace('encoding="UTF-8"', 'encoding="UTF-16"')
    bom = {"utf-16": b"", "utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}[encoding]
    body = bom + text.encode(encoding)
    assert urls_of(parse_sitemap(body)) == ["http://e.com/\u00e9"]
    one_byte_members = b"".join(gzip.compress(body[i : i + 1]) for i in range(len(body)))
    assert urls_of(parse_sitemap(one_byte_members)) == ["http://e.com/\u00e9"]
    # a text sitemap must be UTF-8: one in UTF-16 is read as nothing, and says so
    assert parse_sitemap("http://e.com/t\n".encode("utf-16")).malformed


@pytest.mark.parametrize("body", [b"", b" \n\t\r\n", b"\xef\xbb\xbf", gzip.compress(b"", mtime=0)])
def test_an_empty_file_is_unknown_and_says_so(body):
    result = parse_sitemap(body)
    assert (result.kind, result.entries, result.malformed) == ("unknown", [], "empty")
    assert not result.complete


# -- limits ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["urlset", "sitemapindex", "text", "gzip"])
def test_max_urls_exactly_reached_and_one_past(kind):
    def body(count):
        urls = [f"http://e.com/{i}" for i in range(count)]
        if kind == "text":
            return "".join(f"{url}\n" for url in urls).encode()
        if kind == "sitemapindex":
            items = "".join(f"<sitemap><loc>{url}</loc></sitemap>" for url in urls)
            return f"<sitemapindex>{items}</sitemapindex>".encode()
        raw = urlset(*locs(*urls))
        return gzip.compress(raw) if kind == "gzip" else raw

    at = parse_sitemap(body(5), max_urls=5)
    assert (len(at.entries) + len(at.sitemaps), at.too_many, at.complete) == (5, False, True)
    past = parse_sitemap(body(6), max_urls=5)
    assert (len(past.entries) + len(past.sitemaps), past.too_many, past.complete) == (
        5,
        True,
        False,
    )
    kept = past.entries or past.sitemaps
    assert [e.url for e in kept] == [f"http://e.com/{i}" for i in range(5)]


def test_skipped_entries_do_not_count_against_max_urls():
    body = urlset(*locs("/a", "/b", "http://e.com/1", "/c", "http://e.com/2"))
    result = parse_sitemap(body, max_urls=2)
    assert (urls_of(result), result.skipped, result.too_many) == (
        ["http://e.com/1", "http://e.com/2"],
        3,
        False,
    )
    assert parse_sitemap(urlset(), max_urls=0).complete
    assert parse_sitemap(urlset(*locs("http://e/")), max_urls=0).too_many


def test_max_bytes_exactly_reached_and_one_past():
    body = urlset(*locs("http://e.com/1", "http://e.com/2"))
    at = parse_sitemap(body, max_bytes=len(body))
    assert (len(at.entries), at.too_large, at.bytes_read) == (2, False, len(body))
    past = parse_sitemap(body, max_bytes=len(body) - 1)
    assert (len(past.entries), past.too_large, past.bytes_read) == (2, True, len(body) - 1)
    assert (past.malformed, past.complete) == ("", False)  # cut by us, not broken
    zipped = gzip.compress(body)  # the limit is on the decompressed bytes
    assert not parse_sitemap(zipped, max_bytes=len(body)).too_large
    assert parse_sitemap(zipped, max_bytes=len(body) - 1).too_large


def test_limits_are_checked_at_the_boundary():
    with pytest.raises(ValueError, match="max_urls"):
        parse_sitemap(b"", max_urls=-1)
    with pytest.raises(ValueError, match="max_bytes"):
        parse_sitemap(b"", max_bytes=-1)


def cut_everywhere(body: bytes) -> None:
    """Cut by max_bytes, or by the file's end, at every byte: the entries kept are the
    first ones of the whole file, and whole ones, except that a text file that ends in the
    middle of a line (no end marker says it was cut) ends with the start of its URL."""
    full = parse_sitemap(body).entries
    assert full
    for size in range(len(body) + 1):
        by_limit = parse_sitemap(body, max_bytes=size)
        assert (by_limit.too_large, by_limit.bytes_read) == (size < len(body), size)
        assert by_limit.entries == full[: len(by_limit.entries)], size
        cut_short = parse_sitemap(body[:size])
        kept = cut_short.entries
        if cut_short.kind == "text":
            if kept:
                assert full[len(kept) - 1].url.startswith(kept[-1].url), size
                kept = kept[:-1]
        elif body[size:].strip():
            assert cut_short.malformed, size
        assert kept == full[: len(kept)], size


def test_a_cut_xml_file_keeps_its_whole_entries():
    body = urlset(
        "<loc>http://e.com/1</loc><lastmod>2020-01-01</lastmod>",
        "<loc>http://e.com/22</loc><priority>0.5</priority>",
        "<loc>http://e.com/333</loc>",
    )
    cut_everywhere(body)
    result = parse_sitemap(body, max_bytes=body.index(b"333") + 1)  # inside the third loc
    assert (urls_of(result), result.too_large) == (["http://e.com/1", "http://e.com/22"], True)


def test_a_cut_text_file_keeps_its_whole_lines():
    body = b"http://e.com/1\nhttp://e.com/22\nhttp://e.com/333\n"
    cut_everywhere(body)
    result = parse_sitemap(body, max_bytes=len(body) - 2)  # the last line not ended
    assert (urls_of(result), result.too_large) == (["http://e.com/1", "http://e.com/22"], True)


def test_a_cut_or_corrupt_gzip_keeps_what_came_before():
    body = urlset(*locs(*[f"http://e.com/{i}" for i in range(2000)]))
    zipped = gzip.compress(body)
    full = parse_sitemap(zipped).entries
    for size in range(0, len(zipped), 97):
        result = parse_sitemap(zipped[:size])
        assert result.entries == full[: len(result.entries)]
        if size > 10:
            assert result.malformed == "gzip: cut off"
    middle = len(zipped) // 2  # gzip's CRC comes last: what precedes an error is unchecked
    corrupt = zipped[:middle] + bytes(b ^ 0x55 for b in zipped[middle : middle + 64])
    result = parse_sitemap(corrupt + zipped[middle + 64 :])
    assert result.malformed.startswith(("gzip: ", "xml: "))
    assert 0 < len(result.entries) < 2000


# -- bombs and attacks --------------------------------------------------------------


def test_the_bomb_maker_makes_valid_gzip():
    block = b"<url><loc>http://e.com/</loc></url>\n" * 100
    assert gzip.decompress(gzip_bomb(block, 7)) == block * 7


def test_a_gzip_bomb_of_zeros_inflates_no_more_than_max_bytes():
    """1 GiB of zeros, 1 MB compressed, read with the default limits."""
    bomb = gzip_bomb(bytes(MiB), 1024)
    assert len(bomb) < 1.1 * MiB
    result, peak = traced(bomb)
    assert result.too_large
    assert result.bytes_read == MAX_BYTES
    assert result.entries == []
    assert peak < 8 * MiB, peak


def test_a_gzip_bomb_of_entries_stops_at_max_urls():
    """1 GiB of one repeated <url> (25 M of them), read with the default limits."""
    block = b"<url><loc>http://e.com/page</loc></url>\n" * (MiB // 40)
    result, peak = traced(gzip_bomb(b"<urlset>", 1) + gzip_bomb(block, 1024))
    assert (len(result.entries), result.too_many) == (MAX_URLS, True)
    assert result.bytes_read < 3 * MiB
    assert peak < 40 * MiB, peak


def test_a_gzip_bomb_of_skipped_entries_stops_at_max_bytes():
    block = b"<url><loc>/relative</loc></url>\n" * (MiB // 32)
    result, peak = traced(gzip_bomb(b"<urlset>", 1) + gzip_bomb(block, 1024), max_bytes=4 * MiB)
    assert (result.too_large, result.entries, result.bytes_read) == (True, [], 4 * MiB)
    assert result.skipped > 100_000
    assert peak < 8 * MiB, peak


def test_a_bomb_of_elements_builds_no_tree():
    """libxml2's memory is not traced by tracemalloc: a child process measures its own
    peak RSS.  16 MiB of <a/> kept as a tree would take ~500 MB."""
    code = (
        "import resource, struct, zlib\n"
        "from webcrawl.sitemaps.parse import parse_sitemap\n"
        + inspect.getsource(gzip_bomb)
        + "bomb = gzip_bomb(b'<urlset><url>', 1) + gzip_bomb(b'<a/>' * 262144, 64)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "result = parse_sitemap(bomb, max_bytes=16 * 1024 * 1024)\n"
        "assert result.too_large and result.kind == 'urlset', result\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 32 * 1024, f"RSS grew by {out.stdout.strip()} KiB"


def test_one_start_tag_cannot_hold_a_bomb_of_attributes():
    attributes = b"".join(b" a%d=''" % i for i in range(100_000))  # ~1 MB, ~17 MB of tree
    result = parse_sitemap(b"<urlset><url" + attributes + b"><loc>http://e/</loc></url></urlset>")
    assert result.entries == []
    assert result.malformed == "xml: over 262144 bytes without a '>'"


def test_billion_laughs_expands_nothing():
    laughs = ['<!ENTITY lol0 "lol">']
    laughs += [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    body = (
        '<?xml version="1.0"?>'
        f"<!DOCTYPE urlset [{''.join(laughs)}]>"
        f'<urlset xmlns="{NS}">'
        "<url><loc>http://e.com/before</loc></url>"
        "<url><loc>http://e.com/&lol9;</loc><lastmod>&lol9;</lastmod></url>"
        "<url><loc>http://e.com/after</loc></url>"
        "</urlset>"
    ).encode()
    result, peak = traced(body)
    assert urls_of(result)[:1] == ["http://e.com/before"]
    assert all("lol" not in e.url for e in result.entries)
    # libxml2 (2.14) refuses the document at the first reference, even unexpanded
    assert "amplification" in result.malformed
    assert peak < 1 * MiB, peak


def test_an_entity_in_a_value_makes_it_unknown():
    body = (
        b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY host "evil.example">]><urlset>'
        b"<url><loc>http://&host;/a</loc></url>"
        b"<url><loc>http://e.com/b</loc><lastmod>&host;2020</lastmod></url>"
        b"</urlset>"
    )
    result = parse_sitemap(body)
    assert (result.entries, result.skipped, result.malformed) == ([Entry("http://e.com/b")], 1, "")


def test_no_external_entity_or_dtd_is_read(tmp_path):
    """With lxml's collect_ids=False, libxml2 opens the file of an external parameter entity
    even with load_dtd=False and no_network=True (the control parser below parses the file
    as DTD and fails): ours reads every external resource as empty."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0 -- not a DTD\n")
    body = (
        '<?xml version="1.0"?>'
        f'<!DOCTYPE urlset SYSTEM "{secret.as_uri()}" '
        f'[<!ENTITY % pe SYSTEM "{secret.as_uri()}"> %pe;'
        f' <!ENTITY general SYSTEM "{secret.as_uri()}">'
        ' <!ENTITY net SYSTEM "http://127.0.0.1:9/x">]>'
        "<urlset><url><loc>http://e.com/&general;&net;</loc></url>"
        "<url><loc>http://e.com/ok</loc></url></urlset>"
    ).encode()
    result = parse_sitemap(body)
    assert (urls_of(result), result.skipped, result.malformed) == (["http://e.com/ok"], 1, "")

    control = etree.XMLParser(
        resolve_entities=False, load_dtd=False, no_network=True, collect_ids=False
    )
    with pytest.raises(etree.XMLSyntaxError, match=r"internal subset.*secret\.txt"):
        etree.fromstring(body, control)


def test_recover_mode_would_invent_an_entry_from_a_cut_url():
    """Why recover=False: libxml2's recovery ends a cut-off <loc> where the data ends
    and reports no error; we keep the whole entries and say the file is broken."""
    body = urlset(*locs("http://e.com/1", "http://e.com/2345"))
    cut = body[: body.index(b"2345") + 2]
    recovering = etree.XMLPullParser(events=("end",), tag="{*}loc", recover=True)
    recovering.feed(cut)
    recovering.close()
    assert [e.text for _, e in recovering.read_events()] == ["http://e.com/1", "http://e.com/23"]
    result = parse_sitemap(cut)
    assert urls_of(result) == ["http://e.com/1"]
    assert result.malformed.startswith("xml: Premature end of data")


@pytest.mark.parametrize(
    "tail",
    [b"\x00garbage", b"<url><loc>http://e.com/3</url>", b"</urlset><urlset>", b"&undefined;"],
)
def test_garbage_after_entries_keeps_them(tail):
    body = urlset(*locs("http://e.com/1", "http://e.com/2")).replace(b"</urlset>", tail)
    result = parse_sitemap(body)
    assert urls_of(result) == ["http://e.com/1", "http://e.com/2"]
    assert result.malformed.startswith("xml: ")
    assert not result.complete


FRAGMENTS = st.sampled_from(
    [
        "<urlset>",
        "</urlset>",
        "<url>",
        "</url>",
        "<loc>",
        "</loc>",
        "http://e.com/x",
        "<lastmod>",
        "</lastmod>",
        "2020-01-01",
        "<sitemapindex>",
        "<sitemap>",
        "&amp;",
        "&lol;",
        "<!DOCTYPE u [<!ENTITY lol 'x'>]>",
        "<![CDATA[",
        "]]>",
        "<!--",
        "-->",
        "\n",
        " ",
        "\ufeff",
        "\x00",
        "é",
        "<?xml version='1.0'?>",
        "https://",
        "/",
        "<?xml version='1.0' encoding='x-unknown'?>",
        "<?xml version='1.0' encoding='UTF-16'?>",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=600), st.lists(FRAGMENTS, max_size=40).map("".join).map(str.encode)
    ),
    st.booleans(),
    st.integers(0, 5),
    st.integers(0, 700),
)
@example(b"\x1f\x8b", False, 5, 700)
@example(b"<urlset><url><loc>http://a/</loc></url>", True, 0, 3)
def test_any_body_is_read_without_raising_and_within_limits(raw, zipped, max_urls, max_bytes):
    body = gzip.compress(raw) if zipped else raw
    result = parse_sitemap(body, max_urls=max_urls, max_bytes=max_bytes)
    assert result.kind in ("urlset", "sitemapindex", "text", "unknown")
    assert len(result.entries) + len(result.sitemaps) <= max_urls
    assert result.bytes_read <= max_bytes
    for entry in result.entries + result.sitemaps:
        assert entry.url.lower().startswith(("http://", "https://"))
        assert len(entry.url) <= MAX_URL_LENGTH
        assert entry.url == entry.url.strip()


# -- lastmod ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024", 1704067200.0),
        ("2024-02", 1706745600.0),
        ("2024-02-29", 1709164800.0),
        ("2024-02-29T12:30Z", 1709209800.0),
        ("2024-02-29T12:30:15Z", 1709209815.0),
        ("2024-02-29T12:30:15.25Z", 1709209815.25),
        ("2024-02-29T12:30:15.123456789Z", 1709209815.123456789),
        ("2024-02-29T12:30:15+02:00", 1709202615.0),
        ("2024-02-29T12:30:15-05:30", 1709229615.0),
        ("  2024-02-29T12:30:15+00:00\n ", 1709209815.0),
        # lenient: no TZD is UTC, a space for T, +hhmm and +hh, lower case
        ("2024-02-29T12:30:15", 1709209815.0),
        ("2024-02-29 12:30:15", 1709209815.0),
        ("2024-02-29T12:30:15+0200", 1709202615.0),
        ("2024-02-29T12:30:15+02", 1709202615.0),
        ("2024-02-29t12:30:15z", 1709209815.0),
        # a leap second is the second before it
        ("2016-12-31T23:59:60Z", 1483228799.0),
        ("2016-12-31T23:59:60.5Z", 1483228799.5),
        # far past and far future: read as written, judged by the caller
        ("0001-01-01T00:00:00Z", -62135596800.0),
        ("0001-01-01T00:00:00+01:00", -62135600400.0),
        ("1969-12-31T23:59:59Z", -1.0),
        ("9999-12-31T23:59:59Z", 253402300799.0),
        ("9999-12-31T23:59:59-01:00", 253402304399.0),
    ],
)
def test_lastmod_w3c_datetimes(text, expected):
    assert parse_lastmod(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "0000",
        "10000",
        "-2024",
        "24",
        "2024-13",
        "2024-00",
        "2023-02-29",
        "2024-02-30",
        "1900-02-29",
        "2024-04-31",
        "2024-1-1",
        "20240101",
        "2024/01/01",
        "2024-01-01T",
        "2024-01-01T12Z",
        "2024-01-01T24:00Z",
        "2024-01-01T12:60Z",
        "2024-01-01T12:00:61Z",
        "2024-01-01T12:00+24:00",
        "2024-01-01T12:00+05:60",
        "2024-01-01T12:00:00,5Z",
        "2024-01-01T12:00:00.Z",
        "2024-01-01Z",
        "2024-01-01+01:00",
        "2024-01-01T12:00:00 +01:00",
        "2024-01-01T12:00:00UTC",
        "\uff12\uff10\uff12\uff14-01-01",  # fullwidth digits
        "2024-01-01x",
        "yesterday",
        "Tue, 15 Nov 1994 08:12:31 GMT",
        "2024-01-01T00:00:00." + "1" * 100 + "Z",
    ],
)
def test_lastmod_that_cannot_be_read_is_none(text):
    assert parse_lastmod(text) is None


@given(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.integers(-(23 * 60 + 59), 23 * 60 + 59),
    st.sampled_from(["fraction", "seconds", "minutes", "date", "month", "year"]),
    st.sampled_from([":", ""]),
)
def test_lastmod_round_trips(moment, offset_minutes, precision, colon):
    date_part = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
    hours, minutes = divmod(abs(offset_minutes), 60)
    zone = f"{'-' if offset_minutes < 0 else '+'}{hours:02d}{colon}{minutes:02d}"
    if offset_minutes == 0 and colon:
        zone = "Z"
    time_part = f"T{moment.hour:02d}:{moment.minute:02d}"
    if precision == "fraction":
        text = f"{date_part}{time_part}:{moment.second:02d}.{moment.microsecond:06d}{zone}"
    elif precision == "seconds":
        text = f"{date_part}{time_part}:{moment.second:02d}{zone}"
        moment = moment.replace(microsecond=0)
    elif precision == "minutes":
        text = f"{date_part}{time_part}{zone}"
        moment = moment.replace(second=0, microsecond=0)
    else:  # no time, so no zone: the start of the day, month or year in UTC
        offset_minutes = 0
        if precision == "date":
            text, moment = date_part, datetime(moment.year, moment.month, moment.day)
        elif precision == "month":
            text, moment = date_part[:7], datetime(moment.year, moment.month, 1)
        else:
            text, moment = date_part[:4], datetime(moment.year, 1, 1)
    expected = (moment - datetime(1970, 1, 1)).total_seconds() - offset_minutes * 60
    assert parse_lastmod(text) == pytest.approx(expected, abs=1e-3)
    if 2 <= moment.year <= 9998:  # datetime's own arithmetic agrees
        aware = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
        assert parse_lastmod(text) == pytest.approx(aware.timestamp(), abs=1e-3)


@given(st.text(max_size=80))
@example("2024-02-29T12:30:15.5+02:00")
def test_lastmod_never_raises(text):
    value = parse_lastmod(text)
    assert value is None or isinstance(value, float)
