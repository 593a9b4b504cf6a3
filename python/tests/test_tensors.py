"""Tensors as numpy arrays, checked against what numpy, safetensors, onnx
and the torch fixtures' references (read by torch and by an independent
stdlib unpickler) read from the same files."""

import hashlib
import json
import sys
import zipfile

import pytest

import pparse

np = pytest.importorskip("numpy")


def c_bytes(a):
    """The elements in C order, little-endian where numpy knows the order."""
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.byteswap().view(a.dtype.newbyteorder("<"))
    return a.tobytes()


def load_npy_all(path):
    """Every array numpy.load reads from one file (several `numpy.save`s
    in a row), as numpy names them when the file is an npz member."""
    out = []
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        while f.tell() < size:
            try:
                out.append(np.load(f, allow_pickle=False, max_header_size=1 << 20))
            except ValueError:
                break
    return out


def same_array(got, want):
    assert got.shape == want.shape
    if want.dtype.names:
        # Records: pparse has their size, not their fields.
        assert got.dtype.itemsize == want.dtype.itemsize
    else:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.tobytes() == want.tobytes()


def test_every_npy_fixture_reads_as_numpy_reads_it(fixtures):
    checked = 0
    for path in sorted((fixtures / "npy").glob("*.npy")):
        want = load_npy_all(path) if path.stem != "object" else []
        with pparse.open(path) as src:
            got = src.tensors()
        if path.stem == "object":
            assert got == []  # its pickle is listed, not run
            continue
        assert len(got) == len(want), path.name
        for i, (t, w) in enumerate(zip(got, want)):
            assert t.name == (path.stem if i == 0 else f"{path.stem}[{i}]")
            assert t.status == "complete"
            same_array(t.numpy(), w)
            checked += 1
    assert checked > 40


@pytest.mark.parametrize("name, mapped", [("stored.npz", True), ("compressed.npz", False)])
def test_npz_arrays_equal_numpy_load(fixtures, name, mapped):
    path = fixtures / "npy" / name
    with np.load(path) as z:
        want = {k: z[k] for k in z.files}
    with pparse.open(path) as src:
        got = {t.name: t for t in src.tensors()}
    assert sorted(got) == sorted(want)
    views = 0
    for k, w in want.items():
        a = got[k].numpy()
        same_array(a, w)
        if a.size and a.base.mapped:
            views += 1
            assert not a.flags.writeable
    # Stored members are windows of the mapped file (an array is a view
    # where its bytes are aligned for its type); deflated ones are decoded
    # into a copy of their own.
    assert (views > 0) is mapped


def test_safetensors_equal_the_safetensors_package(fixtures):
    st = pytest.importorskip("safetensors.numpy")
    expect = json.loads((fixtures / "safetensors" / "expect.json").read_text())["files"]
    checked = 0
    for name, info in expect.items():
        path = fixtures / "safetensors" / name
        try:
            ref = st.load_file(str(path))
        except Exception:
            ref = {}
        with pparse.open(path) as src:
            got = {t.name: t for t in src.tensors()}
        for e in info["tensors"]:
            t = got[e["name"]]
            assert (t.dtype, list(t.shape), t.offset, t.length) == (
                e["dtype"], e["shape"], e["offset"], e["length"],
            )
            a = t.numpy(upcast=False)
            if e["name"] in ref:
                same_array(a, ref[e["name"]])
            if a.dtype.kind != "f" or a.dtype.itemsize > 1 or e["dtype"].startswith("F8"):
                if t.dtype in ("F4", "F6_E2M3", "F6_E3M2"):
                    continue
                assert hashlib.sha256(c_bytes(a)).hexdigest() == e["sha256"], e["name"]
            checked += 1
    assert checked >= 5


def test_onnx_initializers_equal_numpy_helper(fixtures):
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    checked = 0
    for name in ("tensors.onnx", "silero_vad.onnx", "attrs.onnx"):
        path = fixtures / "onnx" / name
        model = onnx.load(str(path))
        want = {}
        for init in model.graph.initializer:
            try:
                want[init.name] = numpy_helper.to_array(init)
            except Exception:
                pass  # strings numpy_helper cannot decode
        with pparse.open(path) as src:
            got = src.tensors()
        for t in got:
            if t.name not in want or t.dtype in ("BF16", "C32") or t.dtype.startswith("F8"):
                continue
            w = want[t.name]
            a = t.numpy()
            if t.dtype in ("I4", "U4", "I2", "U2", "F4"):
                # Packed: decoded to one int8/uint8/float32 each.
                assert a.shape == w.shape
                assert np.array_equal(a.astype(np.float64), w.astype(np.float64)), t.name
                checked += 1
                continue
            assert a.shape == w.shape and a.dtype == w.dtype.newbyteorder("<")
            assert c_bytes(a) == c_bytes(w), t.name
            checked += 1
    assert checked >= 5


def test_onnx_varint_fields_equal_numpy_helper(tmp_path):
    """Tensors whose values sit in int32_data, int64_data or uint64_data
    (make_tensor without raw=True) as protobuf varints: every type ONNX
    keeps there, against onnx.numpy_helper."""
    onnx = pytest.importorskip("onnx")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from onnx import TensorProto, helper, numpy_helper

    T = TensorProto
    cases = [
        ("i32", T.INT32, [-1, 0, 2**31 - 1, -(2**31)]),
        ("i16", T.INT16, [-32768, 0, 7, 32767]),
        ("u16", T.UINT16, [0, 65535, 300]),
        ("i8", T.INT8, [-128, -1, 0, 127]),
        ("u8", T.UINT8, [0, 255, 17]),
        ("bool", T.BOOL, [True, False, True]),
        ("i64", T.INT64, [-(2**63), -1, 2**62]),
        ("u64", T.UINT64, [0, 2**64 - 1, 5]),
        ("u32", T.UINT32, [0, 2**32 - 1, 9]),
        ("f16", T.FLOAT16, np.array([1.0, -2.0, 0.5, 65504.0], dtype=np.float16)),
        ("bf16", T.BFLOAT16, np.array([1.0, -3.5, 0.25], dtype=ml_dtypes.bfloat16)),
        ("e4m3", T.FLOAT8E4M3FN, np.array([1.0, -2.0, 448.0], dtype=ml_dtypes.float8_e4m3fn)),
        ("e5m2", T.FLOAT8E5M2, np.array([1.0, -0.5, 57344.0], dtype=ml_dtypes.float8_e5m2)),
        ("i4", T.INT4, np.array([-8, -1, 0, 1, 7], dtype=ml_dtypes.int4)),
        ("u4", T.UINT4, np.array([0, 15, 3], dtype=ml_dtypes.uint4)),
    ]
    inits = [helper.make_tensor(n, dt, [len(v)], v) for n, dt, v in cases]
    for t in inits:
        assert not t.HasField("raw_data"), t.name
    graph = helper.make_graph([], "g", [], [], initializer=inits)
    path = tmp_path / "varints.onnx"
    onnx.save(helper.make_model(graph), str(path))
    model = onnx.load(str(path))
    want = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    with pparse.open(path) as src:
        got = {t.name: t for t in src.tensors()}
    for name, w in want.items():
        t = got[name]
        assert t.status == "complete", (name, t.detail)
        a = t.numpy()
        assert a.shape == w.shape, name
        if w.dtype.kind in "iub":
            assert np.array_equal(a.astype(np.int64 if w.dtype != np.uint64 else np.uint64), w), name
        else:
            assert np.array_equal(a.astype(np.float64), w.astype(np.float64)), name


NATIVE = {"BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "F16", "F32", "F64",
          "C64", "C128", "BF16", "F8_E5M2", "F8_E4M3", "QI8", "QU8", "QI32"}


def test_torch_tensors_equal_the_references(fixtures):
    pytest.importorskip("ml_dtypes")
    checked = 0
    for ref_path in sorted((fixtures / "torch").glob("*.tensors.json")):
        refs = json.loads(ref_path.read_text())
        path = ref_path.with_name(ref_path.name[: -len(".tensors.json")])
        with pparse.open(path) as src:
            got = {}
            for t in src.tensors():
                got.setdefault(t.name, t)
        for r in refs:
            t = got.get(r["name"])
            if t is None or r["sha256"] is None or r["dtype"] not in NATIVE:
                continue
            assert list(t.shape) == r["shape"]
            a = t.numpy()
            assert hashlib.sha256(c_bytes(a)).hexdigest() == r["sha256"], (path.name, r["name"])
            checked += 1
    assert checked >= 30


def test_bfloat16_through_ml_dtypes_or_raw_bytes(fixtures, monkeypatch):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with pparse.open(fixtures / "torch" / "dtypes.pt") as src:
        t = next(t for t in src.tensors() if t.dtype == "BF16")
        a = t.numpy()
        assert a.dtype == ml_dtypes.bfloat16
        up = t.numpy(upcast=True)
        assert up.dtype == np.float32
        assert np.array_equal(up, a.astype(np.float32), equal_nan=True)
        monkeypatch.setitem(sys.modules, "ml_dtypes", None)
        with pytest.warns(pparse.DtypeWarning, match="ml_dtypes"):
            raw = t.numpy()
        assert raw.dtype == np.dtype("V2") and raw.tobytes() == a.tobytes()


def test_a_large_safetensors_tensor_is_not_copied(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    n = 64 << 20  # 256 MiB of float32
    big = np.arange(n, dtype=np.float32)
    st.save_file({"w": big, "b": np.ones(3, np.float16)}, str(tmp_path / "big.safetensors"))
    del big

    def anon_kib():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
        pytest.skip("no RssAnon in /proc/self/status")

    with pparse.open(tmp_path / "big.safetensors") as src:
        t = next(t for t in src.tensors() if t.name == "w")
        before = anon_kib()
        a = t.numpy()
        sample = np.array(a[:: 1 << 20])
        last = float(a[-1])
        after = anon_kib()
    assert a.base.mapped and not a.flags.writeable and not a.flags.owndata
    assert a.shape == (n,) and last == np.float32(n - 1)
    assert np.array_equal(sample, np.arange(0, n, 1 << 20, dtype=np.float64).astype(np.float32))
    # A copy would be 256 MiB of anonymous memory; the view is file pages.
    assert after - before < 32 << 10, (before, after)


def test_a_cut_tensor_raises_and_says_what_is_missing(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "m.safetensors"
    st.save_file({"a": np.arange(100, dtype=np.float32), "z": np.arange(50, dtype=np.int64)}, str(path))
    whole = path.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(whole[:-40])
    with pparse.open(cut) as src:
        ts = {t.name: t for t in src.tensors()}
    # safetensors writes the wider type first: `a` comes last, and is cut.
    assert ts["z"].status == "complete"
    assert np.array_equal(ts["z"].numpy(), np.arange(50, dtype=np.int64))
    assert ts["a"].status == "truncated"
    with pytest.raises(pparse.DamagedError) as e:
        ts["a"].numpy()
    assert e.value.status == "truncated" and "360 of 400 bytes" in e.value.reason
    assert e.value.offset == ts["a"].offset
    assert isinstance(e.value, pparse.Error)


def test_a_crc_mismatch_is_refused_unless_asked(fixtures, tmp_path):
    src_path = fixtures / "npy" / "stored.npz"
    data = bytearray(src_path.read_bytes())
    with zipfile.ZipFile(src_path) as z:
        info = z.infolist()[0]
        key = info.filename[: -len(".npy")]
    # The last byte of the first member's data: its CRC no longer matches.
    import struct

    n, m = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
    at = info.header_offset + 30 + n + m + info.compress_size - 1
    data[at] ^= 0xFF
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(data))
    with pparse.open(bad) as src:
        t = next(t for t in src.tensors() if t.name == key)
    # Stored bytes whose CRC fails: not proved right or wrong.
    assert t.status == "unverified" and "CRC" in t.detail
    with pytest.raises(pparse.DamagedError):
        t.numpy()
    a = t.numpy(strict=False)
    assert a.size > 0


def test_gguf_tensors_dequantize_as_the_gguf_package(fixtures):
    expect = json.loads((fixtures / "gguf" / "expect.json").read_text())["files"]
    checked = 0
    for name in ("model.gguf", "big.gguf"):
        with pparse.open(fixtures / "gguf" / name) as src:
            got = {t.name: t for t in src.tensors()}
        for e in expect[name]["tensors"]:
            t = got[e["name"]]
            assert (t.dtype, list(t.shape), t.status) == (e["type"], e["shape"], "complete")
            try:
                a = t.numpy()
            except pparse.Error as err:
                # Types pparse does not decode say so; never a wrong array.
                assert not isinstance(err, pparse.DamagedError)
                assert e["type"] not in ("F32", "F16", "Q4_0", "Q8_0", "Q4_K", "Q6_K")
                continue
            assert a.shape == tuple(e["shape"])
            flat = a.ravel()
            if "f32_bits" in e:
                bits = np.array(e["f32_bits"], dtype=np.uint32)
                mine = flat[: len(bits)].astype(np.float32).view(np.uint32)
                assert np.array_equal(mine, bits), (name, e["name"])
            elif "ints" in e:
                assert flat[: len(e["ints"])].tolist() == e["ints"]
            elif "values" in e:
                assert flat[: len(e["values"])].tolist() == e["values"]
            checked += 1
    assert checked >= 15


def test_flax_arrays_equal_what_flax_restores(fixtures):
    pytest.importorskip("ml_dtypes")
    expect = json.loads((fixtures / "msgpack" / "expect.json").read_text())["flax_model.msgpack"]
    with pparse.open(fixtures / "msgpack" / "flax_model.msgpack") as src:
        got = {t.name: t for t in src.tensors()}
    checked = 0
    for name, e in expect["restored"].items():
        t = got.get(name)
        if t is None:
            continue  # a chunked array: listed chunk by chunk
        a = t.numpy()
        assert list(a.shape) == e["shape"] and str(a.dtype) == e["dtype"], name
        assert hashlib.sha256(c_bytes(a)).hexdigest() == e["sha256"], name
        checked += 1
    assert checked >= 5


def test_hdf5_datasets_equal_what_h5py_reads(fixtures):
    """Every dataset pparse offers, contiguous and chunked (every chunk
    index and filter), as numpy arrays: the shape and the sha256 of the
    values h5py read (fixtures/hdf5/expect.json)."""
    expect = json.loads((fixtures / "hdf5" / "expect.json").read_text())
    checked = chunked = 0
    for name in ["basic-earliest.h5", "basic-latest.h5", "chunks-earliest.h5", "chunks-latest.h5"]:
        want = {o["path"]: o for o in expect["files"][name]["objects"] if o["kind"] == "dataset"}
        with pparse.open(fixtures / "hdf5" / name) as src:
            for t in src.tensors():
                w = want[t.name]
                assert t.status == "complete", (name, t.name)
                a = t.numpy()
                assert list(a.shape) == w["shape"], (name, t.name)
                got = hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
                assert got == w["sha256"], (name, t.name)
                checked += 1
                chunked += w["layout"] == "chunked"
    assert checked > 40 and chunked > 20
