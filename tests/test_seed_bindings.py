"""The seeds' bindings in Redis (webcrawl/safety/policy.py, seal.py), on a real Redis:
only sealed ones are trusted, none is replaced, garbage breaks nothing."""

from __future__ import annotations

import json
import logging

from webcrawl.safety.bindings import SeedBindings, record_bindings, sealed_binding
from webcrawl.safety.seal import Seal

KEY = "webcrawl:{t}:seed_bindings"
SECRET = Seal("s3cret", local=False)


def test_a_sealed_binding_is_trusted_and_the_first_one_stays(redis_client):
    bindings = SeedBindings(redis_client, KEY, SECRET)
    assert record_bindings(bindings, ["http://127.0.0.2:8080/"]) == (
        {("127.0.0.2", 8080): ["127.0.0.2"]},
        set(),
    )
    # another worker, the same secret: reads it; its own lookup does not replace it
    other = SeedBindings(redis_client, KEY, Seal("s3cret", local=False))
    assert other.all() == {("127.0.0.2", 8080): ["127.0.0.2"]}
    assert other.share(("127.0.0.2", 8080), ["10.9.9.9"]) == ["127.0.0.2"]
    # a worker with another secret, or none, trusts nothing of it
    assert SeedBindings(redis_client, KEY, Seal("other", local=False)).all() == {}
    assert SeedBindings(redis_client, KEY, Seal("", local=False)).all() == {}


def test_a_record_that_does_not_verify_is_left_alone_and_said_once(redis_client, caplog):
    field = "intranet|80"
    forged = json.dumps({"addresses": ["169.254.169.254"], "seal": "0" * 64})
    redis_client.hset(KEY, field, forged)
    bindings = SeedBindings(redis_client, KEY, SECRET)
    with caplog.at_level(logging.WARNING):
        assert bindings.share(("intranet", 80), ["10.0.0.5"]) == ["10.0.0.5"]  # its own
        assert bindings.all() == {}
    assert redis_client.hget(KEY, field).decode() == forged  # never replaced
    assert sum("do not verify" in r.getMessage() for r in caplog.records) == 1


def test_a_worker_that_cannot_seal_writes_nothing(redis_client):
    bindings = SeedBindings(redis_client, KEY, Seal("", local=False))
    assert bindings.share(("intranet", 80), ["10.0.0.5"]) == ["10.0.0.5"]
    assert not redis_client.exists(KEY)


def test_garbage_in_the_hash_breaks_nothing(redis_client):
    for field, value in {
        "a|80": "[" * 100_000 + "]" * 100_000,
        "b|80": json.dumps({"addresses": ["10.0.0.1"], "seal": "é" * 64}),
        "c|80": json.dumps({"addresses": [1, 2], "seal": "x"}),
        "d|80": b"\xff\xfe",
        "e|x": sealed_binding(SECRET, KEY, "e|x", ["10.0.0.1"]),
        "f|80": sealed_binding(SECRET, KEY, "g|80", ["10.0.0.1"]),  # moved to another field
    }.items():
        redis_client.hset(KEY, field, value)
    assert SeedBindings(redis_client, KEY, SECRET).all() == {}
    local = SeedBindings(redis_client, KEY, Seal("", local=True))  # trusts what it can read
    assert local.all() == {("b", 80): ["10.0.0.1"], ("f", 80): ["10.0.0.1"]}


def test_a_name_that_does_not_resolve_is_not_bound(redis_client):
    bindings = SeedBindings(redis_client, KEY, SECRET)
    assert record_bindings(bindings, ["http://nothing.invalid/"]) == ({}, set())
    assert not redis_client.exists(KEY)
