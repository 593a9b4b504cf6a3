#!/usr/bin/env python3
"""Checks proto/onnx/onnx.proto against the schema compiled into the `onnx` package.

    /tmp/onnx-venv/bin/python proto/onnx/check_proto.py [FIXTURE_DIR]

Run it with a Python that has `onnx` (1.23.2 was used). protoc comes from
`grpc_tools`: imported directly when this Python has it, otherwise run as
`$PROTOC_PYTHON -m grpc_tools.protoc` (default /tmp/protoc-venv/bin/python; the
venv is created with `pip install grpcio-tools` when missing), so that
grpcio-tools' protobuf pin never touches the onnx venv.

1. Schema: onnx.proto is compiled to a FileDescriptorSet and compared, message by
   message (nested ones too), with onnx.onnx_ml_pb2.DESCRIPTOR: field names,
   numbers, labels, types, type names, oneof membership, packed option, default
   values, reserved ranges/names, enum values (as name -> number), file package,
   syntax and options.
2. Round trip: every *.onnx under FIXTURE_DIR (default fixtures/onnx) is parsed
   with a ModelProto class built from OUR descriptor set and with onnx.ModelProto;
   MessageToDict of both must be equal, and so must their re-serialised bytes.
   Also reported: whether re-serialising gives back the file's own bytes.

Prints every difference; exit status 0 when there is none.
"""

import glob
import os
import subprocess
import sys
import tempfile

import onnx
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.json_format import MessageToDict
from onnx import onnx_ml_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROTO = os.path.join(HERE, "onnx.proto")
FDP = descriptor_pb2.FieldDescriptorProto
LABEL = {v: k for k, v in FDP.Label.items()}
TYPE = {v: k for k, v in FDP.Type.items()}


def compile_proto():
    out = os.path.join(tempfile.mkdtemp(), "onnx.pb")
    args = ["-I" + HERE, "--descriptor_set_out=" + out, PROTO]
    try:
        from grpc_tools import protoc  # noqa: PLC0415
        rc = protoc.main(["protoc"] + args)
    except ImportError:
        py = os.environ.get("PROTOC_PYTHON", "/tmp/protoc-venv/bin/python")
        if not os.path.exists(py):
            venv = os.path.dirname(os.path.dirname(py))
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            subprocess.run([py, "-m", "pip", "install", "-q", "grpcio-tools"], check=True)
        rc = subprocess.run([py, "-m", "grpc_tools.protoc"] + args).returncode
    if rc != 0:
        sys.exit(f"protoc failed ({rc})")
    fds = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        fds.ParseFromString(f.read())
    assert len(fds.file) == 1
    return fds.file[0]


def field_facts(m, f):
    return {
        "name": f.name,
        "label": LABEL[f.label],
        "type": TYPE[f.type],
        "type_name": f.type_name,
        "oneof": m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None,
        "packed": f.options.packed if f.options.HasField("packed") else None,
        "default": f.default_value if f.HasField("default_value") else None,
    }


def cmp_enum(path, mine, ref, diffs):
    a = {v.name: v.number for v in mine.value}
    b = {v.name: v.number for v in ref.value}
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            diffs.append(f"{path}: value {k}: ours {a.get(k)}, onnx {b.get(k)}")


def cmp_message(path, mine, ref, diffs, stats):
    stats["messages"] += 1
    a = {f.number: field_facts(mine, f) for f in mine.field}
    b = {f.number: field_facts(ref, f) for f in ref.field}
    for n in sorted(set(a) | set(b)):
        stats["fields"] += 1
        if a.get(n) != b.get(n):
            diffs.append(f"{path} field {n}: ours {a.get(n)}\n{' ' * len(path)}        onnx {b.get(n)}")
    ra = sorted((r.start, r.end) for r in mine.reserved_range)
    rb = sorted((r.start, r.end) for r in ref.reserved_range)
    if ra != rb:
        diffs.append(f"{path}: reserved ranges ours {ra}, onnx {rb}")
    if sorted(mine.reserved_name) != sorted(ref.reserved_name):
        diffs.append(f"{path}: reserved names ours {sorted(mine.reserved_name)}, "
                     f"onnx {sorted(ref.reserved_name)}")
    if sorted(o.name for o in mine.oneof_decl) != sorted(o.name for o in ref.oneof_decl):
        diffs.append(f"{path}: oneofs differ")
    cmp_children(path, mine, ref, diffs, stats)


def cmp_children(path, mine, ref, diffs, stats):
    nested = "message_type" if isinstance(mine, descriptor_pb2.FileDescriptorProto) else "nested_type"
    ma = {m.name: m for m in getattr(mine, nested)}
    mb = {m.name: m for m in getattr(ref, nested)}
    for k in sorted(set(ma) | set(mb)):
        p = f"{path}.{k}" if path else k
        if k not in ma:
            diffs.append(f"{p}: message missing in ours")
        elif k not in mb:
            diffs.append(f"{p}: message not in onnx")
        else:
            cmp_message(p, ma[k], mb[k], diffs, stats)
    ea = {e.name: e for e in mine.enum_type}
    eb = {e.name: e for e in ref.enum_type}
    for k in sorted(set(ea) | set(eb)):
        p = f"{path}.{k}" if path else k
        if k not in ea:
            diffs.append(f"{p}: enum missing in ours")
        elif k not in eb:
            diffs.append(f"{p}: enum not in onnx")
        else:
            stats["enums"] += 1
            cmp_enum(p, ea[k], eb[k], diffs)


def check_schema(mine):
    ref = descriptor_pb2.FileDescriptorProto()
    onnx_ml_pb2.DESCRIPTOR.CopyToProto(ref)
    diffs = []
    stats = {"messages": 0, "fields": 0, "enums": 0}
    for attr in ("package", "syntax"):
        if getattr(mine, attr) != getattr(ref, attr):
            diffs.append(f"file {attr}: ours {getattr(mine, attr)!r}, onnx {getattr(ref, attr)!r}")
    if mine.options != ref.options:
        diffs.append(f"file options: ours {mine.options}, onnx {ref.options}")
    cmp_children("", mine, ref, diffs, stats)
    print(f"schema: compared {stats['messages']} messages, {stats['fields']} fields, "
          f"{stats['enums']} enums with onnx {onnx.__version__} ({ref.name}): "
          f"{len(diffs)} difference(s)")
    for d in diffs:
        print("  " + d)
    return diffs


def check_roundtrip(mine, fixture_dir):
    pool = descriptor_pool.DescriptorPool()
    pool.Add(mine)
    OurModel = message_factory.GetMessageClass(pool.FindMessageTypeByName("onnx.ModelProto"))
    bad = 0
    paths = sorted(glob.glob(os.path.join(fixture_dir, "**", "*.onnx"), recursive=True))
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        ours, theirs = OurModel(), onnx.ModelProto()
        ours.ParseFromString(data)
        theirs.ParseFromString(data)
        da = MessageToDict(ours, preserving_proto_field_name=True)
        db = MessageToDict(theirs, preserving_proto_field_name=True)
        sa, sb = ours.SerializeToString(), theirs.SerializeToString()
        ok = da == db and sa == sb
        bad += not ok
        print(f"  {os.path.relpath(p, fixture_dir)}: "
              f"{'same' if da == db else 'DIFFERENT'} MessageToDict, "
              f"{'same' if sa == sb else 'DIFFERENT'} re-serialisation, "
              f"re-serialised == file bytes: {sa == data}")
    print(f"round trip: {len(paths)} model(s), {bad} with differences")
    return bad


def main():
    fixture_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fixtures", "onnx")
    mine = compile_proto()
    diffs = check_schema(mine)
    bad = check_roundtrip(mine, fixture_dir)
    ok = not diffs and not bad
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
