"""Sitemaps (sitemaps.org): reading untrusted files within bounds, and how far a host's
lastmod is believed."""
