"""A host queue's members and their scores: ``<sequence number>|<data>``, scored
``-priority``.

A member's sequence number has 20 digits: a number of the step call that pushed it, in
its shard (15 digits: the shard's ``seq`` counter; a call takes one for each
``PUSHES_PER_CALL`` of its pushes), then its place among that number's pushes (5
digits, the worker's).  A shard that used up 10**15 numbers refuses pushes.  The
requests of a host with one priority share one score, so Redis orders them by their
text: by sequence number, first pushed first; and the number keeps identical
(``dont_filter``) requests apart.  The step script only joins a call number to what the
worker sent (``indexed``): no number is printed a request (``tools.bench redis_profile``
counts what that saves).
"""

from __future__ import annotations

CALL_DIGITS, INDEX_DIGITS = 15, 5
SEQ_DIGITS = CALL_DIGITS + INDEX_DIGITS
# pushes a call number holds
PUSHES_PER_CALL = 10**INDEX_DIGITS - 1


def score(priority: int) -> bytes:
    """The score of a request of ``priority`` (higher priorities first)."""
    return b"%d" % -priority


def priority_of(score: bytes | float) -> int:
    """The priority a score stands for."""
    return -round(float(score))


def indexed(index: int, data: bytes) -> bytes:
    """What the worker sends of the ``index``-th push of a call number (1 to
    ``PUSHES_PER_CALL``): the step script puts the number before it."""
    if not 0 < index <= PUSHES_PER_CALL:
        raise ValueError(f"push {index} of a call: 1 to {PUSHES_PER_CALL}")
    return b"%0*d|%s" % (INDEX_DIGITS, index, data)


def member(seq: int, data: bytes) -> bytes:
    """The member of the request ``data`` with sequence number ``seq``."""
    return b"%0*d|%s" % (SEQ_DIGITS, seq, data)


def split(member: bytes) -> tuple[int, bytes]:
    """``(sequence number, data)`` of a member."""
    seq, data = member.split(b"|", 1)
    return int(seq), data
