"""The frontier's own Scrapy signals (a module of their own: importing the scheduler
installs a reactor, which a middleware's import must not)."""

# Sent by the scheduler's spider_idle check when the whole crawl has no work left, just
# before crawl_out_of_work.  A component of this worker that may still add work to the
# crawl (the sitemap middleware with sitemaps parked for memory: those the frontier could
# not take back, which it therefore does not count) raises DontCloseSpider: the worker
# stays, and its crawl_out_of_work waits for a later check.  It holds this worker only:
# another finds the crawl out of work on its own.  (The handlers of spider_idle do
# not see each other's answers, so a hold there cannot keep crawl_out_of_work back.)
crawl_may_end = object()

# Sent by the scheduler's spider_idle check when the whole crawl has no work left
# (nothing queued, leased or submitted, no other worker busy) and this worker is about to
# close; not in WEBCRAWL_CONTINUOUS.  A handler with something to do before the end (the
# failed-path middleware's final re-probe) raises DontCloseSpider, and the worker stays.
# Scrapy's spider_idle alone does not say it: a worker gets it whenever it has nothing to
# do now, while others crawl.
crawl_out_of_work = object()
