"""The demo web: a generated multi-host site served on loopback.

It is what the quick start crawls, what the tests crawl and what the
benchmarks extend.  Every host is a distinct loopback address (127.0.0.2,
127.0.0.3, ...) on one port, so each is its own site for scope and
politeness.  The site is generated from a seed, so the same arguments give
the same web, and :meth:`DemoWeb.reachable` answers what a correct crawl
must fetch.

Per host: a home page, sections and sub-sections of articles with
real-looking text, a robots.txt that disallows ``/private/``, PDF and JSON
files, ``/old/...`` links that 301-redirect to ``/moved/...``, a few links
to missing pages (404), links back home and across hosts.  The last host is
linked to but is not a seed host, so it is out of scope by default.

Responses carry ETag, Last-Modified and Content-Length and answer
conditional requests (If-None-Match, If-Modified-Since) with 304.  Every
request is logged as a JSON line (``--log``), which is how tests check
politeness and fetch-once from the server's side.  Faults (hangs, resets,
slow hosts) come from ``--fault``; with ``--change-speed`` the HTML pages
change over time (:mod:`webcrawl.demo.changes`) and ``/__truth__`` tells
how.

With ``--sitemaps`` the first four seed hosts offer sitemaps (sitemaps.org), each
a case a crawler must get right: host 0 tells the truth (an index, a gzipped
urlset, true ``<lastmod>``), host 1 lies (every ``<lastmod>`` is the time of the
request), host 2 has pages only its sitemaps list (one of them on host 0,
cross-submitted by host 2's robots.txt), host 3 is hostile (an index that lists
itself, a loop of indexes, a gzip bomb).  :meth:`DemoWeb.sitemap_only` and
``reachable(sitemaps=True)`` are the ground truth.  Without it, the web is the
same as before, byte for byte.

    python -m webcrawl.demo.web --hosts 4 --pages 100 --log requests.jsonl
"""

from __future__ import annotations

import argparse
import email.utils
import gzip
import hashlib
import json
import math
import random
import re
import signal
import struct
import sys
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from webcrawl.demo import hostile
from webcrawl.demo.changes import (
    DAY,
    HOUR,
    MINUTE,
    ChangeModel,
    latest_block,
    noise_block,
    prose,
)

WORDS = {
    "adj": (
        "quiet ancient bright careful early northern hidden rapid simple curious formal "
        "gentle local modern rural coastal seasonal public private narrow open central steady "
        "rare visible common broad dense shallow"
    ).split(),
    "noun": (
        "river garden library station harbour market bridge forest valley village archive "
        "museum orchard railway tower meadow canal island school workshop theatre lighthouse "
        "observatory festival journal committee council survey map record collection method "
        "season harvest storm road path"
    ).split(),
    "verb": (
        "describes follows crosses records shapes supports reveals connects protects measures "
        "explains gathers outlines compares celebrates restores maps tracks welcomes reflects"
    ).split(),
    "prep": ("near beyond along across beside under above through around behind").split(),
    "topic": (
        "history geography architecture botany astronomy transport trade music education "
        "weather fishing farming crafts literature cartography"
    ).split(),
}
_SENTENCES = (
    "The {adj} {noun} {verb} the {noun} {prep} the {adj} {noun}.",
    "Visitors often notice how the {noun} {verb} the {adj} {noun}.",
    "In the {topic} of the region, the {noun} {verb} a {adj} {noun}.",
    "Records from the {adj} {noun} show that the {noun} {verb} the {noun}.",
    "A {adj} {noun} stands {prep} the {noun}, and it {verb} the {adj} {noun}.",
    "Local guides say the {noun} {verb} every {noun} {prep} the {noun}.",
)
LAST_MODIFIED = 1_700_000_000  # fixed Unix time for the static pages
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
# sitemaps.org's <changefreq> values and the period each stands for ("always": a minute or less)
CHANGEFREQS = (
    ("always", MINUTE),
    ("hourly", HOUR),
    ("daily", DAY),
    ("weekly", 7 * DAY),
    ("monthly", 30 * DAY),
    ("yearly", 365 * DAY),
)
BOMB_BYTES = 1 << 30  # of padding in the hostile host's gzip bomb, inflated
_BOMB_PAD = b" " * ((64 << 10) - 6) + b"<pad/>"  # 64 KiB, with a ">" (see _gzip_bomb)
_ARTICLE = re.compile(r"/s\d+/(?:sub\d/)?a\d+\.html$")


def _sentence(rng: random.Random) -> str:
    template = rng.choice(_SENTENCES)
    while "{" in template:
        start = template.index("{")
        end = template.index("}", start)
        template = (
            template[:start] + rng.choice(WORDS[template[start + 1 : end]]) + template[end + 1 :]
        )
    return template


@dataclass
class DemoPage:
    url: str
    kind: str  # "html", "pdf", "json", "redirect", "robots"
    title: str = ""
    links: list[str] = field(default_factory=list)
    redirect_to: str | None = None


@dataclass(frozen=True)
class SitemapFile:
    """One sitemap file the demo serves: what it lists, and how."""

    kind: str  # "urlset", "sitemapindex", "text", or "bomb" (a gzipped urlset that never ends)
    urls: tuple[str, ...]  # pages (urlset, text, bomb) or sitemap files (sitemapindex)
    gzip: bool = False  # served as a .gz file: gzip bytes, no Content-Encoding
    lying: bool = False  # every <lastmod> is the time of the request


class DemoWeb:
    """The generated link graph of ``hosts`` (``ip:port`` netlocs)."""

    def __init__(
        self,
        hosts: list[str],
        pages_per_host: int | list[int] = 100,
        seed: int = 0,
        fanout: int = 2,
        cross_links: int = 10,
        *,
        sitemaps: bool = False,
    ) -> None:
        """``pages_per_host``: one number for every host, or a list (its last entry
        repeats), e.g. ``[400, 40]`` for one big host among small ones.  ``fanout``:
        random links from each article to others of its section (more: a wider web);
        ``cross_links``: articles per host that link to another host.  ``sitemaps``:
        the first four seed hosts offer sitemaps (see :meth:`_add_sitemaps`); the
        rest of the web is the same as without."""
        if len(hosts) < 2:
            raise ValueError("the demo web needs at least two hosts (one is out of scope)")
        sizes = [pages_per_host] if isinstance(pages_per_host, int) else list(pages_per_host)
        if not sizes or min(sizes) < 12:
            raise ValueError("pages_per_host must be at least 12")
        self.sizes = [sizes[min(i, len(sizes) - 1)] for i in range(len(hosts))]
        self.hosts = hosts
        self.seed = seed
        self.fanout = fanout
        self.sitemaps = sitemaps
        self.crawl_delays: dict[str, float] = {}  # host -> robots.txt Crawl-delay
        self.sitemap_files: dict[str, SitemapFile] = {}  # URL -> what it serves
        self._robots_sitemaps: dict[str, list[str]] = {}  # host -> its robots.txt Sitemap lines
        self._sitemap_only: dict[str, str] = {}  # URL -> how only sitemaps lead there
        self._sitemap_dropped: dict[str, str] = {}  # URL -> why a crawler must not take it
        self._sitemap_pages: dict[str, list[str]] = {}  # host -> pages its sitemaps give
        self._bomb: bytes | None = None
        self._rendered: dict[str, tuple[bytes, str]] = {}
        self._archives: dict[str, str] = {}  # the changing web's stable text per page
        self.pages: dict[str, DemoPage] = {}
        rng = random.Random(seed)
        articles: dict[str, list[str]] = {}
        for host, size in zip(hosts, self.sizes, strict=True):
            articles[host] = self._build_host(host, size, rng)
        for host in hosts:  # cross-host links, including into the out-of-scope host
            others = [h for h in hosts if h != host]
            for url in rng.sample(articles[host], k=min(cross_links, len(articles[host]))):
                self.pages[url].links.append(rng.choice(articles[rng.choice(others)]))
        if sitemaps:  # after the random graph, which it leaves as it was
            self._add_sitemaps()

    @property
    def seed_hosts(self) -> list[str]:
        return self.hosts[:-1]

    @property
    def truthful_host(self) -> str | None:
        """The host whose sitemaps tell the truth (host 0), if the web has sitemaps."""
        return self._role(0)

    @property
    def lying_host(self) -> str | None:
        """The host whose sitemap says every page changed now (host 1), if any."""
        return self._role(1)

    def _role(self, index: int) -> str | None:
        """``hosts[index]`` if the web has sitemaps and it is a seed host."""
        return self.hosts[index] if self.sitemaps and index < len(self.hosts) - 1 else None

    def seeds(self) -> list[str]:
        return [f"http://{h}/" for h in self.seed_hosts]

    def _add(self, page: DemoPage) -> DemoPage:
        self.pages[page.url] = page
        return page

    def _build_host(self, host: str, n: int, rng: random.Random) -> list[str]:
        base = f"http://{host}"
        sections = max(3, n // 20)
        home = self._add(DemoPage(f"{base}/", "html", f"{host} home"))
        self._add(DemoPage(f"{base}/robots.txt", "robots"))
        budget = n - 1 - sections
        articles: list[str] = []
        for s in range(sections):
            topic = WORDS["topic"][(s + rng.randrange(7)) % len(WORDS["topic"])]
            section = self._add(DemoPage(f"{base}/s{s}/", "html", f"{topic.title()} section {s}"))
            home.links.append(section.url)
            section.links.append(home.url)
            count = budget // sections + (1 if s < budget % sections else 0)
            children: list[DemoPage] = []
            for a in range(count):
                sub = f"sub{a % 3}/" if a >= count // 2 else ""
                page = self._add(DemoPage(f"{base}/s{s}/{sub}a{a}.html", "html", f"{topic} {a}"))
                page.links += [home.url, section.url]
                children.append(page)
                articles.append(page.url)
            # a chain with shortcuts, so pages sit at several depths
            for i, page in enumerate(children):
                if i + 1 < len(children):
                    page.links.append(children[i + 1].url)
                if i < 3:
                    section.links.append(page.url)
                for other in rng.sample(children, k=min(self.fanout, len(children))):
                    if other is not page:
                        page.links.append(other.url)
        # special resources, each linked from one article
        specials = (
            [DemoPage(f"{base}/private/p{i}.html", "html", f"private {i}") for i in range(2)]
            + [DemoPage(f"{base}/files/report-{i}.pdf", "pdf") for i in range(2)]
            + [DemoPage(f"{base}/data/d{i}.json", "json") for i in range(2)]
        )
        for i in range(2):
            target = self._add(DemoPage(f"{base}/moved/m{i}.html", "html", f"moved {i}"))
            target.links.append(home.url)
            specials.append(DemoPage(f"{base}/old/m{i}", "redirect", redirect_to=target.url))
        for page in specials:
            self._add(page)
            self.pages[rng.choice(articles)].links.append(page.url)
        for i in range(2):  # dead links
            self.pages[rng.choice(articles)].links.append(f"{base}/missing-{i}.html")
        return articles

    def _add_sitemaps(self) -> None:
        """The sitemap files, and the pages only they lead to, of the four roles.

        Host 0 (truthful): robots.txt names ``/sitemap_index.xml``, an index of
        ``/sitemaps/pages.xml`` and ``/sitemaps/more.xml.gz``: its pages (home,
        sections, articles: what a crawl records at their own URL) with the time of
        their current version as ``<lastmod>``.  pages.xml also lists 2 articles of
        host 1, which host 1 did not submit: a crawler drops them.
        Host 1 (liar): robots.txt names ``/sitemap.xml``, all its pages, each
        ``<lastmod>`` the time of the request.
        Host 2: 15 pages no page links to, ``/only/o0.html``..``o14.html``; robots.txt
        names ``/sitemap.txt`` (o0..o9 and some of its other pages) and host 0's
        ``/sitemaps/cross.xml`` (o10..o14, and 2 pages of host 3, which host 3 did not
        submit), which host 0's robots.txt does not name.
        Host 3 (hostile): robots.txt names none; ``/sitemap.xml`` (found by guessing)
        is an index of itself, of ``/loop/a.xml`` (an index of ``/sitemap.xml``) and of
        ``/bomb.xml.gz``: 3 pages ``/only/b0.html``..``b2.html`` then 1 GiB of padding.
        A role goes with a seed host: a web of fewer hosts has fewer roles.
        """
        redirected = {p.redirect_to for p in self.pages.values() if p.kind == "redirect"}
        listed: dict[str, list[str]] = {host: [] for host in self.hosts}
        for url, page in self.pages.items():
            if page.kind == "html" and self.allowed(url) and url not in redirected:
                listed[urlsplit(url).netloc].append(url)
        listed = {host: sorted(urls) for host, urls in listed.items()}
        files, only, dropped = self.sitemap_files, self._sitemap_only, self._sitemap_dropped
        h0, h1, h2, h3 = (self._role(i) for i in range(4))
        if h0 is not None:
            base = f"http://{h0}"
            half = (len(listed[h0]) + 1) // 2
            strays = [u for u in listed[self.hosts[1]] if _ARTICLE.search(u)][:2]
            files[f"{base}/sitemaps/pages.xml"] = SitemapFile(
                "urlset", (*listed[h0][:half], *strays)
            )
            files[f"{base}/sitemaps/more.xml.gz"] = SitemapFile(
                "urlset", tuple(listed[h0][half:]), gzip=True
            )
            files[f"{base}/sitemap_index.xml"] = SitemapFile(
                "sitemapindex", (f"{base}/sitemaps/pages.xml", f"{base}/sitemaps/more.xml.gz")
            )
            self._robots_sitemaps[h0] = [f"{base}/sitemap_index.xml"]
            self._sitemap_pages[h0] = listed[h0]
            dropped.update(dict.fromkeys(strays, f"not cross-submitted by {self.hosts[1]}"))
        if h1 is not None:
            files[f"http://{h1}/sitemap.xml"] = SitemapFile("urlset", tuple(listed[h1]), lying=True)
            self._robots_sitemaps[h1] = [f"http://{h1}/sitemap.xml"]
            self._sitemap_pages[h1] = listed[h1]
        if h0 is not None and h2 is not None:
            plain = [f"http://{h2}/only/o{i}.html" for i in range(10)]
            crossed = [f"http://{h2}/only/o{i}.html" for i in range(10, 15)]
            decoys = [f"http://{self.hosts[3]}/only/x{i}.html" for i in range(2)]
            normal = listed[h2][::4]
            files[f"http://{h2}/sitemap.txt"] = SitemapFile("text", (*plain, *normal))
            files[f"http://{h0}/sitemaps/cross.xml"] = SitemapFile("urlset", (*crossed, *decoys))
            self._robots_sitemaps[h2] = [
                f"http://{h2}/sitemap.txt",
                f"http://{h0}/sitemaps/cross.xml",
            ]
            self._sitemap_pages[h2] = [*plain, *normal, *crossed]
            only.update(dict.fromkeys(plain, "sitemap"))
            only.update(dict.fromkeys(crossed, "cross-submitted"))
            dropped.update(dict.fromkeys(decoys, f"not cross-submitted by {self.hosts[3]}"))
            for i, url in enumerate(plain + crossed):
                self._add(DemoPage(url, "html", f"only {i}", [f"http://{h2}/"]))
            for i, url in enumerate(decoys):
                self._add(DemoPage(url, "html", f"elsewhere {i}", [f"http://{self.hosts[3]}/"]))
        if h3 is not None:
            base = f"http://{h3}"
            bombed = [f"{base}/only/b{i}.html" for i in range(3)]
            files[f"{base}/sitemap.xml"] = SitemapFile(
                "sitemapindex", (f"{base}/sitemap.xml", f"{base}/loop/a.xml", f"{base}/bomb.xml.gz")
            )
            files[f"{base}/loop/a.xml"] = SitemapFile("sitemapindex", (f"{base}/sitemap.xml",))
            files[f"{base}/bomb.xml.gz"] = SitemapFile("bomb", tuple(bombed), gzip=True)
            self._sitemap_pages[h3] = bombed
            only.update(dict.fromkeys(bombed, "bomb"))
            for i, url in enumerate(bombed):
                self._add(DemoPage(url, "html", f"bomb {i}", [f"{base}/"]))

    # -- ground truth --------------------------------------------------------

    def robots_txt(self, host: str | None = None) -> str:
        delay = self.crawl_delays.get(host) if host else None
        extra = f"Crawl-delay: {delay}\n" if delay else ""
        for url in self._robots_sitemaps.get(host or "", ()):
            extra += f"Sitemap: {url}\n"
        return "User-agent: *\nDisallow: /private/\n" + extra

    def sitemap_only(self) -> dict[str, str]:
        """URL -> how a page no page links to is reached: "sitemap" (host 2's own),
        "cross-submitted" (host 2's, in a sitemap on host 0) or "bomb" (host 3's, the
        entries before the gzip bomb's padding)."""
        return dict(self._sitemap_only)

    def sitemap_dropped(self) -> dict[str, str]:
        """URL -> why a crawler must not take it from the sitemap that lists it (the
        sitemap's host may not list it); host 3's two are found by no other way."""
        return dict(self._sitemap_dropped)

    def sitemap_urls(self) -> list[str]:
        """Every sitemap file the demo serves (some named by no robots.txt)."""
        return list(self.sitemap_files)

    @staticmethod
    def allowed(url: str) -> bool:
        return not urlsplit(url).path.startswith("/private/")

    def reachable(
        self,
        seeds: list[str] | None = None,
        scope: str = "host",
        depth_limit: int | None = None,
        dead: tuple[str, ...] = (),
        sitemaps: bool = False,
    ) -> dict[str, int]:
        """URL -> shortest depth of every URL a correct crawl records.

        A redirect is recorded under its source URL (its target is fetched
        as part of it); missing pages are recorded with their 404; URLs
        starting with one of ``dead`` are recorded as failed, not followed.
        ``sitemaps``: the crawl reads the sitemaps of every host it visits (named in
        robots.txt, or ``/sitemap.xml`` guessed) and takes the pages they may list,
        one deeper than the first URL it fetched there (depth 1 on a seed's host), so
        also the pages of :meth:`sitemap_only`.
        """
        seeds = self.seeds() if seeds is None else seeds
        in_scope = {urlsplit(s).netloc for s in seeds}
        depth = {s: 0 for s in seeds}
        todo = deque(seeds)
        given = self._sitemap_pages if sitemaps else {}
        read: set[str] = set()  # hosts whose sitemaps were read
        while todo:
            url = todo.popleft()
            links: list[str] = []
            host = urlsplit(url).netloc
            if host in given and host not in read and not f"http://{host}/".startswith(dead):
                read.add(host)
                links += given[host]
            page = self.pages.get(url)
            if page is not None and page.kind == "html" and not url.startswith(dead):
                links += page.links
            if depth_limit is not None and depth[url] >= depth_limit:
                continue
            for link in links:
                if link in depth or not self.allowed(link):
                    continue
                if scope == "host" and urlsplit(link).netloc not in in_scope:
                    continue
                depth[link] = depth[url] + 1
                todo.append(link)
        return depth

    # -- content -------------------------------------------------------------

    def render(self, page: DemoPage) -> tuple[bytes, str]:
        """Body and content type of ``page`` (made once, then served from memory)."""
        cached = self._rendered.get(page.url)
        if cached is None:
            cached = self._rendered[page.url] = self._render(page)
        return cached

    def render_version(
        self, page: DemoPage, version: int, now: float, noise: random.Random
    ) -> tuple[bytes, str]:
        """An HTML page of the changing web at ``version``, with this response's noise."""
        base, ctype = self.render(page)
        archive = self._archives.get(page.url)
        if archive is None:  # stable text, with a vocabulary of its own, as real pages have
            archive = prose(random.Random(f"{self.seed}:archive:{page.url}"), 6)
            self._archives[page.url] = archive
        extra = f'<div class="archive">{archive}</div>'
        extra += latest_block(page.url, version, self.seed)
        extra += noise_block(now, noise)
        return base.replace(b"</body>", extra.encode() + b"</body>", 1), ctype

    def last_modified(self, url: str, now: float, changes: ChangeModel | None = None) -> float:
        """The Last-Modified the server sends for the HTML page ``url`` at ``now``: the time
        its current version began (LAST_MODIFIED on the static web)."""
        if changes is None:
            return LAST_MODIFIED
        return changes.last_modified(url, changes.version(url, now))

    def sitemap_file(
        self, url: str, now: float, changes: ChangeModel | None = None
    ) -> tuple[bytes, str] | None:
        """Body and content type of the sitemap file at ``url`` at ``now`` (None: no such
        file).  ``changes``: the server's change model, which the ``<lastmod>`` follow."""
        sitemap = self.sitemap_files.get(url)
        if sitemap is None:
            return None
        if sitemap.kind == "bomb":
            if self._bomb is None:  # ~1 MB, built once, when first asked for
                xml = _urlset_xml([(u, None, None) for u in sitemap.urls])
                cut = xml.rindex(b"</urlset>")  # the padding goes before the end tag
                self._bomb = _gzip_bomb(xml[:cut], xml[cut:], BOMB_BYTES)
            return self._bomb, "application/gzip"
        if sitemap.kind == "text":
            return "".join(u + "\n" for u in sitemap.urls).encode(), "text/plain; charset=utf-8"
        if sitemap.kind == "sitemapindex":
            children = [(u, self._sitemap_lastmod(u, now, changes)) for u in sitemap.urls]
            body = _index_xml(children)
        else:
            body = _urlset_xml([self._entry(u, sitemap, now, changes) for u in sitemap.urls])
        if sitemap.gzip:
            return gzip.compress(body, mtime=0), "application/gzip"
        return body, "application/xml"

    def _entry(
        self, url: str, sitemap: SitemapFile, now: float, changes: ChangeModel | None
    ) -> tuple[str, float | None, str | None]:
        """A urlset's ``(loc, lastmod, changefreq)`` for the page ``url``."""
        if sitemap.lying:
            return url, now, None
        freq = None
        if changes is not None and url in changes.processes:  # Poisson: the mean period
            freq = _changefreq(changes.processes[url].period / changes.speed)
        return url, self.last_modified(url, now, changes), freq

    def _sitemap_lastmod(self, url: str, now: float, changes: ChangeModel | None) -> float | None:
        """An index's ``<lastmod>`` for a child: its pages' latest, if it tells the truth."""
        child = self.sitemap_files.get(url)
        if child is None or child.kind != "urlset" or child.lying:
            return None
        return max(self.last_modified(u, now, changes) for u in child.urls)

    def _render(self, page: DemoPage) -> tuple[bytes, str]:
        rng = random.Random(f"{self.seed}:{page.url}")
        if page.kind == "robots":
            host = urlsplit(page.url).netloc
            return self.robots_txt(host).encode(), "text/plain; charset=utf-8"
        if page.kind == "pdf":
            body = b"%PDF-1.4\n% demo report\n" + _sentence(rng).encode() + b"\n%%EOF\n"
            return body, "application/pdf"
        if page.kind == "json":
            data = {"url": page.url, "values": [rng.randrange(1000) for _ in range(5)]}
            return json.dumps(data).encode(), "application/json"
        paragraphs = "\n".join(
            "<p>" + " ".join(_sentence(rng) for _ in range(rng.randint(3, 6))) + "</p>"
            for _ in range(rng.randint(2, 5))
        )
        links = "\n".join(
            f'<li><a href="{_relative(page.url, link)}">{_link_text(link)}</a></li>'
            for link in page.links
        )
        html = (
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
            f"<title>{page.title.title()}</title>"
            "<style>body{font-family:serif}</style>"
            "<script>var tracker = 'not visible text';</script></head>\n"
            f"<body><h1>{page.title.title()}</h1>\n{paragraphs}\n<ul>\n{links}\n</ul>"
            "</body></html>\n"
        )
        return html.encode(), "text/html; charset=utf-8"


def _relative(page_url: str, link: str) -> str:
    """Same-host links as absolute paths (as real sites write them)."""
    a, b = urlsplit(page_url), urlsplit(link)
    return b.path if a.netloc == b.netloc else link


def _link_text(url: str) -> str:
    path = urlsplit(url).path.strip("/") or "home"
    return path.replace("/", " / ")


def _w3c(ts: float) -> str:
    """A W3C datetime in UTC to the second, as Last-Modified has it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _changefreq(period: float) -> str:
    """The ``<changefreq>`` nearest, on a log scale, to a (mean) real period in seconds."""
    return min(CHANGEFREQS, key=lambda item: abs(math.log(period / item[1])))[0]


def _urlset_xml(entries: list[tuple[str, float | None, str | None]]) -> bytes:
    lines = []
    for loc, lastmod, freq in entries:
        line = f"<url><loc>{escape(loc)}</loc>"
        line += f"<lastmod>{_w3c(lastmod)}</lastmod>" if lastmod is not None else ""
        line += f"<changefreq>{freq}</changefreq>" if freq else ""
        lines.append(line + "</url>\n")
    return _sitemap_xml("urlset", "".join(lines))


def _index_xml(children: list[tuple[str, float | None]]) -> bytes:
    lines = []
    for loc, lastmod in children:
        line = f"<sitemap><loc>{escape(loc)}</loc>"
        line += f"<lastmod>{_w3c(lastmod)}</lastmod>" if lastmod is not None else ""
        lines.append(line + "</sitemap>\n")
    return _sitemap_xml("sitemapindex", "".join(lines))


def _sitemap_xml(root: str, body: str) -> bytes:
    head = f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} xmlns="{SITEMAP_NS}">\n'
    return (head + body + f"</{root}>\n").encode()


def _gzip_bomb(head: bytes, tail: bytes, size: int) -> bytes:
    """One gzip member of ``head``, ``size`` bytes (rounded up to MiB) of padding, ``tail``.

    The padding is spaces with an empty ``<pad/>`` every 64 KiB: well-formed XML that
    runs into a reader's byte limit, not into its other limits (no run of 256 KiB
    without a ">", no text node of 10 MB).  It is deflated once, after a full flush
    (which resets the window), so the same bytes stand for every MiB of it; the CRC
    is computed over all of it.  1 GiB: ~1.1 MB of gzip in ~0.2 s.
    """
    block = _BOMB_PAD * ((1 << 20) // len(_BOMB_PAD))
    count = -(-size // len(block))
    deflater = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    start = deflater.compress(head) + deflater.flush(zlib.Z_FULL_FLUSH)
    middle = deflater.compress(block) + deflater.flush(zlib.Z_FULL_FLUSH)
    end = deflater.compress(tail) + deflater.flush()
    crc = zlib.crc32(head)
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    total = len(head) + count * len(block) + len(tail)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, no name, mtime 0, max
    trailer = struct.pack("<II", crc, total & 0xFFFFFFFF)
    return b"".join((header, start, middle * count, end, trailer))


# -- the server ---------------------------------------------------------------


def _not_modified(request: Any, etag: str, modified: float) -> bool:
    """RFC 9110 13.2.2: If-None-Match decides when present; If-Modified-Since only without it
    (its one-second resolution cannot tell apart versions made within one second)."""
    inm = request.getHeader("If-None-Match")
    if inm is not None:
        return etag in {tag.strip() for tag in inm.split(",")} or inm.strip() == "*"
    return _not_modified_since(request.getHeader("If-Modified-Since"), modified)


def _not_modified_since(header: bytes | str | None, modified: float) -> bool:
    """Whether an If-Modified-Since header is at or after ``modified`` (to the second)."""
    if not header:
        return False
    try:
        since = email.utils.parsedate_to_datetime(
            header.decode() if isinstance(header, bytes) else header
        ).timestamp()
    except (TypeError, ValueError):
        return False
    return since >= int(modified)


def _http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


@dataclass(frozen=True)
class Fault:
    """Requests to ``host`` (index into the hosts) under ``prefix`` fail.

    ``kind`` "reset" aborts the connection (TCP RST) before answering; an HTTP
    status from 400 to 599 ("429", "503", "404"...) answers that status, with
    ``Retry-After: arg`` seconds for 429 and 503; "hang" never answers (the
    client's timeout ends it: a dead server behind a live address); "slow"
    answers after ``arg`` seconds; the hostile kinds of :mod:`webcrawl.demo.hostile`
    (bomb, huge, trickle, headers, charset, binary, htmlerror, loop, liar) answer
    that way.  A fault applies to ``/robots.txt`` only if its prefix is exactly
    ``/robots.txt``, or ``*``: every path of the host, robots.txt too (``4:*:hang``:
    a host that takes connections and never answers).
    ``times``: how many requests to each URL fail before it works; 0: always.
    ``until``: seconds after the first request the fault answers when it ends
    (the path recovers); 0: never.
    """

    host: int
    prefix: str
    kind: str = "reset"
    times: int = 0
    arg: float = 1.0
    until: float = 0.0

    KINDS = ("reset", "hang", "slow", *hostile.KINDS)

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``HOST:PREFIX:KIND[@UNTIL][:TIMES[:ARG]]``, e.g. ``1:/:reset:1`` (each URL of
        host 1 fails once), ``2:/:429:1:3`` (429 with Retry-After: 3, once per URL),
        ``0:/s2/:hang@30`` (/s2/ hangs for 30 s from its first request), ``3:/:slow:0:0.5``,
        ``5:*:hang@20`` (the whole host, robots.txt too, hangs for 20 s)."""
        parts = text.split(":")
        try:
            kind, _, until = parts[2].partition("@")
            times = int(parts[3]) if len(parts) > 3 else 0
            arg = float(parts[4]) if len(parts) > 4 else 1.0
            if len(parts) > 5:
                raise ValueError("too many fields")
            fault = cls(int(parts[0]), parts[1], kind, times, arg, float(until or 0))
        except (IndexError, ValueError):
            raise argparse.ArgumentTypeError(
                f"expected HOST:PREFIX:KIND[@UNTIL][:TIMES[:ARG]], got {text!r}"
            ) from None
        status = fault.kind.isdigit() and 400 <= int(fault.kind) < 600
        if fault.kind not in cls.KINDS and not status:
            raise argparse.ArgumentTypeError(f"unknown fault kind {fault.kind!r}")
        return fault


class DemoResource:
    """Answers requests for a :class:`DemoWeb` on every host (behind a twisted.web Site)."""

    def __init__(
        self,
        web: DemoWeb,
        log: IO[str] | None = None,
        latency: float = 0.0,
        faults: list[Fault] = (),
        changes: ChangeModel | None = None,
    ) -> None:
        self.web = web
        self.changes = changes
        self._noise = random.Random(f"{web.seed}:noise")
        self._versions: dict[str, int] = {}  # netloc+path -> version being answered (the log)
        self.log = log
        self.latency = latency
        self.faults = list(faults)
        self._failed: dict[str, int] = {}  # url -> faults served
        self._began: dict[int, float] = {}  # fault index -> when it first answered

    def _fault(self, netloc: str, path: str) -> Fault | None:
        now = time.monotonic()
        for i, fault in enumerate(self.faults):
            whole = fault.prefix == "*"
            if self.web.hosts[fault.host] != netloc or not (whole or path.startswith(fault.prefix)):
                continue
            robots = path.split("?", 1)[0] == "/robots.txt"
            if whole or robots == (fault.prefix == "/robots.txt"):
                # a fault's time runs from the first request it answers, not from the
                # server's start: a crawl that starts late (a loaded machine) sees it all
                if fault.until and now - self._began.setdefault(i, now) >= fault.until:
                    continue
                url = netloc + path
                if fault.times and self._failed.get(url, 0) >= fault.times:
                    return None
                self._failed[url] = self._failed.get(url, 0) + 1
                return fault
        return None

    def render(self, request: Any) -> Any:
        from twisted.internet import reactor
        from twisted.web.server import NOT_DONE_YET

        host = request.getHost()
        netloc = f"{host.host}:{host.port}"
        path = request.uri.decode("latin-1").split("#")[0]
        fault = self._fault(netloc, path)
        if fault is not None and fault.kind in hostile.KINDS:
            self._log(request, netloc, path, 302 if fault.kind == "loop" else 200)
            return hostile.answer(request, fault.kind, fault.arg, path.split("?")[0])
        if fault is not None and fault.kind == "hang":
            self._log(request, netloc, path, 0)  # status 0: no answer
            return NOT_DONE_YET  # never answered; the client gives up
        delay = self.latency + (fault.arg if fault is not None and fault.kind == "slow" else 0)
        if fault is not None and fault.kind == "slow":
            fault = None  # answered normally, only late
        if delay > 0:
            reactor.callLater(delay, self._finish, request, fault)
            return NOT_DONE_YET
        return self.respond(request, fault)

    def _finish(self, request: Any, fault: Fault | None) -> None:
        if request.finished or request._disconnected:
            return
        body = self.respond(request, fault)
        if request._disconnected:
            return
        if body:
            request.write(body)
        request.finish()

    def respond(self, request: Any, fault: Fault | None) -> bytes:
        host = request.getHost()
        netloc = f"{host.host}:{host.port}"
        path = request.uri.decode("latin-1").split("#")[0]
        url = f"http://{netloc}{path}"
        if fault is not None and fault.kind == "reset":
            self._log(request, netloc, path, 0)  # status 0: no answer
            request.channel.transport.abortConnection()
            return b""
        if fault is not None:  # an HTTP error status
            request.setResponseCode(int(fault.kind))
            if fault.kind in ("429", "503"):
                request.setHeader("Retry-After", f"{fault.arg:g}")
            request.setHeader("Content-Type", "text/plain")
            self._log(request, netloc, path, int(fault.kind))
            return b"slow down\n"
        page = self.web.pages.get(url)
        status = 200
        if path == "/__truth__" and self.changes is not None:
            body = json.dumps(self.changes.truth()).encode()
            request.setHeader("Content-Type", "application/json")
            request.setHeader("Content-Length", str(len(body)))
            return body
        if url in self.web.sitemap_files:
            return self._sitemap(request, netloc, path, url)
        if page is not None and page.kind == "html" and self.changes is not None:
            status, body, ctype = self._changing(request, page)
        elif page is None:
            status, body, ctype = 404, b"<html><body><h1>Not found</h1></body></html>", "text/html"
        elif page.kind == "redirect":
            status, body, ctype = 301, b"", "text/html"
            request.setHeader("Location", page.redirect_to)
        else:
            body, ctype = self.web.render(page)
            etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
            request.setHeader("ETag", etag)
            request.setHeader("Last-Modified", _http_date(LAST_MODIFIED))
            if _not_modified(request, etag, LAST_MODIFIED):
                status, body = 304, b""
        return self._send(request, netloc, path, status, body, ctype=ctype)

    def _send(
        self, request: Any, netloc: str, path: str, status: int, body: bytes, *, ctype: str
    ) -> bytes:
        """Answer with ``status`` and ``body`` (none to a HEAD), logged."""
        request.setResponseCode(status)
        request.setHeader("Content-Type", ctype)
        request.setHeader("Content-Length", str(len(body)))
        self._log(request, netloc, path, status)
        return b"" if request.method == b"HEAD" else body

    def _sitemap(self, request: Any, netloc: str, path: str, url: str) -> bytes:
        """A sitemap file, made for this moment; a .gz one is a file, not an encoding."""
        served = self.web.sitemap_file(url, time.time(), self.changes)
        assert served is not None
        body, ctype = served
        etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
        request.setHeader("ETag", etag)
        status = 200
        if request.getHeader("If-None-Match") is not None and _not_modified(request, etag, 0):
            status, body = 304, b""
        return self._send(request, netloc, path, status, body, ctype=ctype)

    def _changing(self, request: Any, page: DemoPage) -> tuple[int, bytes, str]:
        """A page of the changing web: its current version, with noise; or 304."""
        changes = self.changes
        assert changes is not None
        now = time.time()
        version = changes.version(page.url, now)
        self._versions[page.url.split("://", 1)[1]] = version
        modified = changes.last_modified(page.url, version)
        etag = f'"v{version}-{hashlib.sha1(page.url.encode()).hexdigest()[:8]}"'
        request.setHeader("ETag", etag)
        request.setHeader("Last-Modified", _http_date(modified))
        if _not_modified(request, etag, modified):
            return 304, b"", "text/html; charset=utf-8"
        body, ctype = self.web.render_version(page, version, now, self._noise)
        return 200, body, ctype

    def _log(self, request: Any, netloc: str, path: str, status: int) -> None:
        if self.log is None:
            return
        entry = {
            "t": round(time.time(), 6),
            "host": netloc,
            "method": request.method.decode(),
            "path": path,
            "status": status,
            "ua": (request.getHeader("User-Agent") or ""),
        }
        if self.changes is not None and netloc + path in self._versions:
            entry["v"] = self._versions.pop(netloc + path)  # the version this answer showed
        self.log.write(json.dumps(entry) + "\n")
        self.log.flush()


def listen(n_hosts: int, site_factory: Any, port: int = 0) -> tuple[list[str], list[Any]]:
    """Listen on 127.0.0.2.. 127.0.0.(n+1), one port for all; return the netlocs and ports."""
    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError

    for _ in range(20):
        ports = []
        try:
            first = reactor.listenTCP(port, site_factory(), interface="127.0.0.2")
            ports.append(first)
            number = first.getHost().port
            for i in range(1, n_hosts):
                ports.append(
                    reactor.listenTCP(number, site_factory(), interface=f"127.0.0.{2 + i}")
                )
            return [f"127.0.0.{2 + i}:{number}" for i in range(n_hosts)], ports
        except CannotListenError:
            for p in ports:
                p.stopListening()
            if port:
                raise
    raise RuntimeError("could not find a port free on all demo hosts")


def _crawl_delay(text: str) -> tuple[int, float]:
    host, _, seconds = text.partition(":")
    try:
        return int(host), float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HOST:SECONDS, got {text!r}") from None


def parse_pages(text: str) -> list[int]:
    """``"100"`` or ``"400,40"`` (pages of the first hosts; the last repeats)."""
    try:
        return [int(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N,N,...: {text!r}") from None


def serve(
    hosts: int,
    pages: int | list[int],
    *,
    seed: int = 0,
    port: int = 0,
    log: IO[str] | None = None,
    latency: float = 0.0,
    out: IO[str] = sys.stdout,
    faults: list[Fault] = (),
    crawl_delays: list[tuple[int, float]] = (),
    dead_hosts: list[int] = (),
    fanout: int = 2,
    cross_links: int = 10,
    change_speed: float = 0.0,
    periodic_share: float = 0.25,
    sitemaps: bool = False,
) -> None:
    """Serve the demo web until SIGTERM/SIGINT; print its address as one JSON line first."""
    from twisted.internet import reactor
    from twisted.web.resource import Resource
    from twisted.web.server import Site

    holder: dict[str, DemoResource] = {}

    class Root(Resource):
        isLeaf = True

        def render(self, request: Any) -> Any:
            return holder["resource"].render(request)

    def site_factory() -> Site:
        site = Site(Root())
        site.noisy = False
        site.log = lambda request: None  # we log ourselves
        return site

    netlocs, ports = listen(hosts + 1, site_factory, port)
    for index in dead_hosts:  # nothing listens there: connections are refused
        ports[index].stopListening()
    web = DemoWeb(netlocs, pages, seed, fanout, cross_links, sitemaps=sitemaps)
    for index, delay in crawl_delays:
        web.crawl_delays[netlocs[index]] = delay
    changes = None
    if change_speed > 0:
        html = [url for url, page in web.pages.items() if page.kind == "html"]
        # the lying host's pages seldom change, as on the sites that stamp "now" on every
        # entry: its claims are of changes that do not happen
        liar = web.lying_host
        slow = {u for u in html if liar is not None and urlsplit(u).netloc == liar}
        changes = ChangeModel(
            html, seed, change_speed, periodic_share=periodic_share, slow=frozenset(slow)
        )
    holder["resource"] = DemoResource(web, log, latency, faults, changes)
    info = {
        "hosts": netlocs,
        "seeds": web.seeds(),
        "pages": len(web.pages),
        "seed": seed,
        "pages_per_host": web.sizes,
        "fanout": fanout,
        "cross_links": cross_links,
        "change_speed": change_speed,
        "start": changes.start if changes else None,
        "sitemaps": sitemaps,
    }
    out.write(json.dumps(info) + "\n")
    out.flush()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: reactor.callFromThread(reactor.stop))
    reactor.run(installSignalHandlers=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="webcrawl serve-demo", description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    run(args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hosts", type=int, default=4, help="seed hosts (one more is out of scope)"
    )
    parser.add_argument(
        "--pages",
        type=parse_pages,
        default=[100],
        help="pages per host, or a list for the first hosts (400,40: one big host)",
    )
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument(
        "--fanout", type=int, default=2, help="random links per article within its section"
    )
    parser.add_argument(
        "--cross-links", type=int, default=10, help="articles per host linking to another host"
    )
    parser.add_argument("--port", type=int, default=0, help="port for every host (0: any free)")
    parser.add_argument("--log", help="append a JSON line per request to this file")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument(
        "--fault",
        type=Fault.parse,
        action="append",
        default=[],
        metavar="HOST:PREFIX:KIND[@S][:N[:ARG]]",
        help="fail requests to host index HOST under PREFIX (kind: reset, an HTTP status "
        "400-599, hang, slow, or hostile: bomb, huge, trickle, headers, charset, binary, "
        "htmlerror, loop, liar; KIND@S: only for the first S seconds), the first N times per "
        "URL (0 or none: always); ARG: Retry-After of 429/503, seconds of slow, GiB of bomb, "
        "MiB of huge and headers, seconds per byte of trickle; a PREFIX of /robots.txt "
        "applies to robots.txt (no other does), and a PREFIX of * to every path of the host, "
        "robots.txt too (HOST:*:hang: a host that never answers); repeatable",
    )
    parser.add_argument(
        "--dead-host",
        type=int,
        action="append",
        default=[],
        metavar="HOST",
        help="host index HOST refuses every connection (nothing listens); repeatable",
    )
    parser.add_argument(
        "--change-speed",
        type=float,
        default=0.0,
        metavar="X",
        help="HTML pages change (Poisson or periodic, simulated periods from 10 minutes to 90 "
        "days) on a clock X times faster than real time, with noise (timestamp, advert) in "
        "every response; GET /__truth__ gives the ground truth (0: static pages)",
    )
    parser.add_argument(
        "--periodic-share",
        type=float,
        default=0.25,
        help="with --change-speed: share of the pages that change periodically",
    )
    parser.add_argument(
        "--sitemaps",
        action="store_true",
        help="the first four seed hosts offer sitemaps: true, lying, listing pages no page "
        "links to (one cross-submitted), hostile (a loop, a 1 GiB gzip bomb)",
    )
    parser.add_argument(
        "--crawl-delay",
        type=_crawl_delay,
        action="append",
        default=[],
        metavar="HOST:SECONDS",
        help="robots.txt Crawl-delay for host index HOST; repeatable",
    )


def run(args: argparse.Namespace) -> None:
    log = open(args.log, "a", encoding="utf-8") if args.log else None  # noqa: SIM115
    try:
        serve(
            args.hosts,
            args.pages,
            seed=args.seed,
            port=args.port,
            log=log,
            latency=args.latency,
            faults=args.fault,
            crawl_delays=args.crawl_delay,
            dead_hosts=args.dead_host,
            fanout=args.fanout,
            cross_links=args.cross_links,
            change_speed=args.change_speed,
            periodic_share=args.periodic_share,
            sitemaps=args.sitemaps,
        )
    finally:
        if log:
            log.close()


if __name__ == "__main__":
    main()
