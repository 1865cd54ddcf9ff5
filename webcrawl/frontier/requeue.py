"""The exception a pipeline raises when an item cannot be completed now.

Unknown is not absent, and "could not write" is not "written": a page whose
stored version could not be read, or whose row could not be written, must
not be acknowledged.  Raising :class:`Requeue` drops the item (nothing is
stored for it) and webcrawl's scheduler hands its request's lease back, so
the request returns to its host queue after ``wait`` seconds and is fetched
again, by this worker or another.
"""

from __future__ import annotations

from scrapy.exceptions import DropItem


class Requeue(DropItem):
    """Drop this item and fetch its request again in ``wait`` seconds."""

    def __init__(self, message: str, wait: float) -> None:
        # the pipeline logs each outage once; Scrapy's per-item "Dropped" line
        # (with the whole item) only at DEBUG
        super().__init__(message, log_level="DEBUG")
        self.wait = wait
