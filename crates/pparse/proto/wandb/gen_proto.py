#!/usr/bin/env python3
"""Emit proto/wandb/wandb.proto from the installed wandb package's descriptors.

  python gen_proto.py [OUT]        (run with a venv that has `wandb` installed)

Reads wandb.proto.wandb_internal_pb2.DESCRIPTOR and its dependencies
(wandb_base.proto, wandb_telemetry.proto: all in package wandb_internal) and writes
one self-contained proto3 file, package wandb_internal, holding every message and
enum reachable from wandb_internal.Record. A reachable nested type brings in its
whole top-level message (with all of its nested types), so full names are unchanged.
Only names, numbers, types, labels (repeated/optional), oneofs and maps are kept:
no comments, options, reserved ranges or json_name. Well-known google.protobuf types
are imported. Type references are written relative to the package, or fully
qualified (leading dot) where an enclosing scope would shadow the relative name.
Declaration order follows the wandb files (wandb_base, wandb_telemetry,
wandb_internal); inside a message: fields (oneof members grouped at the first
member's place), then nested enums, then nested messages.
"""

import os
import sys

from google.protobuf import descriptor_pb2

PKG = "wandb_internal"
ROOT = f"{PKG}.Record"
FDP = descriptor_pb2.FieldDescriptorProto

SCALAR = {
    FDP.TYPE_DOUBLE: "double", FDP.TYPE_FLOAT: "float", FDP.TYPE_INT64: "int64",
    FDP.TYPE_UINT64: "uint64", FDP.TYPE_INT32: "int32", FDP.TYPE_FIXED64: "fixed64",
    FDP.TYPE_FIXED32: "fixed32", FDP.TYPE_BOOL: "bool", FDP.TYPE_STRING: "string",
    FDP.TYPE_BYTES: "bytes", FDP.TYPE_UINT32: "uint32", FDP.TYPE_SFIXED32: "sfixed32",
    FDP.TYPE_SFIXED64: "sfixed64", FDP.TYPE_SINT32: "sint32", FDP.TYPE_SINT64: "sint64",
}


def load():
    import wandb
    from wandb.proto import wandb_internal_pb2

    files, seen = [], set()

    def visit(fd):  # dependencies first
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            visit(dep)
        fp = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(fp)
        files.append(fp)

    visit(wandb_internal_pb2.DESCRIPTOR)
    return wandb.__version__, files


class Schema:
    def __init__(self, files):
        self.types = {}   # full name (no leading dot) -> (kind, proto, top-level full name)
        self.order = []   # top-level full names in declaration order (wandb files only)
        self.wkt_files = {}  # google.protobuf full name -> file name
        for fp in files:
            own = fp.package == PKG
            if not own and fp.package != "google.protobuf":
                raise SystemExit(f"unexpected package {fp.package} in {fp.name}")
            for e in fp.enum_type:
                full = f"{fp.package}.{e.name}"
                self.types[full] = ("enum", e, full)
                if own:
                    self.order.append(full)
                else:
                    self.wkt_files[full] = fp.name
            for m in fp.message_type:
                full = f"{fp.package}.{m.name}"
                self._add_msg(m, full, full)
                if own:
                    self.order.append(full)
                else:
                    self.wkt_files[full] = fp.name
            if own and fp.syntax != "proto3":
                raise SystemExit(f"{fp.name}: syntax {fp.syntax!r}, expected proto3")

    def _add_msg(self, m, full, top):
        self.types[full] = ("message", m, top)
        for n in m.nested_type:
            self._add_msg(n, f"{full}.{n.name}", top)
        for e in m.enum_type:
            self.types[f"{full}.{e.name}"] = ("enum", e, top)

    def closure(self):
        """Top-level wandb types reachable from Record, and the WKT files used."""
        keep, imports, work = set(), set(), [ROOT]
        while work:
            top = work.pop()
            if top in keep:
                continue
            keep.add(top)
            kind, proto, _ = self.types[top]
            if kind == "enum":
                continue
            stack = [proto]
            while stack:
                m = stack.pop()
                stack.extend(m.nested_type)
                for f in m.field:
                    if f.type in (FDP.TYPE_MESSAGE, FDP.TYPE_ENUM):
                        name = f.type_name.lstrip(".")
                        if name in self.wkt_files:
                            imports.add(self.wkt_files[name])
                            continue
                        if not name.startswith(PKG + "."):
                            raise SystemExit(f"unexpected type {name}")
                        work.append(self.types[name][2])
        return keep, imports

    def ref(self, type_name, scope):
        """How to write type_name (leading dot) from inside message `scope`."""
        full = type_name.lstrip(".")
        if full.startswith("google.protobuf."):
            rel = full
        else:
            rel = full[len(PKG) + 1:]
        first = rel.split(".")[0]
        # protoc resolves the first component from the innermost scope outwards:
        # the relative name is safe only if no enclosing message declares `first`
        # (a nested type, enum, field or oneof); otherwise qualify it fully.
        s = scope
        while s != PKG:
            _, m, _ = self.types[s]
            names = ({n.name for n in m.nested_type} | {e.name for e in m.enum_type}
                     | {f.name for f in m.field} | {o.name for o in m.oneof_decl})
            if first in names:
                return "." + full
            s = s.rsplit(".", 1)[0]
        return rel


def field_type(schema, f, scope):
    if f.type in (FDP.TYPE_MESSAGE, FDP.TYPE_ENUM):
        return schema.ref(f.type_name, scope)
    return SCALAR[f.type]


def emit_enum(e, ind, out):
    out.append(f"{ind}enum {e.name} {{")
    for v in e.value:
        out.append(f"{ind}  {v.name} = {v.number};")
    out.append(f"{ind}}}")


def emit_msg(schema, m, full, ind, out):
    out.append(f"{ind}message {m.name} {{")
    maps = {}
    for n in m.nested_type:
        if n.options.map_entry:
            maps[f".{full}.{n.name}"] = n
    done_oneofs = set()
    real_oneof = [not any(f.proto3_optional for f in m.field if f.HasField("oneof_index")
                          and f.oneof_index == i) for i in range(len(m.oneof_decl))]

    def fline(f, ind2, in_oneof):
        if f.type == FDP.TYPE_MESSAGE and f.type_name in maps:
            k, v = maps[f.type_name].field
            return (f"{ind2}map<{field_type(schema, k, full)}, "
                    f"{field_type(schema, v, full)}> {f.name} = {f.number};")
        label = ""
        if f.label == FDP.LABEL_REPEATED:
            label = "repeated "
        elif f.proto3_optional:
            label = "optional "
        elif f.label == FDP.LABEL_REQUIRED:
            raise SystemExit(f"required field {full}.{f.name}")
        return f"{ind2}{label}{field_type(schema, f, full)} {f.name} = {f.number};"

    for f in m.field:
        if f.HasField("oneof_index") and real_oneof[f.oneof_index]:
            i = f.oneof_index
            if i in done_oneofs:
                continue
            done_oneofs.add(i)
            out.append(f"{ind}  oneof {m.oneof_decl[i].name} {{")
            for g in m.field:
                if g.HasField("oneof_index") and g.oneof_index == i:
                    out.append(fline(g, ind + "    ", True))
            out.append(f"{ind}  }}")
        else:
            out.append(fline(f, ind + "  ", False))
    for e in m.enum_type:
        emit_enum(e, ind + "  ", out)
    for n in m.nested_type:
        if not n.options.map_entry:
            emit_msg(schema, n, f"{full}.{n.name}", ind + "  ", out)
    out.append(f"{ind}}}")


def generate():
    version, files = load()
    schema = Schema(files)
    keep, imports = schema.closure()
    out = [
        f"// Generated by proto/wandb/gen_proto.py from the message, field and enum names,",
        f"// numbers and types of the wandb {version} Python package (wandb_internal.Record",
        f"// and everything reachable from it). Do not edit: rerun gen_proto.py.",
        "",
        'syntax = "proto3";',
        "",
        f"package {PKG};",
        "",
    ]
    for imp in sorted(imports):
        out.append(f'import "{imp}";')
    if imports:
        out.append("")
    for top in schema.order:
        if top not in keep:
            continue
        kind, proto, _ = schema.types[top]
        if kind == "enum":
            emit_enum(proto, "", out)
        else:
            emit_msg(schema, proto, top, "", out)
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n", version, len(keep)


def main(argv):
    out_path = argv[0] if argv else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "wandb.proto")
    text, version, n = generate()
    with open(out_path, "w") as f:
        f.write(text)
    print(f"wrote {out_path}: {n} top-level types from wandb {version}")


if __name__ == "__main__":
    main(sys.argv[1:])
