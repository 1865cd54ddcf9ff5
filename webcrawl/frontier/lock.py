"""A lock over one Redis key, released and extended only by its holder.

Every lock the crawl's workers share goes through :class:`RedisLock`::

    lock = RedisLock(server, keys.robots_lock(origin), ttl=60, owner=worker_id)
    if lock.acquire():
        try:
            ...  # the work; lock.extend() every ttl/3 if it can last longer
        finally:
            lock.release()  # a RedisError here is the caller's to log

- **Token-checked.**  Each acquisition stores a fresh random token; release and
  extend compare it and delete or push back only a lock that is still this
  one's (one Lua script each).  A holder whose lock expired while it worked, and
  was taken by another, leaves the other's lock alone: its release and extend
  return False.
- **Redis's clock.**  As everywhere in the crawl, the times shared between
  workers are Redis's own (``TIME`` in the scripts; see
  :mod:`webcrawl.frontier.scripts`), so a worker whose clock is off takes no
  lock early.  Tests pass ``now`` to simulate it instead: a simulation that
  advances ``now`` sees the lock expire, without sleeping.
- **One code path for both clocks.**  The key's value is ``<token>|<deadline>``
  and a lock whose deadline is before now is free, whatever the clock.  The key
  also expires on its own (``PX``): after ``ttl`` on Redis's clock, where it is
  the same deadline; with a simulated clock after :data:`SIMULATED_EXPIRY` at
  least, which only keeps a simulation's abandoned key from living forever (a
  real expiry of ``ttl`` would free a simulated lock while its simulated time
  stands still, between two steps that take longer than ``ttl``).  All holders of
  a key use the same clock.
- **One key per call**, so it works the same on a Redis Cluster.  A value not of
  that form (no deadline) reads as held until its key expires.
- **Errors propagate**: a ``RedisError`` from any call reaches the caller, who
  knows what the lock guarded and logs it.  Release forgets the token first, so
  a release that failed leaves the key to its expiry and the object free to
  acquire again.

No context manager: the crawl's locks are all taken without waiting ("someone
else does it" is an answer, not an error) and let go in a callback or a
``finally`` that logs a failed release, which ``with`` would hide.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

#: Seconds a simulated lock's key lives at least (its real ``PX``): a day.
SIMULATED_EXPIRY = 86_400.0

# The lock's clock and value, for the scripts below.  ARGV[1] of each is "now": ''
# for Redis's clock, else the caller's (a simulation).  A value is
# '<token>|<deadline>' (split at its last '|': a token may contain one); a value of
# another form has no known holder and no deadline.
_PRELUDE = """
local function clock(given)
  if given ~= '' then return tonumber(given) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local now = clock(ARGV[1])
local token, deadline = nil, nil
local value = redis.call('GET', KEYS[1])
if value then
  token, deadline = string.match(value, '^(.*)|([^|]*)$')
  deadline = tonumber(deadline) or math.huge
end
local ours = token == ARGV[2] and deadline >= now
-- store the lock as ARGV[2]'s until now + ttl (ARGV[3], s), the key expiring in ARGV[4] ms
local function hold()
  local expires = string.format('%.17g', now + tonumber(ARGV[3]))
  redis.call('SET', KEYS[1], ARGV[2] .. '|' .. expires, 'PX', ARGV[4])
  return expires
end
"""

# KEYS: the lock.  ARGV: now, token, ttl, expiry.  Takes a free or expired lock;
# returns its deadline, or nil when another holds it.
_ACQUIRE = f"""{_PRELUDE}
if value and deadline >= now then return nil end
return hold()
"""

# KEYS: the lock.  ARGV: now, token, ttl, expiry.  Pushes the deadline of a lock
# still ours to now + ttl; returns it, or nil when the lock is not ours.
_EXTEND = f"""{_PRELUDE}
if not ours then return nil end
return hold()
"""

# KEYS: the lock.  ARGV: now, token.  Deletes the key if it names us (an expired
# value of ours too, as tidying); 1 if the lock was still ours, 0 if not (then
# another's lock is left as it is).
_RELEASE = f"""{_PRELUDE}
if token == ARGV[2] then redis.call('DEL', KEYS[1]) end
return ours and 1 or 0
"""

# KEYS: the lock.  ARGV: now, token.  1 if the lock is ours.
_OWNED = f"""{_PRELUDE}
return ours and 1 or 0
"""


class RedisLock:
    """A lock over the Redis key ``key``, held for ``ttl`` seconds unless extended.

    ``owner`` (e.g. the worker id) starts the token, so that whoever looks at the
    key sees who holds it.  The object holds at most one acquisition at a time.
    """

    def __init__(self, client: Any, key: str, ttl: float, *, owner: str = "") -> None:
        if not ttl > 0:
            raise ValueError(f"a lock's ttl must be positive seconds, not {ttl!r}")
        self.client = client
        self.key = key
        self.ttl = float(ttl)
        self.owner = owner
        self.token: str | None = None
        #: when the lock expires unless extended (on its clock: Redis's, or the
        #: simulated one), as of the last acquire or extend; None when not held
        self.deadline: float | None = None
        self._acquire = client.register_script(_ACQUIRE)
        self._extend = client.register_script(_EXTEND)
        self._release = client.register_script(_RELEASE)
        self._owned = client.register_script(_OWNED)

    def __repr__(self) -> str:
        state = f"held until {self.deadline!r}" if self.held else "not held"
        return f"<RedisLock {self.key!r} {state}>"

    @property
    def held(self) -> bool:
        """Whether this object believes it holds the lock: acquired, and neither
        released nor found lost since.  It does not watch the clock: a lock past its
        :attr:`deadline` may still read as held here (:meth:`owned` asks Redis)."""
        return self.token is not None

    def acquire(self, *, now: float | None = None) -> bool:
        """Take the lock, if it is free or expired, with a fresh token; False if
        another holds it.  ``now``: a simulated clock (tests), else Redis's."""
        if self.token is not None:
            raise RuntimeError(f"{self!r}: acquired twice (release it first)")
        token = secrets.token_hex(16)
        if self.owner:
            token = f"{self.owner}:{token}"
        deadline = self._run(self._acquire, token, now, self.ttl)
        if deadline is None:
            return False
        self.token, self.deadline = token, float(deadline)
        return True

    def extend(self, ttl: float | None = None, *, now: float | None = None) -> bool:
        """Push the lock's expiry back to ``ttl`` seconds (default: the lock's) from
        now, if it is still ours; False (and no longer held) if it is not."""
        if self.token is None:
            return False
        ttl = self.ttl if ttl is None else float(ttl)
        if not ttl > 0:
            raise ValueError(f"a lock's ttl must be positive seconds, not {ttl!r}")
        deadline = self._run(self._extend, self.token, now, ttl)
        if deadline is None:
            self.token = self.deadline = None
            return False
        self.deadline = float(deadline)
        return True

    def release(self, *, now: float | None = None) -> bool:
        """Let the lock go if it is still ours: True if it was (and is now free),
        False if it was not (expired, maybe taken by another, whose lock stays)."""
        token, self.token, self.deadline = self.token, None, None
        if token is None:
            return False
        return bool(self._release(keys=[self.key], args=[_now_arg(now), token]))

    def owned(self, *, now: float | None = None) -> bool:
        """Whether Redis says the lock is ours now (it forgets a lock found lost)."""
        if self.token is None:
            return False
        if self._owned(keys=[self.key], args=[_now_arg(now), self.token]):
            return True
        self.token = self.deadline = None
        return False

    def _run(self, script: Any, token: str, now: float | None, ttl: float) -> Any:
        """Run the acquire or extend script: the key expires after ``ttl`` on Redis's
        clock, or after a day at least with a simulated one."""
        seconds = ttl if now is None else max(ttl, SIMULATED_EXPIRY)
        expiry_ms = max(1, math.ceil(seconds * 1000))
        return script(keys=[self.key], args=[_now_arg(now), token, repr(ttl), expiry_ms])


def _now_arg(now: float | None) -> str:
    """The scripts' "now": Redis's clock (''), unless a test simulates time."""
    return "" if now is None else repr(float(now))
