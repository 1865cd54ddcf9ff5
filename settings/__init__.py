"""Settings profiles: ``base`` (every default) and profiles built on it."""
