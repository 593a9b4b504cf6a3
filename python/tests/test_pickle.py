"""`Source.pickle_ops()` against `pickletools.genops` on the same bytes:
every pickle fixture (protocols 0-5, made by Python's pickle, and
hand-made ones), PyTorch checkpoints' `data.pkl`, damaged pickles and
pickles cut at every offset."""

import io
import math
import pickletools
import zipfile

import pytest

import pparse
from conftest import FIXTURES

PICKLES = sorted((FIXTURES / "pickle").glob("*.pkl"))
DAMAGED = sorted((FIXTURES / "pickle" / "damaged").glob("*.pkl"))


def genops(data, pickles=1):
    """What pickletools reads of `pickles` pickles one after the other, and
    the error it stops at (None when it reads them all)."""
    out = []
    f = io.BytesIO(data)
    try:
        for _ in range(pickles):
            for op, arg, pos in pickletools.genops(f):
                out.append((pos, op.name, arg))
    except ValueError as e:
        return out, e
    return out, None


def same(got, want):
    """Equal, with the same Python types, NaN equal to NaN."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[:2] == w[:2]
        assert type(g[2]) is type(w[2]), (g, w)
        if isinstance(w[2], float) and math.isnan(w[2]):
            assert math.isnan(g[2])
        else:
            assert g[2] == w[2], (g, w)


def ops_of(path, inner=""):
    """pparse's opcodes, and the DamagedError it ends with, if any."""
    got = []
    with pparse.open(path) as src:
        try:
            for op in src.pickle_ops(inner):
                got.append(op)
        except pparse.DamagedError as e:
            return got, e
    return got, None


def whole_pickles_are_pickletools(path, data):
    """pparse reads every pickle of `path` whole, as pickletools reads them
    from `data`, one after the other."""
    got, err = ops_of(path)
    assert err is None
    stops = sum(op == "STOP" for _, op, _ in got)
    want, werr = genops(data, stops)
    assert werr is None
    same(got, want)
    assert want[-1][1] == "STOP"


@pytest.mark.parametrize("path", PICKLES, ids=lambda p: p.name)
def test_opcodes_are_pickletools(path):
    whole_pickles_are_pickletools(path, path.read_bytes())


@pytest.mark.parametrize("path", DAMAGED, ids=lambda p: p.name)
def test_damaged_pickles_stop_where_pickletools_does(path):
    data = path.read_bytes()
    got, err = ops_of(path)
    want, werr = genops(data)
    if werr is None:
        # Damage pickletools does not see (the VM's own: a bad memo key, a
        # stack underflow): the opcodes are all there.
        assert err is None
        same(got, want)
        return
    assert err is not None, f"pickletools stops: {werr}"
    same(got, want)
    assert err.status in ("truncated", "corrupt") and err.reason
    # It stops at the opcode that goes wrong, after the last one read.
    assert err.offset > (got[-1][0] if got else -1)
    assert err.offset <= len(data)


@pytest.mark.parametrize("name", ["p4_objects.pkl", "p0_scalars.pkl"])
def test_cut_at_every_offset(tmp_path, name):
    data = (FIXTURES / "pickle" / name).read_bytes()
    path = tmp_path / name
    for cut in range(1, len(data)):
        path.write_bytes(data[:cut])
        got, err = ops_of(path)
        want, werr = genops(data[:cut])
        assert werr is not None
        same(got, want)
        assert err is not None and err.status == "truncated", cut
        assert err.offset <= cut


@pytest.mark.parametrize(
    "name", ["nested.pt", "protocol4.pt", "dtypes.pt", "lpips_v0.1_alex.pth", "legacy_views.pt"]
)
def test_a_torch_checkpoints_pickle(name):
    path = FIXTURES / "torch" / name
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            member = next(n for n in z.namelist() if n.endswith("/data.pkl"))
            data = z.read(member)
    else:
        # The legacy format: pickles one after the other, then the storages.
        data = path.read_bytes()
    whole_pickles_are_pickletools(path, data)
