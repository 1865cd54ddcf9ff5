"""What is SQLite's own: processes creating one file together, its errors (the
contract every backend meets is in test_store_contract.py)."""

import multiprocessing

import pytest

from webcrawl.store import StoreError, open_store
from webcrawl.urlkey import url_to_key


def row(url, **fields):
    return {"key": url_to_key(url), "url": url, "status": 200, "fetched_at": 1.0, **fields}


def _writer(path, start):
    with open_store(f"sqlite:///{path}") as store:
        for i in range(start, start + 500, 50):
            store.put_pages([row(f"http://h.example/{j}") for j in range(i, i + 50)])


def test_processes_write_one_new_file_together(tmp_path):
    """Several processes create and write one new file at once (workers starting together)."""
    path = tmp_path / "w.db"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, n * 500)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with open_store(f"sqlite:///{path}") as store:
        assert store.count_pages() == 2000


def test_write_error_is_a_store_error(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/w.db") as store, pytest.raises(StoreError):
        store.put_pages([{"key": "k", "url": None}])  # url NOT NULL
