"""Seals what workers put in Redis that widens the address policy: the seeds' bindings
(:mod:`webcrawl.safety.policy`).

Whoever can write the crawl's Redis could otherwise bind a host of their choice to
``169.254.169.254`` and every worker would fetch it.  So each binding carries an
HMAC-SHA256 under ``WEBCRAWL_SECRET``, a secret every worker and ``webcrawl submit``
of the crawl share and Redis never sees; a binding whose seal does not verify is
ignored, and never replaced (its host is then allowed no special-use address).  An
embedded Redis is this user's own (a socket in the data directory): its bindings are
trusted unsealed.  A worker with neither writes none.
"""

from __future__ import annotations

import hashlib
import hmac


class Seal:
    """Signs and checks records: ``local`` (embedded Redis) trusts every record;
    otherwise a record verifies only under the same non-empty ``secret``."""

    def __init__(self, secret: str, local: bool) -> None:
        self._key = secret.encode() if secret else b""
        self.local = local

    @property
    def trusted(self) -> bool:
        """Whether other workers' records can be trusted at all (sealed, or local)."""
        return self.local or bool(self._key)

    def sign(self, *parts: str) -> str:
        """The seal of ``parts`` ("" without a secret)."""
        if not self._key:
            return ""
        message = "\0".join(parts).encode("utf-8", "surrogatepass")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def verify(self, seal: object, *parts: str) -> bool:
        if self.local:
            return True
        if not self._key or not isinstance(seal, str):
            return False
        expected = self.sign(*parts).encode()
        return hmac.compare_digest(seal.encode("utf-8", "replace"), expected)
