"""A real crawl's link graph, recorded once and replayed at scale by ``bench frontier``.

``webcrawl bench graph --site DIR ... --out FILE`` serves static sites with nginx (real
documentation, say: Debian's ``python3.11-doc`` and ``postgresql-doc-15``) on
``--hosts`` mirrors each, crawls them with ``scrapy crawl web`` and writes what every
page linked to (its ``outlinks``, of the crawl's own hosts: what its scope followed).
The mirrors' addresses are renamed ``www.s{site}m{mirror}.example``, so the file does not
depend on the port it was crawled on.

``webcrawl bench frontier --graph FILE`` replays it: its hosts are copied as often as
``--hosts`` asks (copy ``c`` of a host is ``c{c}.{host}``, and links stay within their
copy), and a synthetic worker's page has the links its original had.  So the links are a
real site's: the same navigation on many pages, deep trees, few links between hosts.

The file is gzipped JSON: ``{"format", "recorded", "seeds", "pages": {url: [links]}}``.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

FORMAT = "webcrawl-link-graph/1"


def host_of(url: str) -> str:
    return urlsplit(url).netloc


class Graph:
    """A recorded link graph, replayed in ``copies`` copies (see the module's doc)."""

    def __init__(self, pages: dict[str, list[str]], seeds: list[str], copies: int = 1) -> None:
        if not seeds:
            raise ValueError("a link graph needs seeds")
        if copies < 1:
            raise ValueError("copies must be >= 1")
        self.copies = copies
        self.seeds = list(seeds)
        self.hosts = sorted({host_of(u) for u in (*pages, *seeds)})
        # per page (without "http://"): its links without "http://", to be put in a copy
        self._links = {
            url.split("://", 1)[1]: [link.split("://", 1)[1] for link in links]
            for url, links in pages.items()
        }
        self._pages = list(self._links)

    @classmethod
    def load(cls, path: str | Path, copies: int = 1) -> Graph:
        try:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{path}: not a link graph ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path}: not a link graph of format {FORMAT}")
        return cls(data["pages"], data["seeds"], copies)

    def with_copies(self, copies: int) -> Graph:
        """This graph in ``copies`` copies (sharing its pages: nothing is loaded again)."""
        if copies < 1:
            raise ValueError("copies must be >= 1")
        twin = copy.copy(self)
        twin.copies = copies
        return twin

    @property
    def pages(self) -> int:
        """Pages of one copy (pages recorded, whose links are known)."""
        return len(self._links)

    @property
    def urls(self) -> int:
        """URLs of one copy: its pages, its seeds and every page they link to."""
        linked = {link for links in self._links.values() for link in links}
        return len(linked | set(self._links) | {s.split("://", 1)[1] for s in self.seeds})

    @property
    def links(self) -> int:
        """Links of one copy, over all its pages."""
        return sum(map(len, self._links.values()))

    def all_hosts(self) -> list[str]:
        """Every host of every copy."""
        return [f"c{c}.{host}" for c in range(self.copies) for host in self.hosts]

    def all_seeds(self) -> list[str]:
        """Every copy's seeds, copy by copy."""
        return [
            f"http://c{c}.{seed.split('://', 1)[1]}"
            for c in range(self.copies)
            for seed in self.seeds
        ]

    def links_of(self, url: str) -> list[str]:
        """The links of ``url`` (of a copy): its original's, in the same copy; none for a
        page the recorded crawl did not parse (not HTML, or not found)."""
        rest = url.split("://", 1)[1]
        copy, _, original = rest.partition(".")
        links = self._links.get(original)
        if not links:
            return []
        prefix = f"http://{copy}."
        return [prefix + link for link in links]

    def sample(self, rng: random.Random) -> str:
        """A page of a copy, at random (the benchmark's native floor)."""
        return f"http://c{rng.randrange(self.copies)}.{rng.choice(self._pages)}"


def rename(pages: Iterable[tuple[str, list[str]]], names: dict[str, str]) -> dict[str, list[str]]:
    """The pages of a crawl with their netlocs renamed by ``names``; links to netlocs not in
    it are dropped (the crawl's scope did not follow them), and duplicate links kept once
    (a page's links reach the scheduler once each)."""

    def renamed(url: str) -> str | None:
        parts = urlsplit(url)
        name = names.get(parts.netloc)
        if name is None or parts.scheme not in ("http", "https"):
            return None
        return parts._replace(scheme="http", netloc=name, fragment="").geturl()

    out: dict[str, list[str]] = {}
    for url, links in pages:
        page = renamed(url)
        if page is None:
            continue
        kept = (renamed(link) for link in links)
        out[page] = list(dict.fromkeys(link for link in kept if link is not None))
    return out


def record(
    seeds: list[str], names: dict[str, str], out: Path, *, settings: Iterable[str] = ()
) -> dict[str, int]:
    """Crawl from ``seeds`` with ``scrapy crawl web`` (politeness off) and write the link
    graph of the pages it parsed to ``out``; ``names``: the crawl's netlocs, renamed."""
    from webcrawl.bench.common import COMMON
    from webcrawl.demo import crawl_command, scrapy_env

    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-graph-"))
    try:
        items, log = workdir / "items.jsonl", workdir / "crawl.log"
        feeds = {str(items): {"format": "jsonlines", "fields": ["url", "kind", "outlinks"]}}
        cmd = crawl_command(
            seeds,
            workdir,
            *COMMON,
            "WEBCRAWL_CRAWL=graph",
            f"FEEDS={json.dumps(feeds)}",
            f"LOG_FILE={log}",
            *settings,
        )
        done = subprocess.run(cmd, env=scrapy_env(), stdout=subprocess.DEVNULL, check=False)
        if done.returncode:
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"the crawl failed (exit {done.returncode}):\n{tail}")
        rows = [json.loads(line) for line in items.read_text().splitlines() if line.strip()]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    parsed = ((r["url"], r.get("outlinks") or []) for r in rows if r.get("kind") == "html")
    pages = rename(parsed, names)
    renamed_seeds = list(rename(((s, []) for s in seeds), names))
    data = {
        "format": FORMAT,
        "recorded": {"hosts": len(names), "pages": len(pages)},
        "seeds": renamed_seeds,
        "pages": pages,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"))
    tmp.replace(out)
    return {"pages": len(pages), "links": sum(map(len, pages.values())), "hosts": len(names)}


def names_of(hosts: list[str], mirrors: int) -> dict[str, str]:
    """The served netlocs (site by site, ``mirrors`` each, as nginx_site_server serves
    them) renamed ``www.s{site}m{mirror}.example``."""
    return {netloc: f"www.s{i // mirrors}m{i % mirrors}.example" for i, netloc in enumerate(hosts)}


def run(args: argparse.Namespace) -> int:
    """``webcrawl bench graph``: record the link graph of a crawl of ``--site`` directories."""
    from webcrawl.demo.nginx import nginx_binary, nginx_site_server

    if not args.site:
        raise SystemExit("bench graph: give at least one --site DIR (a static site to crawl)")
    if args.hosts < 1:
        raise SystemExit("bench graph: --hosts must be >= 1")
    if not nginx_binary():
        raise SystemExit("bench graph: nginx serves the sites; install it (apt-get install nginx)")
    out = Path(args.out)
    with nginx_site_server([Path(s) for s in args.site], args.hosts) as info:
        print(
            f"Crawling {info['site']} on {args.hosts} mirror(s) each: {info['pages']} HTML "
            f"files on {len(info['hosts'])} hosts ...",
            flush=True,
        )
        counts = record(info["seeds"], names_of(info["hosts"], args.hosts), out)
    print(
        f"{out}: {counts['pages']} pages on {counts['hosts']} hosts, {counts['links']} links "
        f"({counts['links'] / max(counts['pages'], 1):.1f} a page).  Replay it with "
        f"`webcrawl bench frontier --graph {out}`."
    )
    return 0
