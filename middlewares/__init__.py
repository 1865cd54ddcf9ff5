"""Scrapy downloader and spider middlewares: thin adapters over :mod:`webcrawl`."""
