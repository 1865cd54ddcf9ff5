"""webcrawl: a distributed, incremental web crawler built as a Scrapy project.

The core, in rooms: :mod:`webcrawl.frontier` (the shared frontier in Redis),
:mod:`webcrawl.incremental` (SimHash, change detection, revisits),
:mod:`webcrawl.failpath` (seed 000's failed-path rules), :mod:`webcrawl.urls`
(canonical URLs, scope, seeds) and :mod:`webcrawl.store` (the webtable); the
tools :mod:`webcrawl.demo` and :mod:`webcrawl.bench` stand beside them.  The
Scrapy adapters live in the project's ``spiders/``, ``middlewares/`` and
``pipelines/``.
"""
