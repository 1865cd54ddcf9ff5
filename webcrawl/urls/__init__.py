"""URLs: canonical form and row keys, crawl scope, seed lists.

:mod:`~webcrawl.urls.urlkey` canonicalises URLs and makes Nutch 2 row keys,
:mod:`~webcrawl.urls.scope` decides which hosts a crawl follows,
:mod:`~webcrawl.urls.seeds` reads seed files with per-line errors.  No Scrapy.
"""

from webcrawl.urls.urlkey import BadURLError, canonical_url, key_to_url, url_to_key

__all__ = ["BadURLError", "canonical_url", "key_to_url", "url_to_key"]
