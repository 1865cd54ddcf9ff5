"""Page stores behind one small interface (see :mod:`webcrawl.store.base`)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from scrapy.settings import BaseSettings

from webcrawl.store.base import Row, Store, StoreError

__all__ = ["Row", "Store", "StoreError", "open_store", "store_url_from_settings"]


def store_url_from_settings(settings: BaseSettings) -> str:
    """``STORE_URL``, or the SQLite file in ``WEBCRAWL_DATA_DIR``."""
    url = settings.get("STORE_URL")
    if url:
        return str(url)
    return f"sqlite:///{Path(settings.get('WEBCRAWL_DATA_DIR')) / 'webtable.sqlite3'}"


def open_store(url: str) -> Store:
    """The store for ``url``: ``sqlite:///relative.db``, ``sqlite:////abs/path.db``
    (``?timeout=SECONDS``: how long to wait for another writer's lock),
    ``hbase://host:port?table_prefix=...`` (see :mod:`webcrawl.store.hbase`)."""
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        from webcrawl.store.sqlite import SQLiteStore

        return SQLiteStore.from_url(url)
    if scheme == "hbase":
        from webcrawl.store.hbase import HBaseStore

        return HBaseStore(url)
    raise ValueError(
        f"STORE_URL: unsupported store {url!r} (supported: sqlite:///PATH, hbase://HOST:PORT?...)"
    )
