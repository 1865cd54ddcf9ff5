"""Deprecated: moved to :mod:`webcrawl.frontier.queue` (kept so that settings naming
``webcrawl.queue.*`` still load, with a warning that names the new path)."""

from webcrawl._moved import forward

__getattr__ = forward("webcrawl.queue", "webcrawl.frontier.queue", ("HostQueue",))
