#!/usr/bin/env python3
"""Zip damage sweep: copies of one zip of real files (Python's zipfile,
deflated), each with 4 KiB of seeded random bytes at PLACES random offsets
in its entries' area, extracted by pparse, 7-Zip and unzip. Each file
written is compared with the original: whole, an exact prefix, or wrong;
a wrong file is "not flagged" when the tool did not name it: pparse by its
status in `pparse tree --json`, unzip by "bad CRC" or an error on its line,
7-Zip by "ERROR: ... : NAME".

Usage: zip_recovery.py PPARSE WORKDIR [SOURCE_DIR]   (env COPIES=5 PLACES=4)
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import zipfile

PPARSE, WORK = sys.argv[1], sys.argv[2]
SRC = sys.argv[3] if len(sys.argv) > 3 else "/usr/lib/python3.11"
COPIES = int(os.environ.get("COPIES", "5"))
PLACES = int(os.environ.get("PLACES", "4"))
os.makedirs(WORK, exist_ok=True)
zip_path = os.path.join(WORK, "input.zip")
files = {}
for d, dirs, fs in os.walk(SRC):
    dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "__pycache__"))
    for f in sorted(fs):
        p = os.path.join(d, f)
        if os.path.isfile(p) and not os.path.islink(p):
            files[os.path.relpath(p, SRC)] = open(p, "rb").read()
if not os.path.exists(zip_path):
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
orig = open(zip_path, "rb").read()
area = min(i.header_offset for i in zipfile.ZipFile(zip_path).infolist()[-1:]) or len(orig)
seven = next((n for n in ("7zz", "7z", "7za") if shutil.which(n)), None)


def run_pparse(f, out):
    subprocess.run([PPARSE, "extract", f, "--out", out, "--no-index", "--keep-containers"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = subprocess.run([PPARSE, "tree", "--json", "--no-index", f], capture_output=True)
    flagged, stack = set(), [json.loads(r.stdout)]
    while stack:
        e = stack.pop()
        stack.extend(e.get("children", []))
        if e.get("status") != "complete":
            flagged.add(e.get("path", ""))
    return flagged


def run_unzip(f, out):
    r = subprocess.run(["unzip", "-o", "-qq", f, "-d", out], capture_output=True, text=True,
                       errors="replace")
    flagged = set()
    for line in (r.stdout + r.stderr).splitlines():
        # "  inflating: out/x  bad CRC ..." (or without the verb under -qq),
        # and errors naming the file.
        m = re.search(r"(?:\w+:\s+)?(\S.*?)\s+bad CRC", line) or re.search(
            r"error:.*?(" + re.escape(out) + r"/\S+)", line)
        if m:
            flagged.add(os.path.relpath(m.group(1).strip(), out))
    return flagged


def run_7z(f, out):
    r = subprocess.run([seven, "x", "-y", f"-o{out}", f], capture_output=True, text=True,
                       errors="replace")
    flagged = {m.group(1) for m in re.finditer(r"ERROR: [^:]*: (.*)", r.stdout + r.stderr)}
    return flagged


TOOLS = [("pparse", run_pparse), ("unzip", run_unzip)] + ([("7-Zip", run_7z)] if seven else [])
rng = random.Random(33)
rows = {}
for copy in range(COPIES):
    b = bytearray(orig)
    for _ in range(PLACES):
        at = rng.randrange(64, max(65, area - 4096))
        b[at:at + 4096] = bytes(rng.getrandbits(8) for _ in range(4096))
    f = os.path.join(WORK, f"damaged{copy}.zip")
    open(f, "wb").write(b)
    for name, fn in TOOLS:
        out = os.path.join(WORK, "out")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        t0 = time.time()
        flagged = fn(f, out)
        dt = time.time() - t0
        r = rows.setdefault(name, [0, 0, 0, 0, 0.0])
        for d, _, fs in os.walk(out):
            for x in fs:
                p = os.path.join(d, x)
                rel = os.path.relpath(p, out)
                want = files.get(rel)
                if want is None or os.path.islink(p):
                    continue
                got = open(p, "rb").read()
                if got == want:
                    r[0] += 1
                elif len(got) < len(want) and want.startswith(got):
                    r[3] += 1
                else:
                    r[1] += 1
                    r[2] += rel not in flagged
        r[4] += dt
    os.remove(f)

print(f"Input: {SRC} as one zip (Python's zipfile, deflated; {len(orig) / 1e6:.1f} MB, "
      f"{len(files)} files); {COPIES} copies, each with 4 KiB of random bytes at {PLACES} random "
      f"offsets in the entries' area.\n")
print("| tool | files whole | files with wrong bytes | of those, not flagged | files cut short (exact prefix) | time |")
print("|---|---|---|---|---|---|")
for name, _ in TOOLS:
    r = rows[name]
    print(f"| {name} | {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} s |")
