"""Pages of the demo web that change: a true change process per page, on a fast clock.

Each HTML page gets, from the seed and its URL, a change process in
*simulated* time: Poisson (mean period log-uniform from 10 minutes to 90
days) or, for ``periodic_share`` of the pages, periodic (hourly, daily or
weekly at a random phase).  The clock runs ``speed`` times faster than real
time from the server's start, and everything the server says is in real
time: a page with a simulated period of one day at speed 86 400 changes
every real second, and its Last-Modified header is the real time of its
last change.  Version 0 is what the page was before the server started.

A version is the page's stable text plus a "latest" block written for that
version (a real change: SimHash distance well above 3).  Every response
also carries noise that is not a change: a timestamp and one of a few
adverts.  ETag and Last-Modified follow the version, not the noisy bytes,
as a CMS would send them.  :meth:`ChangeModel.truth` is the ground truth
(``GET /__truth__`` on the server).
"""

from __future__ import annotations

import bisect
import math
import random
import time
from dataclasses import dataclass, field

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
# one length, so Content-Length moves only with the version (the HEAD pre-check)
ADVERTS = tuple(
    a.ljust(50, ".")
    for a in (
        "Advert: fresh coffee beans delivered weekly",
        "Advert: learn a language in ten minutes a day",
        "Advert: the city museum is open late on Fridays",
        "Advert: comfortable shoes for long walks",
        "Advert: a weekend by the sea, half price",
    )
)


@dataclass
class PageProcess:
    kind: str  # "poisson" or "periodic"
    period: float  # simulated seconds (mean period for Poisson)
    phase: float = 0.0  # periodic: first change, simulated seconds after the start
    rng: random.Random | None = None
    times: list[float] = field(default_factory=list)  # simulated change times, generated lazily

    def version(self, sim_t: float) -> int:
        """Changes in (0, sim_t]: the page's version at simulated time ``sim_t``."""
        if sim_t <= 0:
            return 0
        if self.kind == "periodic":
            return 0 if sim_t < self.phase else int((sim_t - self.phase) // self.period) + 1
        self._extend(sim_t)
        return bisect.bisect_right(self.times, sim_t)

    def change_time(self, version: int) -> float:
        """Simulated time at which ``version`` began (version >= 1)."""
        if self.kind == "periodic":
            return self.phase + (version - 1) * self.period
        while len(self.times) < version:
            self._extend((self.times[-1] if self.times else 0.0) + self.period)
        return self.times[version - 1]

    def _extend(self, sim_t: float) -> None:
        assert self.rng is not None
        t = self.times[-1] if self.times else 0.0
        while t <= sim_t:
            t += self.rng.expovariate(1.0 / self.period)
            self.times.append(t)


class ChangeModel:
    """The change processes of a set of pages and the clock they run on."""

    def __init__(
        self,
        urls: list[str],
        seed: int = 0,
        speed: float = 3600.0,
        *,
        periodic_share: float = 0.25,
        start: float | None = None,
        min_period: float = 10 * MINUTE,
        max_period: float = 90 * DAY,
        slow: frozenset[str] = frozenset(),
    ) -> None:
        """``slow``: pages that seldom change (Poisson, mean period 30 to 90 days)."""
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.start = time.time() if start is None else start
        self.processes: dict[str, PageProcess] = {}
        for url in urls:
            rng = random.Random(f"{seed}:changes:{url}")
            if url in slow:
                period = math.exp(
                    rng.uniform(math.log(30 * DAY), math.log(max(max_period, 30 * DAY)))
                )
                proc = PageProcess("poisson", period, rng=rng)
            elif rng.random() < periodic_share:
                period = rng.choice([HOUR, DAY, 7 * DAY])
                proc = PageProcess("periodic", period, phase=rng.uniform(0, period))
            else:
                period = math.exp(rng.uniform(math.log(min_period), math.log(max_period)))
                proc = PageProcess("poisson", period, rng=rng)
            self.processes[url] = proc

    def sim_time(self, now: float | None = None) -> float:
        """Simulated seconds since the start at real time ``now``."""
        return ((time.time() if now is None else now) - self.start) * self.speed

    def real_time(self, sim_t: float) -> float:
        return self.start + sim_t / self.speed

    def version(self, url: str, now: float | None = None) -> int:
        proc = self.processes.get(url)
        return 0 if proc is None else proc.version(self.sim_time(now))

    def last_modified(self, url: str, version: int) -> float:
        """Real time the page took ``version`` (version 0: a day of simulated time before)."""
        if version == 0:
            return self.real_time(-DAY)
        return self.real_time(self.processes[url].change_time(version))

    def truth(self, now: float | None = None) -> dict:
        """Every page's process, in real seconds, and its changes so far."""
        now = time.time() if now is None else now
        pages = {}
        for url, proc in self.processes.items():
            v = proc.version(self.sim_time(now))
            pages[url] = {
                "kind": proc.kind,
                "period": proc.period / self.speed,
                "version": v,
                "changes": [self.real_time(proc.change_time(i)) for i in range(1, v + 1)],
            }
        return {"speed": self.speed, "start": self.start, "now": now, "pages": pages}


_SYLLABLES = (
    "ka lo mi ne su ta ri vo pe zu ba do fi gu ha je ku le mo nu pa qui ro si te "
    "vu wa xe yo za bre cla dri fro glu pla sta tri"
).split()


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))


def prose(rng: random.Random, paragraphs: int) -> str:
    """Paragraphs with a vocabulary of their own: made-up names, words and figures."""
    out = []
    for _ in range(paragraphs):
        sentences = [
            f"{_word(rng).title()} {_word(rng)} {rng.randint(2, 9999)} {_word(rng)} "
            f"{_word(rng)} {_word(rng).title()} {_word(rng)} {rng.randint(10, 999)}."
            for _ in range(6)
        ]
        out.append("<p>" + " ".join(sentences) + "</p>")
    return "".join(out)


def latest_block(url: str, version: int, seed: int) -> str:
    """The part of a page written for ``version``: news with names and numbers of its own.

    Its own vocabulary (made-up names, figures) matters: the demo's stable
    prose repeats a few hundred words, and an edition written in those same
    words would barely move a SimHash, unlike real news.
    """
    rng = random.Random(f"{seed}:{url}:v{version}")
    return f'<div class="latest"><h2>Latest (edition {version})</h2>{prose(rng, 6)}</div>'


def noise_block(now: float, rng: random.Random) -> str:
    """What changes on every response without being a change: a timestamp and an advert."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now))
    advert = rng.choice(ADVERTS)
    return f'<p class="stamp">Page generated {stamp} UTC.</p><div class="advert">{advert}</div>'
