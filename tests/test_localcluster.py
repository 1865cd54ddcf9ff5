"""A real Redis Cluster on loopback: start, topology, data, failover, stop."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import redis
import redis.cluster

from tools.localcluster import SLOTS, LocalRedisCluster

pytestmark = pytest.mark.e2e

LOOPBACK_HEX = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it
TAGS = [f"{{t{i}}}" for i in range(30)]  # hash tags, spread over the slots


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One 3-master/1-replica cluster for the tests that do not break it."""
    with LocalRedisCluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


def cluster_client(cluster: LocalRedisCluster) -> redis.RedisCluster:
    nodes = [redis.cluster.ClusterNode(host, port) for host, port in cluster.startup_nodes()]
    return redis.RedisCluster(startup_nodes=nodes, socket_timeout=5)


def slot_owners(client: redis.Redis) -> dict[int, int]:
    """slot -> port of the master serving it, from CLUSTER SLOTS."""
    owners = {}
    for first, last, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
        for slot in range(first, last + 1):
            owners[slot] = master[1]
    return owners


def listening(pid: int) -> list[tuple[str, int]]:
    """(hex address, port) of every TCP socket in LISTEN state that ``pid`` holds."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed since the listing (a connection): not a listener
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.append((address, int(port, 16)))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process, or anything still runs in its session."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid_here = int(stat.parent.name)
        if (pid_here == pid or int(fields[3]) == pid) and fields[0] not in ("Z", "X"):
            return True  # fields[3]: the session id
    return False


def test_three_masters_three_replicas_all_slots(cluster):
    masters, replicas = cluster.masters(), cluster.replicas()
    assert len(masters) == 3 and len(replicas) == 3
    assert {r.master_port for r in replicas} == {m.port for m in masters}
    assert {n.port for n in cluster.nodes()} == set(cluster.ports)
    assert cluster.url == f"redis+cluster://127.0.0.1:{cluster.ports[0]}"
    assert cluster.start_seconds is not None and cluster.start_seconds < 15
    for port in cluster.ports:
        with cluster.client(port) as node:
            info = node.execute_command("CLUSTER", "INFO")
            assert b"cluster_state:ok" in info and b"cluster_slots_ok:16384" in info
            owners = slot_owners(node)
            assert len(owners) == SLOTS
            assert set(owners.values()) == {m.port for m in masters}


def test_cluster_client_writes_to_every_master(cluster):
    client = cluster_client(cluster)
    try:
        landed = {}
        for tag in TAGS:
            key = f"{tag}:k"
            assert client.set(key, tag)
            assert client.get(key) == tag.encode()
            landed[key] = client.get_node_from_key(key).port
        assert set(landed.values()) == {m.port for m in cluster.masters()}
        key, port = next(iter(landed.items()))
        with cluster.client(port) as owner:
            assert owner.get(key) == key.split(":")[0].encode()
        other = next(p for p in set(landed.values()) if p != port)
        with cluster.client(other) as elsewhere, pytest.raises(redis.exceptions.MovedError):
            elsewhere.get(key)
    finally:
        client.close()


def test_every_node_listens_on_loopback_only(cluster):
    for node in cluster.nodes():
        with cluster.client(node.port) as client:
            assert client.config_get("bind") == {"bind": "127.0.0.1"}
        sockets = listening(node.pid)
        assert {port for _, port in sockets} == {node.port, node.port + 10000}
        assert {address for address, _ in sockets} == {LOOPBACK_HEX}


def test_start_failure_raises_and_leaves_nothing_running(tmp_path):
    broken = LocalRedisCluster(tmp_path, node_timeout_ms=-1)  # redis-server rejects it
    with pytest.raises(RuntimeError, match="cluster-node-timeout"):
        broken.start(timeout=10)
    assert broken.ports
    assert not any(alive(broken.pid(port)) for port in broken.ports)


def test_failover_keeps_acknowledged_writes_then_stop_leaves_nothing(tmp_path):
    cluster = LocalRedisCluster(tmp_path / "failover").start()
    pids = [cluster.pid(port) for port in cluster.ports]
    client = cluster_client(cluster)
    try:
        # Write through each key's master on one connection, then WAIT for its replica.
        for tag in TAGS:
            port = client.get_node_from_key(tag).port
            with cluster.client(port, single_connection_client=True) as master:
                master.set(f"{tag}:before", tag)
                assert master.execute_command("WAIT", 1, 1000) == 1
        assert client.get(f"{TAGS[0]}:before") == TAGS[0].encode()

        dead = client.get_node_from_key(TAGS[0]).port
        replica_of_dead = {r.port for r in cluster.replicas() if r.master_port == dead}
        began = time.monotonic()
        cluster.kill(dead)
        assert not alive(pids[cluster.ports.index(dead)])
        promoted = cluster.wait_failover(dead, timeout=30)
        took = time.monotonic() - began
        assert promoted in replica_of_dead
        assert took < 20, took

        assert promoted in {m.port for m in cluster.masters()}
        assert dead not in {n.port for n in cluster.nodes()}
        with cluster.client(promoted) as node:
            assert node.info("replication")["role"] == "master"
            assert promoted in slot_owners(node).values()
            assert dead not in slot_owners(node).values()
        cluster.wait_ok(timeout=10)

        # The client made before the failover finds the new master by itself.
        for tag in TAGS:
            assert client.get(f"{tag}:before") == tag.encode()
            assert client.set(f"{tag}:after", tag)
        assert client.get_node_from_key(TAGS[0]).port == promoted
    finally:
        client.close()
        cluster.stop()
    assert not any(alive(pid) for pid in pids)
    cluster.stop()  # idempotent
    assert (tmp_path / "failover" / f"node-{dead}" / "redis.log").exists()  # kept
    cluster.stop(remove=True)
    assert not (tmp_path / "failover").exists()
