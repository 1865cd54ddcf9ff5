"""``webcrawl monitor``: a live status page of a crawl, and its crawl-wide metrics."""
