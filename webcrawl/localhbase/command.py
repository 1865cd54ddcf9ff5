"""``webcrawl hbase start|stop|status``: a standalone HBase in the data dir."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from scrapy.settings import Settings

from webcrawl.localhbase.launcher import LocalHBase, LocalHBaseError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument(
        "--home",
        help="where HBase keeps its data, logs and state (default: <WEBCRAWL_DATA_DIR>/hbase)",
    )
    parser.add_argument("--port", type=int, default=9090, help="start: the Thrift port")
    parser.add_argument(
        "--framed-compact",
        action="store_true",
        help="start: framed transport and compact protocol (default: buffered+binary, "
        "happybase's default and HBase's)",
    )
    parser.add_argument(
        "--table-prefix", default="crawl", help="the table_prefix in the printed store URL"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="start: seconds to wait for HBase to answer"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    home = Path(args.home or Path(settings.get("WEBCRAWL_DATA_DIR")) / "hbase")
    hbase = LocalHBase(home)
    try:
        if args.action == "start":
            return _start(hbase, args)
        if args.action == "stop":
            running = [name for name, _, alive in hbase.processes() if alive]
            hbase.stop()
            print(f"stopped {', '.join(running)}" if running else "HBase was not running")
            return 0
        return _status(hbase, args)
    except LocalHBaseError as exc:
        print(f"webcrawl hbase {args.action}: {exc}")
        return 1


def _start(hbase: LocalHBase, args: argparse.Namespace) -> int:
    transport, protocol = ("framed", "compact") if args.framed_compact else ("buffered", "binary")
    began = time.monotonic()
    gateway = hbase.start(args.port, transport, protocol, timeout=args.timeout)
    if (gateway.transport, gateway.protocol) != (transport, protocol):
        print(
            f"note: the running gateway speaks {gateway.transport}+{gateway.protocol}; "
            "`webcrawl hbase stop` first to change it"
        )
    print(f"HBase is up in {hbase.home} ({time.monotonic() - began:.1f} s); logs in {hbase.logs}")
    print(f"WEBCRAWL_STORE_URL={gateway.store_url(args.table_prefix)}")
    return 0


def _status(hbase: LocalHBase, args: Any) -> int:
    running = {name: (pid, alive) for name, pid, alive in hbase.processes()}
    if not any(alive for _, alive in running.values()):
        print(f"HBase is not running in {hbase.home}")
        return 3
    memory = hbase.memory()
    for name, (pid, alive) in running.items():
        rss = f", {memory[name] / 2**20:.0f} MiB" if name in memory else ""
        print(f"{name:<8} {'running' if alive else 'stopped'} (pid {pid}{rss})")
    try:
        hbase.wait_ready("thrift", timeout=0)
    except LocalHBaseError as exc:
        print(f"not answering: {exc}")
        return 1
    print(f"WEBCRAWL_STORE_URL={hbase.gateway('thrift').store_url(args.table_prefix)}")
    return 0
