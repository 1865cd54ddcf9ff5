"""The project's spiders (``SPIDER_MODULES``)."""
