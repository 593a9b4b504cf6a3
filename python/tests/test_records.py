"""`Source.records()` on W&B logs, checked against what wandb's own reader
and protobuf's MessageToDict made of the same files (the fixtures'
`*.records.jsonl`, see fixtures/wandb/README.md), and on damaged copies."""

import json
import random
import tarfile

import pytest

import pparse

LOGS = ["current-core", "v0175-legacy", "v0175-core-buggy"]


def reference(fixtures, name):
    with open(fixtures / "wandb" / f"{name}.records.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("name", LOGS)
def test_records_are_wandbs_own(fixtures, name):
    want = reference(fixtures, name)
    with pparse.open(fixtures / "wandb" / f"{name}.wandb") as src:
        got = list(src.records(with_damage=True))
    assert got == want
    history = [r for r in got if r["type"] == "history"]
    # The items are decoded: a dict of values, as wunderbar gives them.
    assert history[3]["data"]["item"]["loss"] == pytest.approx(0.25)


def test_records_of_one_type(fixtures):
    want = [r for r in reference(fixtures, "current-core") if r["type"] in ("run", "exit")]
    with pparse.open(fixtures / "wandb" / "current-core.wandb") as src:
        assert list(src.records(type=["run", "exit"])) == want
        assert list(src.records(type="exit")) == want[-1:]


def test_a_log_in_a_tar_gz(fixtures, tmp_path):
    log = fixtures / "wandb" / "v0175-legacy.wandb"
    tgz = tmp_path / "run.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(log, arcname="wandb/run-x.wandb")
    want = reference(fixtures, "v0175-legacy")
    with pparse.open(tgz) as src:
        assert list(src.records()) == want
        assert list(src.records("run.tar/wandb/run-x.wandb")) == want
    # Cut inside the log: the records before the cut are whole, and the
    # damage says where the bytes end.
    blob = tgz.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(blob[: len(blob) * 2 // 3])
    with pparse.open(cut) as src:
        got = list(src.records(with_damage=True))
    recs = [r for r in got if isinstance(r, dict)]
    damage = [d for d in got if isinstance(d, pparse.Damage)]
    assert 0 < len(recs) < len(want)
    assert recs == want[: len(recs)]
    assert damage and all(d.status in ("truncated", "corrupt") for d in damage)


def test_no_log_is_an_error(fixtures):
    with pparse.open(fixtures / "nested.tar.gz") as src:
        with pytest.raises(pparse.Error):
            next(src.records())


def damaged_copies(blob, seed=7):
    """Cuts at many offsets, flipped bytes, spans overwritten with zeros and
    with random bytes: (label, bytes)."""
    rng = random.Random(seed)
    for cut in sorted({7, 100, 1000, 32767, 32775, 40000, len(blob) // 2, len(blob) - 3}):
        yield f"cut at {cut}", blob[:cut]
    for _ in range(6):
        at = rng.randrange(7, len(blob))
        b = bytearray(blob)
        b[at] ^= 0x40
        yield f"flip at {at}", bytes(b)
    for fill in ("zeros", "random"):
        for _ in range(3):
            at = rng.randrange(7, len(blob) - 3000)
            n = rng.randrange(10, 3000)
            b = bytearray(blob)
            b[at : at + n] = bytes(n) if fill == "zeros" else rng.randbytes(n)
            yield f"{fill} over {at}..{at + n}", bytes(b)


@pytest.mark.parametrize("name", ["current-core", "v0175-core-buggy"])
def test_damaged_logs_keep_every_whole_record_and_say_where(fixtures, tmp_path, name):
    blob = (fixtures / "wandb" / f"{name}.wandb").read_bytes()
    by_offset = {r["offset"]: r for r in reference(fixtures, name)}
    path = tmp_path / "x.wandb"
    for label, bad in damaged_copies(blob):
        path.write_bytes(bad)
        with pparse.open(path) as src:
            got = list(src.records(with_damage=True))
        recs = [r for r in got if isinstance(r, dict)]
        damage = [d for d in got if isinstance(d, pparse.Damage)]
        # Every record given is one wandb's reader reads from the whole
        # file, at the same place, byte for byte.
        for r in recs:
            assert by_offset.get(r["offset"]) == r, label
        # A log cut between two records is a shorter log: nothing to say.
        at_boundary = label.startswith("cut") and len(bad) in by_offset.keys() | {7}
        if len(recs) < len(by_offset) and not at_boundary:
            assert damage, f"{label}: records are missing and no damage is said"
        for d in damage:
            assert d.status in ("truncated", "corrupt") and d.reason, label
            assert 0 <= d.offset <= d.end <= len(blob), label
        # Without damage items: the same records.
        with pparse.open(path) as src:
            assert list(src.records()) == recs, label


def test_a_log_cut_at_every_chunk_keeps_the_records_before(fixtures, tmp_path):
    want = reference(fixtures, "v0175-legacy")
    blob = (fixtures / "wandb" / "v0175-legacy.wandb").read_bytes()
    path = tmp_path / "x.wandb"
    for r in want[1::9]:
        for cut in (r["offset"], r["offset"] + 5):
            path.write_bytes(blob[:cut])
            with pparse.open(path) as src:
                got = [x for x in src.records() if x["offset"] < r["offset"]]
            assert got == [w for w in want if w["offset"] < r["offset"]]


def test_stopping_early_ends_the_reader(fixtures):
    with pparse.open(fixtures / "wandb" / "current-core.wandb") as src:
        it = src.records()
        first = next(it)
        it.close()
        assert first["type"] == "header"
        # A second listing after an abandoned one reads from the start.
        assert next(src.records())["number"] == first["number"]


def rss_anon():
    """Anonymous resident memory in bytes, or None where /proc has none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def long_log(fixtures, path, mib):
    """A log of about `mib` MiB: the fixture's first block over and over,
    each copy a block of whole records (its last one cut: damage)."""
    blob = (fixtures / "wandb" / "v0175-legacy.wandb").read_bytes()
    block = 32768
    copy = blob[7:block] + bytes(7)
    with open(path, "wb") as f:
        f.write(blob[:block])
        for _ in range((mib << 20) // block):
            f.write(copy)


def stream_peak(path):
    """Records, damage items, and the peak growth of anonymous memory
    while streaming them. The session's parse of the log's structure (a
    node per record, which grows with the log) is let finish first, so
    that only the stream is measured, whatever the two threads' timing."""
    n = damage = 0
    peak = 0
    with pparse.open(path) as src:
        src.tree()
        base = rss_anon()
        for i, r in enumerate(src.records(with_damage=True)):
            if isinstance(r, pparse.Damage):
                damage += 1
            else:
                n += 1
            if i % 2000 == 0:
                peak = max(peak, rss_anon() - base)
    return n, damage, peak


def test_a_long_log_streams_in_bounded_memory(fixtures, tmp_path):
    """Streaming a log 8 times longer does not take 8 times the memory:
    a few batches are held, whatever the length (every record's dict at
    once would take several times the log's size)."""
    if rss_anon() is None:
        pytest.skip("no RssAnon in /proc/self/status")
    short, long = tmp_path / "short.wandb", tmp_path / "long.wandb"
    long_log(fixtures, short, 8)
    long_log(fixtures, long, 64)
    n8, d8, peak8 = stream_peak(short)
    n64, d64, peak64 = stream_peak(long)
    assert n64 > 7 * n8 > 7 * 30_000 and d64 > 7 * d8 > 0
    assert peak64 < 2 * peak8 + (16 << 20), (peak8, peak64)
    assert peak64 < long.stat().st_size, (peak8, peak64)
