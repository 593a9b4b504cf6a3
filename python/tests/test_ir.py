"""`Source.ir()` on programs printed and saved by paddlepaddle (3.0.0b2
and 3.3.1), checked against the op counts Paddle itself reported for them
(fixtures/paddle/make.py), and on damaged copies."""

import collections

import pytest

import pparse
from conftest import FIXTURES

PROGRAMS = sorted(
    p
    for p in (FIXTURES / "paddle").iterdir()
    if p.suffix in (".txt", ".json")
    and not p.name.endswith((".counts.json", ".params.json"))
)


def count(ops, out):
    for op in ops:
        out[op["name"]] += 1
        for region in op.get("regions", []):
            for block in region["blocks"]:
                count(block["ops"], out)
    return out


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_ops_are_the_ones_paddle_counts(path):
    import json

    want = json.loads(path.with_name(path.stem + ".counts.json").read_text())
    with pparse.open(path) as src:
        ir = src.ir()
    assert len(ir["programs"]) == 1
    assert dict(count(ir["programs"][0]["ops"], collections.Counter())) == want
    assert [d for d in ir["diagnostics"] if d["severity"] == "error"] == []


def test_a_log_of_several_programs():
    with pparse.open(FIXTURES / "paddle" / "v3-print_ir.log") as src:
        ir = src.ir()
    assert len(ir["programs"]) >= 2
    assert all(p["ops"] for p in ir["programs"])


def test_a_cut_program_says_where_it_breaks(tmp_path):
    text = (FIXTURES / "paddle" / "v3-control.txt").read_bytes()
    full = pparse.open(FIXTURES / "paddle" / "v3-control.txt").ir()["programs"][0]
    n = len(count(full["ops"], collections.Counter()))
    path = tmp_path / "cut.txt"
    for cut in range(len(text) // 4, len(text) - 2, max(1, len(text) // 23)):
        path.write_bytes(text[:cut])
        with pparse.open(path) as src:
            ir = src.ir()
        errors = [d for d in ir["diagnostics"] if d["severity"] == "error"]
        assert errors, f"cut at {cut}: no error"
        # What was read before the cut is kept.
        for p in ir["programs"]:
            assert all(op["end"] <= cut for op in p["ops"])
        assert len(count(sum((p["ops"] for p in ir["programs"]), []), collections.Counter())) <= n


def test_garbage_is_no_program(tmp_path):
    path = tmp_path / "noise.txt"
    path.write_bytes(bytes(range(256)) * 50)
    with pparse.open(path) as src:
        ir = src.ir()
    assert ir["programs"] == []
