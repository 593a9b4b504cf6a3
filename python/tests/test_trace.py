"""``pparse.trace_io``: this process's reads, decodes, cache hits and
waits as Chrome trace-event JSON, adding up to what ``io_stats`` counts."""

import json
import os

import pparse


def test_a_trace_holds_the_work_io_stats_counts(fixtures, tmp_path):
    path = tmp_path / "io.json"
    before = pparse.io_stats()
    with pparse.trace_io(path):
        with pparse.open(fixtures / "nested.tar.gz") as src:
            with src.open("nested.tar/docs/guide.txt") as f:
                assert len(f.read()) == 40000
            src.tree()
    after = pparse.io_stats()
    events = json.loads(path.read_text())["traceEvents"]
    threads = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert "pparse-engine" in threads, threads
    work = [e for e in events if e["ph"] != "M"]
    assert all(e["pid"] == os.getpid() for e in work)
    assert all(e["ph"] == "i" or e["dur"] >= 0 for e in work)
    sums = {}
    for e in work:
        sums[e["name"]] = sums.get(e["name"], 0) + e.get("args", {}).get("bytes", 0)
    assert sums["decode"] == after["decoded"] - before["decoded"]
    assert sums.get("read", 0) == after["file_read"] - before["file_read"]
    # Nothing is written once the block is over.
    size = path.stat().st_size
    with pparse.open(fixtures / "nested.tar.gz") as src:
        src.tree()
    assert path.stat().st_size == size
