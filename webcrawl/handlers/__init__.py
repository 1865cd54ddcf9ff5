"""Download handlers (Scrapy DOWNLOAD_HANDLERS)."""
