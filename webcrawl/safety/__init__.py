"""Safety against hostile links and servers: the address policy, crawl-trap bounds."""
