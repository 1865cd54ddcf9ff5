"""webcrawl: a distributed, incremental web crawler built as a Scrapy project.

The core, in rooms: :mod:`webcrawl.frontier` (the shared frontier in Redis),
:mod:`webcrawl.incremental` (SimHash, change detection, revisits),
:mod:`webcrawl.failpath` (failed-path filtering), :mod:`webcrawl.urls`
(canonical URLs, scope, seeds) and :mod:`webcrawl.store` (the webtable); the
tools :mod:`webcrawl.demo` and :mod:`webcrawl.bench` stand beside them.  The
Scrapy adapters are :mod:`webcrawl.spiders`, :mod:`webcrawl.middlewares` and
:mod:`webcrawl.pipelines` (the repository's ``spiders/``, ``middlewares/`` and
``pipelines/``), turned on in any Scrapy project by the add-on, :class:`webcrawl.Addon`.
"""

from webcrawl._lazy import lazy

__getattr__ = lazy(__name__, {"Addon": "addon"})
