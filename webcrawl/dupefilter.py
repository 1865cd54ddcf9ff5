"""Deprecated: moved to :mod:`webcrawl.frontier.dupefilter` (kept so that settings naming
``webcrawl.dupefilter.*`` still load, with a warning that names the new path)."""

from webcrawl._moved import forward

_NAMES = ("RedisDupeFilter", "RedisBloomDupeFilter")
__getattr__ = forward("webcrawl.dupefilter", "webcrawl.frontier.dupefilter", _NAMES)
