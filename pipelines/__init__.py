"""Scrapy item pipelines: thin adapters over :mod:`webcrawl`."""
