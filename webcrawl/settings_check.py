"""Typed setting reads that fail at start with the setting's name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from scrapy.settings import BaseSettings

if TYPE_CHECKING:
    from webcrawl.incremental.revisit import RevisitParams
    from webcrawl.sitemaps.trust import TrustParams


def _number(settings: BaseSettings, name: str, kind: type) -> float:
    value = settings.get(name)
    try:
        return kind(value)
    except (TypeError, ValueError):
        noun = "an integer" if kind is int else "a number"
        raise ValueError(f"{name} must be {noun}, got {value!r}") from None


def positive_int(settings: BaseSettings, name: str) -> int:
    value = int(_number(settings, name, int))
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def positive_float(settings: BaseSettings, name: str) -> float:
    value = _number(settings, name, float)
    if not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return value


def non_negative_float(settings: BaseSettings, name: str) -> float:
    value = _number(settings, name, float)
    if not value >= 0:
        raise ValueError(f"{name} must be zero or more, got {value!r}")
    return value


def choice(settings: BaseSettings, name: str, options: Iterable[str]) -> str:
    return check_choice(name, settings.get(name), options)


def check_choice(name: str, value: object, options: Iterable[str]) -> str:
    """``value`` lower-cased if it is one of ``options``; else a ValueError naming ``name``."""
    options = tuple(options)
    if str(value).lower() not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {value!r}")
    return str(value).lower()


def non_negative_int(settings: BaseSettings, name: str) -> int:
    value = _number(settings, name, int)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return int(value)


# Deployment settings read from the environment as well (settings/defaults.py):
# setting -> environment variable
ENVIRONMENT_SETTINGS = {
    "REDIS_URL": "REDIS_URL",
    "WEBCRAWL_DATA_DIR": "WEBCRAWL_DATA_DIR",
    "STORE_URL": "WEBCRAWL_STORE_URL",
    "WEBCRAWL_CRAWL": "WEBCRAWL_CRAWL",
}


# scrapy-redis settings with no meaning here: a value that asks for what they did fails
UNSUPPORTED = {
    "SCHEDULER_PERSIST": (
        False,
        "the frontier belongs to the crawl and a closing worker never wipes it; "
        "drop the setting, and use `webcrawl reset` to start a crawl over",
    ),
}


def refuse_unsupported(settings: BaseSettings) -> None:
    """Fail at start, naming the setting, on a value of :data:`UNSUPPORTED`, and on a
    ``WEBCRAWL_`` setting webcrawl does not have (a typo, or a name that changed: a
    setting nobody reads would be ignored silently)."""
    from webcrawl.addon import defaults

    for name, (refused, why) in UNSUPPORTED.items():
        value = settings.get(name)
        if value is not None and settings.getbool(name) == refused:
            raise ValueError(f"{name}={value}: {why}")
    known = defaults()
    unknown = sorted(n for n in settings if n.startswith("WEBCRAWL_") and n not in known)
    if unknown:
        ours = ", ".join(sorted(n for n in known if n.startswith("WEBCRAWL_")))
        raise ValueError(
            f"unknown setting {', '.join(unknown)}: webcrawl's WEBCRAWL_ settings are {ours} "
            "(the store's are STORE_*, the metrics' METRICS_*: see the settings reference)"
        )


def environment_overridden(settings: BaseSettings, environ: Mapping[str, str]) -> list[str]:
    """A message for each of :data:`ENVIRONMENT_SETTINGS` that ``environ`` sets but that
    has another value in ``settings`` (a settings file or ``-s`` won): never silently."""
    from scrapy.settings import SETTINGS_PRIORITIES

    where = {v: k for k, v in SETTINGS_PRIORITIES.items()}
    messages = []
    for name, variable in ENVIRONMENT_SETTINGS.items():
        wanted, value = environ.get(variable), settings.get(name)
        if wanted and str(value or "") != wanted:
            source = where.get(settings.getpriority(name) or 0, "a settings module")
            messages.append(
                f"{variable}={wanted} in the environment is overridden by "
                f"{name}={value or ''} ({source} settings)"
            )
    return messages


def revisit_params(settings: BaseSettings) -> RevisitParams:
    """The revisit policy's parameters from ``REVISIT_*`` settings (checked)."""
    from webcrawl.incremental.revisit import RevisitParams

    low = positive_float(settings, "REVISIT_MIN_INTERVAL")
    high = positive_float(settings, "REVISIT_MAX_INTERVAL")
    if high < low:
        raise ValueError(f"REVISIT_MAX_INTERVAL ({high}) must be >= REVISIT_MIN_INTERVAL ({low})")
    return RevisitParams(
        min_interval=low,
        max_interval=high,
        initial_interval=positive_float(settings, "REVISIT_INITIAL_INTERVAL"),
        prior_weight=positive_float(settings, "REVISIT_PRIOR_WEIGHT"),
        history=positive_int(settings, "REVISIT_HISTORY"),
    )


def trust_params(settings: BaseSettings) -> TrustParams:
    """How far sitemaps' lastmod is believed, from ``SITEMAP_TRUST_*`` settings (checked)."""
    from webcrawl.sitemaps.trust import TrustParams

    evidence = positive_int(settings, "SITEMAP_TRUST_MIN_EVIDENCE")
    window = positive_int(settings, "SITEMAP_TRUST_WINDOW")
    if window < 2 * evidence:
        raise ValueError(
            f"SITEMAP_TRUST_WINDOW ({window}) must be at least twice "
            f"SITEMAP_TRUST_MIN_EVIDENCE ({evidence})"
        )
    threshold = positive_float(settings, "SITEMAP_TRUST_THRESHOLD")
    if not threshold < 1:
        raise ValueError(f"SITEMAP_TRUST_THRESHOLD must be below 1, got {threshold!r}")
    return TrustParams(
        min_evidence=evidence,
        threshold=threshold,
        window=window,
        probes=non_negative_int(settings, "SITEMAP_TRUST_PROBES"),
        slack=non_negative_float(settings, "SITEMAP_LASTMOD_SLACK"),
    )
