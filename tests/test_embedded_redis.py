"""The embedded Redis: start, join from other processes, last one out stops it."""

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

from webcrawl.frontier.embedded_redis import EmbeddedRedis, EmbeddedRedisError


def test_start_join_leave_keeps_data(tmp_path):
    first = EmbeddedRedis(tmp_path)
    a = first.client()
    first.join(a)
    a.set("k", "v")
    b = EmbeddedRedis(tmp_path).client()
    EmbeddedRedis(tmp_path).join(b)
    assert b.get("k") == b"v"
    assert not first.leave(a)  # b still connected: server stays
    assert b.get("k") == b"v"
    assert EmbeddedRedis(tmp_path).leave(b)  # last one out stops it
    assert not (tmp_path / "redis.pid").exists()
    c = first.client()
    first.join(c)  # restarted from its saved data
    assert c.get("k") == b"v"
    first.leave(c)


def test_another_process_joins(tmp_path):
    server = EmbeddedRedis(tmp_path)
    client = server.client()
    server.join(client)
    script = textwrap.dedent(f"""
        from webcrawl.frontier.embedded_redis import EmbeddedRedis
        e = EmbeddedRedis({str(tmp_path)!r}); c = e.client(); e.join(c)
        c.incr("n"); print(e.leave(c))
    """)
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "False"  # we are still connected
    assert client.get("n") == b"3"
    assert server.leave(client)


def test_stale_socket_and_pid_after_a_crash(tmp_path):
    server = EmbeddedRedis(tmp_path)
    client = server.client()
    server.join(client)
    pid = int((tmp_path / "redis.pid").read_text())
    subprocess.run(["kill", "-9", str(pid)], check=True)
    client.connection_pool.disconnect()
    fresh = server.client()
    server.join(fresh)  # starts a new server over the stale socket/pid files
    assert fresh.ping()
    assert int((tmp_path / "redis.pid").read_text()) != pid
    assert server.leave(fresh)


def test_long_data_dir_uses_a_short_socket_path(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = EmbeddedRedis(deep)
    assert len(str(server.socket_path)) < 100
    client = server.client()
    server.join(client)
    assert client.ping()
    assert server.leave(client)
    assert (deep / "redis.log").exists()
    # in this user's own directory (0700), not at a name anyone could take first in /tmp
    private = server.socket_path.parent
    assert private.stat().st_uid == os.getuid() and private.stat().st_mode & 0o777 == 0o700


def test_a_socket_directory_another_can_write_is_refused(tmp_path, monkeypatch):
    """Found by a review: the long-path socket was at a fixed name in /tmp, where another
    user's redis-server could stand in for ours (and its bindings are trusted)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    server = EmbeddedRedis(tmp_path / ("d" * 60) / ("e" * 60))
    server.socket_path.parent.mkdir(mode=0o777)
    server.socket_path.parent.chmod(0o777)
    with pytest.raises(EmbeddedRedisError, match="not a directory of this user's alone"):
        server.join(server.client())


def test_short_host_queues_of_small_entries_are_kept_compact(tmp_path):
    """A host queue of up to 16 typical entries (~120 bytes, past Redis's default 64)
    stays a compact list: about 120 bytes a queued URL instead of about 200.  A longer
    one is a skiplist, where a ZADD does not search the whole queue."""
    server = EmbeddedRedis(tmp_path)
    client = server.client()
    server.join(client)
    try:
        assert client.config_get("zset-max-ziplist-*") == {
            "zset-max-ziplist-value": "256",
            "zset-max-ziplist-entries": "16",
        }
        client.zadd("q", {b"%d|" % i + b"x" * 110: i for i in range(16)})
        assert client.object("encoding", "q") in (b"ziplist", b"listpack")
        client.zadd("q", {b"16|" + b"x" * 110: 16})
        assert client.object("encoding", "q") == b"skiplist"
    finally:
        server.leave(client)
