"""Deprecated: moved to :mod:`webcrawl.frontier.scheduler` (kept so that settings naming
``webcrawl.scheduler.*`` still load, with a warning that names the new path)."""

from webcrawl._moved import forward

__getattr__ = forward("webcrawl.scheduler", "webcrawl.frontier.scheduler", ("Scheduler",))
