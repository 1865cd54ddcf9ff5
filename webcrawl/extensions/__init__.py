"""Scrapy extensions of webcrawl (``EXTENSIONS``)."""
