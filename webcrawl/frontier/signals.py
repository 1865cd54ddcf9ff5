"""The frontier's own Scrapy signal (a module of its own: importing the scheduler
installs a reactor, which a middleware's import must not)."""

# Sent by the scheduler's spider_idle check when the whole crawl has no work left
# (nothing queued, leased or submitted, no other worker busy) and this worker is about to
# close; not in WEBCRAWL_CONTINUOUS.  A handler with something to do before the end (the
# failed-path middleware's final re-probe) raises DontCloseSpider, and the worker stays.
# Scrapy's spider_idle alone does not say it: a worker gets it whenever it has nothing to
# do now, while others crawl.
crawl_out_of_work = object()
