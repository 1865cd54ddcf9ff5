"""How far a host's sitemap ``lastmod`` is believed: as far as it has matched what we
saw (plain logic, time passed in).

Many sites stamp every entry with the time the sitemap was made, so a crawler that
refetches whatever claims to be newer refetches everything (Nutch does not let sitemaps
touch known URLs at all).  We detect real changes ourselves (SimHash, 304s), so a
host's claims can be checked:

- **A claim**: an entry's ``lastmod`` is later than our last fetch of the page (by more
  than ``slack``, for clocks and rounding): "it changed since you looked".
- **Its test**: the refetch the claim asked for.  Changed (SimHash distance above the
  threshold): *confirmed*; unchanged or a 304: *refuted*.
- **The verdict** (:meth:`HostTrust.state`): under ``min_evidence`` tested claims the
  host is *unknown*; then *trusted* when the share confirmed (with one pseudo-claim of
  each kind: ``(confirmed + 1) / (tested + 2)``) reaches ``threshold``, else
  *distrusted*.  Counts are halved once they pass ``window``, so the verdict follows a
  host that changes its ways, in either direction.
- **What a claim does** (:func:`act_on_claims`): a trusted host's claims all move their
  pages' revisits to now; an unknown host's, ``probes`` of them a sitemap (to learn);
  a distrusted host's are ignored but for one a sitemap, so that it can earn trust
  back.  Probes are drawn at random among the claims, so that a host is judged on
  all its pages, not on the first few its file lists.  The rest wait for the revisit
  the page's own history planned.  (The spider also bounds them per host and refresh:
  a trusted host's acted claims by its URL budget, its probes by ``window``.)
- **A new page's prior** (:func:`prior_interval`): its ``lastmod`` says how long it has
  stood unchanged, a first guess at its change period (bounded); without one its
  ``changefreq``, a weaker guess.  A trusted host's prior may shorten the first
  interval or lengthen it; an unknown host's only lengthen it (a claim of a recent
  change is what a liar makes of every page); a distrusted host's is not used.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN, TRUSTED, DISTRUSTED = "unknown", "trusted", "distrusted"
SLACK = 60.0  # seconds a lastmod must be past our last fetch to claim a change (clocks)
CHANGEFREQ_SECONDS = {
    "always": 0.0,  # (bounded by the minimum interval)
    "hourly": 3600.0,
    "daily": 86400.0,
    "weekly": 7 * 86400.0,
    "monthly": 30 * 86400.0,
    "yearly": 365 * 86400.0,
    "never": float("inf"),  # (bounded by the maximum interval)
}


@dataclass(frozen=True)
class TrustParams:
    min_evidence: int = 5  # tested claims before a verdict
    threshold: float = 0.6  # share of claims confirmed (smoothed) to be trusted
    window: int = 100  # tested claims kept (older ones halved away)
    probes: int = 3  # claims tested per sitemap read of an unknown or distrusted host
    slack: float = SLACK  # seconds a lastmod must be past our last fetch to claim a change

    def __post_init__(self) -> None:
        if self.min_evidence < 1 or self.window < 2 * self.min_evidence or self.probes < 0:
            raise ValueError("need min_evidence >= 1, window >= 2 * min_evidence, probes >= 0")
        if self.slack < 0:
            raise ValueError("slack must be >= 0")
        if not 0.0 < self.threshold < 1.0:
            raise ValueError("threshold must be between 0 and 1")


@dataclass(frozen=True)
class HostTrust:
    """A host's tested claims (recent: halved past the window)."""

    confirmed: float = 0.0
    refuted: float = 0.0

    @property
    def tested(self) -> float:
        return self.confirmed + self.refuted

    @property
    def precision(self) -> float:
        """Share of its claims that were true, smoothed (0.5 with no evidence)."""
        return (self.confirmed + 1.0) / (self.tested + 2.0)

    def state(self, params: TrustParams) -> str:
        if self.tested < params.min_evidence:
            return UNKNOWN
        return TRUSTED if self.precision >= params.threshold else DISTRUSTED

    def record(self, changed: bool, params: TrustParams) -> HostTrust:
        """This trust after one more tested claim (``changed``: what the refetch found)."""
        confirmed = self.confirmed + (1.0 if changed else 0.0)
        refuted = self.refuted + (0.0 if changed else 1.0)
        if confirmed + refuted > params.window:
            confirmed, refuted = confirmed / 2, refuted / 2
        return HostTrust(confirmed, refuted)


def claims_change(
    lastmod: float | None, last_fetch: float | None, now: float, slack: float = SLACK
) -> bool:
    """Whether ``lastmod`` claims a change since ``last_fetch`` (by more than ``slack``;
    a lastmod in the future claims nothing: a clock or a lie, not a change we can have
    missed)."""
    if lastmod is None or last_fetch is None:
        return False
    return last_fetch + slack < lastmod <= now + slack


def act_on_claims(claims: int, trust: HostTrust, params: TrustParams) -> tuple[int, int]:
    """Of ``claims`` claimed changes of one host in one sitemap: (acted on because the
    host is trusted, tested as probes); the rest are ignored.  An unknown host's claims
    are tested ``probes`` at a time, a distrusted host's one at a time (enough to earn
    trust back over a few reads, at a refetch a read)."""
    state = trust.state(params)
    if state == TRUSTED:
        return claims, 0
    return 0, min(claims, params.probes if state == UNKNOWN else min(1, params.probes))


def prior_interval(
    lastmod: float | None,
    changefreq: str | None,
    fetched_at: float,
    bounds: tuple[float, float],
) -> float | None:
    """A new page's first revisit interval from its sitemap entry (None: the entry says
    nothing usable): the time since its ``lastmod``, else its ``changefreq``, within
    ``bounds`` (min, max seconds).  The caller lets a host not yet trusted only lengthen
    the interval: "changed a minute ago" from a host that says it of every page would
    have every page refetched at the minimum."""
    low, high = bounds
    if lastmod is not None and lastmod <= fetched_at + SLACK:
        return min(high, max(low, fetched_at - lastmod))
    if changefreq in CHANGEFREQ_SECONDS:
        return min(high, max(low, CHANGEFREQ_SECONDS[changefreq]))
    return None
