"""Tools beside the product, in the repository only (not installed): benchmarks that
compare webcrawl with other crawlers and with its own past, profiles, experiments, and
the local Redis Cluster that the tests and the cluster benchmark start."""
