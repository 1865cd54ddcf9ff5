"""Incremental crawling: SimHash, change detection, revisit policy.

:mod:`~webcrawl.incremental.simhash` fingerprints text (bit-identical to the
``simhash`` package), :mod:`~webcrawl.incremental.change` decides whether a page
really changed, :mod:`~webcrawl.incremental.revisit` plans the next visit from
the change history, :mod:`~webcrawl.incremental.revisit_sim` simulates it.  Pure
policies: no Scrapy, no network; ``pipelines/`` adapts them.
"""
