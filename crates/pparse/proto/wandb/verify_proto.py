#!/usr/bin/env python3
"""Check proto/wandb/wandb.proto against the installed wandb package.

  python verify_proto.py DESCRIPTOR_SET.pb [FIXTURE.wandb ...]

DESCRIPTOR_SET.pb is protoc's output for wandb.proto (made with --include_imports):
  python -m grpc_tools.protoc -I proto/wandb --include_imports \
      --descriptor_set_out=/tmp/x.pb proto/wandb/wandb.proto

1. Structure: every message/enum in wandb.proto must match the wandb package's own
   descriptor of the same full name: same fields (name, number, type, label,
   referenced type, proto3 optional, oneof) and enum values. Types of the package
   missing from wandb.proto are listed (they must be unreachable from Record).
2. Round trip: each record of each fixture (read with fixtures/wandb/make.py's strict
   reader, blocks at 7+k*32768 for files named *buggy*) is parsed with wandb's
   Record, re-encoded, and decoded with a Record class built from the descriptor set;
   MessageToDict (preserving_proto_field_name) of both must be equal, and so must the
   two re-encodings. Run it with the wandb venv whose schema you want to compare.
"""

import importlib.util
import os
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.json_format import MessageToDict

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_PY = os.path.join(HERE, "..", "..", "fixtures", "wandb", "make.py")


def field_sig(f):
    label = "repeated" if getattr(f, "is_repeated", None) or (
        getattr(f, "label", None) == 3) else "single"
    return (f.name, f.number, f.type, label,
            f.message_type.full_name if f.message_type else
            f.enum_type.full_name if f.enum_type else None,
            f.containing_oneof.name if f.containing_oneof else None,
            getattr(f, "has_presence", None))


def cmp_msg(a, b, diffs):
    fa = sorted(field_sig(f) for f in a.fields)
    fb = sorted(field_sig(f) for f in b.fields)
    if fa != fb:
        diffs.append(f"{a.full_name}: fields differ:\n  ours {fa}\n  wandb {fb}")
    na = {n.name: n for n in a.nested_types}
    nb = {n.name: n for n in b.nested_types}
    if set(na) != set(nb):
        diffs.append(f"{a.full_name}: nested types {sorted(na)} vs {sorted(nb)}")
    for k in set(na) & set(nb):
        cmp_msg(na[k], nb[k], diffs)
    ea = {e.name: e for e in a.enum_types}
    eb = {e.name: e for e in b.enum_types}
    if set(ea) != set(eb):
        diffs.append(f"{a.full_name}: nested enums {sorted(ea)} vs {sorted(eb)}")
    for k in set(ea) & set(eb):
        cmp_enum(ea[k], eb[k], diffs)


def cmp_enum(a, b, diffs):
    va = [(v.name, v.number) for v in a.values]
    vb = [(v.name, v.number) for v in b.values]
    if va != vb:
        diffs.append(f"{a.full_name}: enum values {va} vs {vb}")


def show_diff(a, b, pfx, depth=0):
    if isinstance(a, dict) and isinstance(b, dict) and depth < 6:
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                show_diff(a.get(k), b.get(k), f"{pfx}{k}.", depth + 1)
    else:
        print(f"  {pfx}: wandb={str(a)[:150]} ours={str(b)[:150]}")


def main(argv):
    if not argv:
        sys.exit(__doc__)
    import wandb
    from wandb.proto import wandb_internal_pb2 as orig

    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(open(argv[0], "rb").read())
    pool = descriptor_pool.DescriptorPool()
    for fp in fds.file:
        pool.Add(fp)
    ours_fd = pool.FindFileByName("wandb.proto")
    Ours = message_factory.GetMessageClass(pool.FindMessageTypeByName("wandb_internal.Record"))

    # 1. structure
    diffs, seen = [], set()
    default = orig.DESCRIPTOR.pool
    for name, m in ours_fd.message_types_by_name.items():
        seen.add(m.full_name)
        try:
            cmp_msg(m, default.FindMessageTypeByName(m.full_name), diffs)
        except KeyError:
            diffs.append(f"{m.full_name}: not in the wandb package")
    for name, e in ours_fd.enum_types_by_name.items():
        seen.add(e.full_name)
        try:
            cmp_enum(e, default.FindEnumTypeByName(e.full_name), diffs)
        except KeyError:
            diffs.append(f"{e.full_name}: not in the wandb package")
    wandb_files = [orig.DESCRIPTOR] + [d for d in orig.DESCRIPTOR.dependencies
                                       if d.package == "wandb_internal"]
    missing = sorted(t.full_name for fd in wandb_files
                     for t in list(fd.message_types_by_name.values())
                     + list(fd.enum_types_by_name.values()) if t.full_name not in seen)
    print(f"schema: wandb {wandb.__version__}; wandb.proto has {len(seen)} top-level types; "
          f"{len(missing)} package types not included (unreachable from Record)")
    for d in diffs:
        print("DIFF", d)

    # 2. round trip
    spec = importlib.util.spec_from_file_location("pparse_fixture_make", MAKE_PY)
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    bad = 0
    for path in argv[1:]:
        base = mk.HDR if "buggy" in os.path.basename(path) else 0
        n = same_bytes = 0
        for off, data in mk.read_strict(path, base):
            a = orig.Record()
            a.ParseFromString(data)
            enc = a.SerializeToString()
            b = Ours()
            b.ParseFromString(enc)
            da = MessageToDict(a, preserving_proto_field_name=True)
            db = MessageToDict(b, preserving_proto_field_name=True)
            if da != db or b.SerializeToString() != enc:
                bad += 1
                print(f"DIFF {path} record at {off}: dicts equal={da == db}")
                show_diff(da, db, "  ")
            same_bytes += enc == data
            n += 1
        print(f"{path}: {n} records round-tripped; {same_bytes} re-encode to the file's "
              f"exact bytes with wandb's own class")
    if diffs or bad:
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main(sys.argv[1:])
