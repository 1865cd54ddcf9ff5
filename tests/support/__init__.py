"""Test equipment the suite starts: not part of the installed product."""
