"""Comparisons, profiles and experiments: ``python -m tools.bench WHAT`` from a checkout
(the capacity benchmarks a user runs are ``webcrawl bench``, in the package)."""
