"""A request fingerprinter other than Scrapy's own (for REQUEST_FINGERPRINTER_CLASS)."""

from scrapy.utils.request import RequestFingerprinter


class CustomFingerprinter(RequestFingerprinter):
    """Scrapy's, under another class: webcrawl cannot assume that it fingerprints a GET
    by its URL alone, so the spider and the scheduler ask it for every link."""
