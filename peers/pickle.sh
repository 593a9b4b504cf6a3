#!/usr/bin/env bash
# Benchmark: `pparse pickle` beside `python -m pickletools`, and `pparse tensors` on a
# ~1 GB torch checkpoint (beside `torch.load(mmap=True)` when torch is importable).
#
# Inputs are generated here (never committed), in $BENCH_DIR (default /tmp/pparse-bench-pickle):
#   p4.pkl        a list of N dicts of str/int/float/list/None/bool, pickle protocol 4
#                 (FRAME, MEMOIZE, SHORT_BINUNICODE, BINGET of the shared keys ...)
#   p2.pkl        the same list, protocol 2 (BINPUT/LONG_BINPUT, BINUNICODE, no frames)
#   state_1g.pt   ~1 GB torch checkpoint: with torch, `torch.save` of a state dict;
#                 without torch, a torch-format zip written with Python's zipfile
#                 (stored entries aligned to 64 bytes with an "FB" extra field like
#                 torch's writer, `<prefix>/data.pkl` from a Pickler that emits the same
#                 GLOBALs, REDUCEs and BINPERSID 5-tuples as torch, version/byteorder records)
# Each is built once and reused while its parameters stay the same.
#
# Timing: one run each (pickletools takes minutes), wall seconds and peak RSS from GNU
# time, outputs to /dev/null. The Markdown table goes to stdout (and to $OUT if set).
#
# Usage: peers/pickle.sh
#   env: PPARSE=/path/to/pparse (default: cargo build --release, target/release/pparse)
#        N=3500000 (records: ~225 MB at protocol 4, ~280 MB at 2)   TENSOR_MB=1024
#        PYTHON=python3 (runs pickletools and the generators)
#        TORCH_PYTHON=python3 (a python with torch, optional)   BENCH_DIR   OUT
#        SKIP_TORCH=1 (skip the tensors part)   SKIP_PICKLE=1 (skip the pickletools part)   CHECK=1 (also compare line counts)
set -euo pipefail

cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench-pickle}
N=${N:-3500000}
TENSOR_MB=${TENSOR_MB:-1024}
PYTHON=${PYTHON:-python3}
TORCH_PYTHON=${TORCH_PYTHON:-$PYTHON}
mkdir -p "$BENCH_DIR"

PPARSE_GIVEN=${PPARSE:-}
if [[ -z $PPARSE_GIVEN ]]; then
  cargo build --release --quiet
  PPARSE=$PWD/target/release/pparse
fi

# ---- inputs ----------------------------------------------------------------
make_pickles() {
  "$PYTHON" - "$BENCH_DIR" "$N" <<'EOF'
import os, pickle, sys
out, n = sys.argv[1], int(sys.argv[2])
words = ["alpha", "beta", "gamma", "delta", "\u00e9t\u00e9", "\u65e5\u672c"]
rows = [{"id": i, "name": f"user-{i:08d}", "score": i * 0.25 - 1e3,
         "big": 2**40 + i, "tags": [words[i % 6], words[(i * 7) % 6]],
         "ok": i % 3 == 0, "parent": None if i % 5 else i // 5}
        for i in range(n)]
for proto in (4, 2):
    path = os.path.join(out, f"p{proto}.pkl")
    with open(path + ".tmp", "wb") as f:
        pickle.dump(rows, f, protocol=proto)
    os.replace(path + ".tmp", path)
EOF
  echo "$N" > "$BENCH_DIR/pickles.meta"
}
if [[ -s $BENCH_DIR/p4.pkl && -s $BENCH_DIR/p2.pkl && $(cat "$BENCH_DIR/pickles.meta" 2>/dev/null) == "$N" ]]; then
  echo "reusing $BENCH_DIR/p4.pkl, p2.pkl (N=$N)"
else
  echo "writing $BENCH_DIR/p4.pkl and p2.pkl (N=$N records) ..."
  make_pickles
fi

HAVE_TORCH=0
if [[ -z ${SKIP_TORCH:-} ]] && "$TORCH_PYTHON" -c 'import torch' 2>/dev/null; then
  HAVE_TORCH=1
fi
PT=$BENCH_DIR/state_1g.pt
make_torch_file() {
  if (( HAVE_TORCH )); then
    "$TORCH_PYTHON" - "$PT" "$TENSOR_MB" <<'EOF'
import collections, sys, torch
path, mb = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(0)
sd, total, i = collections.OrderedDict(), 0, 0
while total < mb * 2**20:
    layer = f"layers.{i // 4}"
    kind = i % 4
    if kind == 0:
        t = torch.randn(2048, 2048, generator=g)                     # 16 MiB F32
        sd[f"{layer}.attn.weight"] = t
    elif kind == 1:
        t = torch.randn(2048, 2048, generator=g).to(torch.bfloat16)  # 8 MiB BF16
        sd[f"{layer}.mlp.weight"] = t
    elif kind == 2:
        t = torch.randn(2048, generator=g)
        sd[f"{layer}.norm.weight"] = t
    else:
        t = torch.arange(4096, dtype=torch.int64)
        sd[f"{layer}.position_ids"] = t
    total += t.numel() * t.element_size()
    i += 1
torch.save(sd, path + ".tmp")
import os; os.replace(path + ".tmp", path)
print(f"torch {torch.__version__}: {len(sd)} tensors, {total} bytes of tensor data")
EOF
  else
    "$PYTHON" - "$PT" "$TENSOR_MB" <<'EOF'
# No torch: write the same container torch.save writes, by hand.
import collections, io, os, pickle, random, struct, sys, types, zipfile
path, mb = sys.argv[1], int(sys.argv[2])

# Stand-ins registered under torch's names so the Pickler writes GLOBAL 'torch ...'.
torch_mod = types.ModuleType("torch")
utils_mod = types.ModuleType("torch._utils")
def _rebuild_tensor_v2(*args):
    raise RuntimeError("stand-in")
_rebuild_tensor_v2.__module__ = "torch._utils"
utils_mod._rebuild_tensor_v2 = _rebuild_tensor_v2
storage_types = {}
for cls_name, itemsize in (("FloatStorage", 4), ("BFloat16Storage", 2), ("LongStorage", 8)):
    cls = type(cls_name, (), {"__module__": "torch", "itemsize": itemsize})
    setattr(torch_mod, cls_name, cls)
    storage_types[cls_name] = cls
torch_mod._utils = utils_mod
sys.modules["torch"], sys.modules["torch._utils"] = torch_mod, utils_mod

class Storage:
    def __init__(self, key, stype, numel):
        self.key, self.stype, self.numel = key, stype, numel

class Tensor:
    def __init__(self, storage, shape):
        self.storage, self.shape = storage, shape
    def __reduce_ex__(self, proto):
        stride, acc = [], 1
        for s in reversed(self.shape):
            stride.insert(0, acc)
            acc *= s
        return (_rebuild_tensor_v2, (self.storage, 0, tuple(self.shape), tuple(stride),
                                     False, collections.OrderedDict()))

class TorchLikePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.stype, obj.key, "cpu", obj.numel)
        return None

sd, blobs, total, i = collections.OrderedDict(), [], 0, 0
rng = random.Random(0).randbytes  # seeded: the same file every time; no zero pages
while total < mb * 2**20:
    layer, kind = f"layers.{i // 4}", i % 4
    name, stype, shape = {
        0: (f"{layer}.attn.weight", "FloatStorage", (2048, 2048)),
        1: (f"{layer}.mlp.weight", "BFloat16Storage", (2048, 2048)),
        2: (f"{layer}.norm.weight", "FloatStorage", (2048,)),
        3: (f"{layer}.position_ids", "LongStorage", (4096,)),
    }[kind]
    numel = 1
    for s in shape:
        numel *= s
    st = Storage(str(i), storage_types[stype], numel)
    sd[name] = Tensor(st, shape)
    nbytes = numel * storage_types[stype].itemsize
    blobs.append((st.key, nbytes))
    total += nbytes
    i += 1
buf = io.BytesIO()
TorchLikePickler(buf, protocol=2).dump(sd)

prefix = os.path.splitext(os.path.basename(path))[0] + "/"
def add(zf, name, data):
    info = zipfile.ZipInfo(prefix + name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    full = (prefix + name).encode()
    start = zf.fp.tell() + 30 + len(full) + 4          # header + name + FB extra header
    pad = (-start) % 64
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    zf.writestr(info, data)
with zipfile.ZipFile(path + ".tmp", "w", allowZip64=True) as zf:
    add(zf, "data.pkl", buf.getvalue())
    add(zf, ".format_version", b"1")
    add(zf, ".storage_alignment", b"64")
    add(zf, "byteorder", b"little")
    for key, nbytes in blobs:
        add(zf, f"data/{key}", rng(nbytes))
    add(zf, "version", b"3\n")
os.replace(path + ".tmp", path)
print(f"hand-written torch zip (no torch): {len(sd)} tensors, {total} bytes of tensor data")
EOF
  fi
  echo "$TENSOR_MB $HAVE_TORCH" > "$BENCH_DIR/pt.meta"
}
if [[ -z ${SKIP_TORCH:-} ]]; then
  if [[ -s $PT && $(cat "$BENCH_DIR/pt.meta" 2>/dev/null) == "$TENSOR_MB $HAVE_TORCH" ]]; then
    echo "reusing $PT"
  else
    echo "writing $PT (~$TENSOR_MB MiB of tensors, $( ((HAVE_TORCH)) && echo torch.save || echo 'hand-written zip, no torch')) ..."
    make_torch_file
  fi
fi

# ---- timing ----------------------------------------------------------------
: > "$BENCH_DIR/times"
# bench NAME CMD...: one run under GNU time; appends "NAME<TAB>wall<TAB>rss_kib<TAB>status".
bench() {
  local name=$1; shift
  local rc=0
  echo "  $name ..." >&2
  # Wall time from the clock in ns (GNU time's %e has 10 ms steps); peak RSS from GNU time.
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -o "$BENCH_DIR/t" -f '%e %M' "$@" > /dev/null 2> "$BENCH_DIR/err" || rc=$?
  t1=$(date +%s%N)
  if (( rc > 1 )); then   # pparse: 1 = partial results, still a timing
    printf '%s\t-\t-\t%s\n' "$name" "exit $rc: $(head -c 200 "$BENCH_DIR/err" | tr '\n\t' '  ')" >> "$BENCH_DIR/times"
  else
    read -r _ rss < <(tail -1 "$BENCH_DIR/t")
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
    printf '%s\t%s\t%s\t%s\n' "$name" "$wall" "$rss" "exit $rc" >> "$BENCH_DIR/times"
  fi
}
PPARSE_PICKLE=1
"$PPARSE" pickle --help > /dev/null 2>&1 || PPARSE_PICKLE=0
PPARSE_TENSORS=1
"$PPARSE" tensors --help > /dev/null 2>&1 || PPARSE_TENSORS=0

for p in p4 p2; do
  [[ -z ${SKIP_PICKLE:-} ]] || continue
  f=$BENCH_DIR/$p.pkl
  bench "$p pickletools" "$PYTHON" -m pickletools "$f"
  if (( PPARSE_PICKLE )); then bench "$p pparse" "$PPARSE" pickle "$f"; fi
done
if [[ -z ${SKIP_TORCH:-} ]]; then
  if (( HAVE_TORCH )); then
    bench "pt torch.load" "$TORCH_PYTHON" -c '
import sys, torch
sd = torch.load(sys.argv[1], map_location="cpu", mmap=True, weights_only=True)
for k, v in sd.items():
    print(k, v.dtype, tuple(v.shape), v.stride(), v.storage_offset())' "$PT"
  fi
  if (( PPARSE_TENSORS )); then
    # Milliseconds: five runs, the median is kept.
    for i in 1 2 3 4 5; do bench "pt pparse run$i" "$PPARSE" tensors "$PT"; done
    sort -t$'\t' -k2,2n <(grep '^pt pparse run' "$BENCH_DIR/times") | sed -n 3p \
      | sed 's/^pt pparse run[0-9]*/pt pparse/' >> "$BENCH_DIR/times"
  fi
fi

MISMATCH=()
if [[ -n ${CHECK:-} ]] && (( PPARSE_PICKLE )); then
  for p in p4 p2; do
    a=$("$PYTHON" -m pickletools "$BENCH_DIR/$p.pkl" | wc -l)
    b=$("$PPARSE" pickle "$BENCH_DIR/$p.pkl" | wc -l)
    [[ $a == "$b" ]] || MISMATCH+=("$p.pkl: pickletools prints $a lines, pparse pickle $b")
  done
fi

# ---- report ----------------------------------------------------------------
CMD="${PPARSE_GIVEN:+PPARSE=$PPARSE }N=$N TENSOR_MB=$TENSOR_MB${SKIP_TORCH:+ SKIP_TORCH=1}"
[[ $TORCH_PYTHON != "$PYTHON" ]] && CMD+=" TORCH_PYTHON=$TORCH_PYTHON"
CMD+=" peers/pickle.sh"
{
  echo "## pparse pickle / tensors ($(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  for p in p4 p2; do
    echo "- \`$p.pkl\`: $(stat -c %s "$BENCH_DIR/$p.pkl") bytes, pickle protocol ${p#p}, list of $N dicts"
  done
  if [[ -z ${SKIP_TORCH:-} ]]; then
    echo "- \`state_1g.pt\`: $(stat -c %s "$PT") bytes, $( ((HAVE_TORCH)) && echo "torch.save ($("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)'))" || echo 'torch-format zip written by hand (no torch importable)')"
  fi
  (( PPARSE_PICKLE )) || echo "- \`pparse pickle\` is not available in this binary: no pparse timing"
  [[ -n ${SKIP_TORCH:-} ]] || (( PPARSE_TENSORS )) || echo "- \`pparse tensors\` is not available in this binary: no pparse timing"
  echo
  for m in "${MISMATCH[@]}"; do echo "**MISMATCH: $m**"; echo; done
  "$PYTHON" - "$BENCH_DIR/times" <<'EOF'
import sys
rows = {}
for line in open(sys.argv[1]):
    name, wall, rss, status = line.rstrip("\n").split("\t")
    rows[name] = (wall, rss, status)
def cell(name):
    if name not in rows:
        return "n/a", "n/a", None
    wall, rss, status = rows[name]
    if wall == "-":
        return f"failed ({status})", "-", None
    w = float(wall)
    shown = f"{w:.2f} s" if w >= 1 else f"{w * 1000:.1f} ms"
    return shown, f"{int(rss) / 1024:.0f} MiB", w
print("| input | peer | peer wall | peer peak RSS | pparse wall | pparse peak RSS | pparse/peer |")
print("|---|---|---|---|---|---|---|")
for key, peer, label in (("p4", "pickletools", "`python -m pickletools`"),
                         ("p2", "pickletools", "`python -m pickletools`"),
                         ("pt", "torch.load", "`torch.load(mmap=True)` + listing")):
    if not any(k.startswith(key + " ") for k in rows):
        continue
    pw, pr, pv = cell(f"{key} {peer}")
    qw, qr, qv = cell(f"{key} pparse")
    ratio = f"**{qv / pv:.3f}x**" if pv and qv else "n/a"
    cmd = "pickle" if key != "pt" else "tensors"
    name = {"p4": "p4.pkl", "p2": "p2.pkl", "pt": "state_1g.pt"}[key]
    print(f"| `{name}` (`pparse {cmd}`) | {label} | {pw} | {pr} | {qw} | {qr} | {ratio} |")
EOF
  echo
  echo "One run each (\`pparse tensors\`: median of 5); outputs to /dev/null. Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(free -g | awk '/Mem:/{print $2}') GiB RAM."
  echo "Tools: $("$PPARSE" --version 2>/dev/null || echo "pparse (no --version)"), $("$PYTHON" --version)."
  echo
  echo "Reproduce: \`$CMD\`"
} | tee ${OUT:+"$OUT"}
(( ${#MISMATCH[@]} == 0 ))
