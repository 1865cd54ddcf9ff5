"""Typed setting reads that fail at start with the setting's name."""

from __future__ import annotations

from collections.abc import Iterable

from scrapy.settings import BaseSettings


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
