#!/usr/bin/env python3
"""Recovery report: damaged copies of one single-member tar.gz of real files,
read back by pparse and by the tools people reach for (GNU gzip + GNU tar,
gzrecover + GNU tar, 7-Zip + GNU tar, bsdtar).

Usage: recovery.py PPARSE WORKDIR [SOURCE_DIR]

HARD and SOFT copies (5 each by default); each has 4 KiB of seeded random bytes
(FILL=zeros: of zeros) written at a random offset (5% to 90% into the file). A copy is "hard" when zlib stops at invalid data, "soft"
when it decodes to the end and only the CRC fails. Every tool extracts into a
folder of its own; each file written is compared with the member of the
undamaged tar (Python's tarfile): whole (byte-exact), a prefix of it, or wrong;
a wrong file is "not flagged" when nothing says so: for pparse, when its
status for the member (`pparse tree --json`) is complete; the other tools
name no file they are unsure of, so every wrong file of theirs counts.
"Past" counts members whose data starts 64 KiB or more after the decoded
offset where the damage begins. "Proved" counts pparse's whole files that it
also calls complete (the others label nothing). Output: a markdown table per
kind of damage.
"""
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import time
import zlib

PPARSE, WORK = sys.argv[1], sys.argv[2]
SRC = sys.argv[3] if len(sys.argv) > 3 else "/usr/include"
# Damaged copies wanted of each kind (random offsets are drawn until
# both counts are reached, at most 400 draws).
WANT = {"hard": int(os.environ.get("HARD", "5")), "soft": int(os.environ.get("SOFT", "5"))}
os.makedirs(WORK, exist_ok=True)
tar_path = os.path.join(WORK, "input.tar")
gz_path = tar_path + ".gz"
if not os.path.exists(gz_path):
    parent, base = os.path.split(SRC.rstrip("/"))
    # A standard library's folder holds site-packages: not part of it.
    subprocess.run(["tar", "--format=gnu", "--sort=name", "--exclude=site-packages", "-cf",
                    tar_path, "-C", parent, base],
                   check=True, stderr=subprocess.DEVNULL)
    with open(gz_path, "wb") as out:
        subprocess.run(["gzip", "-6", "-n", "-c", tar_path], check=True, stdout=out)

members = {}
with tarfile.open(tar_path) as t:
    for m in t:
        if m.isfile():
            data = t.extractfile(m).read()
            members[m.name] = (m.offset_data, m.size, hashlib.sha256(data).digest(), data)
orig_gz = open(gz_path, "rb").read()
HDR = 10


def decoded_at(n):
    """Bytes zlib decodes from the first n compressed bytes."""
    d = zlib.decompressobj(-15)
    return len(d.decompress(orig_gz[HDR:n]))


def is_hard(b):
    d = zlib.decompressobj(-15)
    try:
        d.decompress(b[HDR:])
        return not d.eof
    except zlib.error:
        return True


def seven():
    for n in ("7z", "7zz", "7za"):
        if shutil.which(n):
            return n
    return None


def untar(tarball, out):
    subprocess.run(["tar", "-xf", tarball, "-i", "-C", out], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def via_tar(out, write_tar):
    """Runs write_tar(path) to decode into a tar beside `out`, then untars it."""
    t = os.path.join(out, "..", os.path.basename(out) + ".tar")
    write_tar(t)
    untar(t, out)
    os.remove(t)


def tool_gzip(f, out):
    via_tar(out, lambda t: subprocess.run(f"gzip -dc '{f}' > '{t}'", shell=True,
                                          stderr=subprocess.DEVNULL))


def tool_gzrecover(f, out):
    via_tar(out, lambda t: subprocess.run(["gzrecover", "-o", t, f], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))


def tool_7z(f, out):
    via_tar(out, lambda t: subprocess.run(f"{seven()} x -so '{f}' > '{t}'", shell=True,
                                          stderr=subprocess.DEVNULL))


def tool_bsdtar(f, out):
    subprocess.run(["bsdtar", "-xf", f, "-C", out], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


# pparse writes a member that is a container (a .gz, a jar) as the file
# it is, as tar does, with --keep-containers: the files compared are the
# tar's members.
def tool_pparse(f, out):
    subprocess.run([PPARSE, "extract", f, "--out", out, "--no-index", "--keep-containers"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tool_pparse_all(f, out):
    subprocess.run([PPARSE, "extract", f, "--out", out, "--no-index", "--all", "--keep-containers"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


TOOLS = [("pparse", tool_pparse, True), ("pparse --all", tool_pparse_all, True), ("gzip + tar", tool_gzip, True),
         ("gzrecover + tar", tool_gzrecover, bool(shutil.which("gzrecover"))),
         ("7-Zip + tar", tool_7z, bool(seven())), ("bsdtar", tool_bsdtar, bool(shutil.which("bsdtar")))]


def flagged_by_pparse(f):
    """Member paths (below the tar) whose status `pparse tree --json` gives
    as anything but complete: the files pparse says are not vouched for."""
    r = subprocess.run([PPARSE, "tree", "--json", "--no-index", f], capture_output=True)
    try:
        root = json.loads(r.stdout)
    except ValueError:
        return set()
    out, stack = set(), [root]
    while stack:
        e = stack.pop()
        stack.extend(e.get("children", []))
        if e.get("status") != "complete" and "/" in e.get("path", ""):
            out.add(e["path"].split("/", 1)[1])
    return out


def judge(out, strip_first, flagged=frozenset()):
    """Files written: whole, exact prefixes, wrong, wrong and not flagged
    (for pparse: its status for the member is complete), bytes in whole."""
    whole, prefix, wrong, unflagged, good_bytes = set(), 0, 0, 0, 0
    for d, _, fs in os.walk(out):
        for name in fs:
            p = os.path.join(d, name)
            if os.path.islink(p):
                continue
            rel = os.path.relpath(p, out)
            if strip_first:
                rel = rel.split("/", 1)[1] if "/" in rel else rel
            m = members.get(rel)
            if m is None:
                continue
            data = open(p, "rb").read()
            if len(data) == m[1] and hashlib.sha256(data).digest() == m[2]:
                whole.add(rel)
                good_bytes += len(data)
            elif len(data) < m[1] and m[3].startswith(data):
                prefix += 1
            else:
                wrong += 1
                unflagged += rel not in flagged
    return whole, prefix, wrong, unflagged, good_bytes


rng = random.Random(15)
# FILL=zeros writes 4 KiB of zeros instead of random bytes (a sector lost).
ZEROS = os.environ.get("FILL", "random") == "zeros"
FILL_TEXT = "zeros" if ZEROS else "random bytes"
if "gzip" in os.environ.get("PARTS", "gzip bzip2"):
    rows = {"hard": {}, "soft": {}}
    counts = {"hard": 0, "soft": 0}
    for copy in range(400):
        if all(counts[k] >= WANT[k] for k in counts):
            break
        b = bytearray(orig_gz)
        at = rng.randrange(len(b) // 20, len(b) * 9 // 10)
        fill = bytes(4096) if ZEROS else bytes(rng.getrandbits(8) for _ in range(4096))
        b[at:at + 4096] = fill
        kind = "hard" if is_hard(bytes(b)) else "soft"
        if counts[kind] >= WANT[kind]:
            continue
        counts[kind] += 1
        f = os.path.join(WORK, f"damaged{copy}.tar.gz")
        open(f, "wb").write(b)
        dmg_out = decoded_at(at)
        past = {n for n, m in members.items() if m[0] >= dmg_out + 65536}
        for name, fn, have in TOOLS:
            if not have:
                continue
            out = os.path.join(WORK, "out")
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            t0 = time.time()
            fn(f, out)
            dt = time.time() - t0
            mine = name.startswith("pparse")
            flagged = flagged_by_pparse(f) if mine else frozenset()
            whole, prefix, wrong, unflagged, good = judge(out, mine, flagged)
            r = rows[kind].setdefault(name, [0, 0, 0, 0, 0, 0, 0.0, 0, 0])
            r[0] += len(whole)
            r[1] += len(whole & past)
            r[2] += len(past)
            r[3] += good
            r[4] += wrong
            r[5] += prefix
            r[6] += dt
            r[7] += unflagged
            # Whole files the tool vouches for: pparse's complete ones;
            # the others vouch for none (every file is as good as any).
            r[8] += len(whole - flagged) if mine else 0
        os.remove(f)

    print(f"Input: {SRC} as one GNU tar ({os.path.getsize(tar_path) / 1e6:.1f} MB, {len(members)} files), "
          f"`gzip -6` ({len(orig_gz) / 1e6:.1f} MB); copies with 4 KiB of {FILL_TEXT} each "
          f"at random offsets: {counts['hard']} that stop zlib (hard), {counts['soft']} that decode "
          f"to a CRC error (soft).\n")
    for kind in ("hard", "soft"):
        if not counts[kind]:
            continue
        print(f"**{kind} damage** ({counts[kind]} copies, totals)\n")
        print("| tool | files whole | of those, proved (complete) | whole of those 64 KiB past the damage | MB in whole files | files with wrong bytes | of those, not flagged | files cut short (exact prefix) | time |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, _, have in TOOLS:
            if not have or name not in rows[kind]:
                continue
            r = rows[kind][name]
            pct = 100.0 * r[1] / r[2] if r[2] else 0.0
            proved = r[8] if name.startswith("pparse") else "—"
            print(f"| {name} | {r[0]} | {proved} | {r[1]} of {r[2]} ({pct:.1f}%) | {r[3] / 1e6:.1f} | {r[4]} | {r[7]} | {r[5]} | {r[6]:.1f} s |")
        print()

# bzip2: the same tar compressed by bzip2 -9, 4 KiB of random bytes in the
# middle of a block; bzip2recover writes each block it can read as its own
# file (rec*), which bzip2 -d and GNU tar -i then read.
if shutil.which("bzip2recover") and "bzip2" in os.environ.get("PARTS", "gzip bzip2"):
    bz_path = tar_path + ".bz2"
    if not os.path.exists(bz_path):
        with open(bz_path, "wb") as out:
            subprocess.run(["bzip2", "-9", "-c", tar_path], check=True, stdout=out)
    orig_bz = open(bz_path, "rb").read()

    def tool_bzip2recover(f, out):
        d = os.path.join(WORK, "bzrec")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        g = os.path.join(d, "x.bz2")
        shutil.copy(f, g)
        subprocess.run(["bzip2recover", g], cwd=d, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        parts = sorted(p for p in os.listdir(d) if p.startswith("rec"))

        def write(t):
            with open(t, "wb") as o:
                for p in parts:
                    subprocess.run(["bzip2", "-dc", os.path.join(d, p)], stdout=o,
                                   stderr=subprocess.DEVNULL)
        via_tar(out, write)

    def tool_bzip2(f, out):
        via_tar(out, lambda t: subprocess.run(f"bzip2 -dc '{f}' > '{t}'", shell=True,
                                              stderr=subprocess.DEVNULL))

    bz_tools = [("pparse", tool_pparse), ("bzip2 + tar", tool_bzip2),
                ("bzip2recover + bzip2 + tar", tool_bzip2recover)]
    if shutil.which("bsdtar"):
        bz_tools.append(("bsdtar", tool_bsdtar))
    if seven():
        bz_tools.append(("7-Zip + tar", tool_7z))
    brows = {}
    for copy in range(WANT["hard"] + WANT["soft"]):
        b = bytearray(orig_bz)
        at = rng.randrange(len(b) // 20, len(b) * 9 // 10)
        b[at:at + 4096] = bytes(rng.getrandbits(8) for _ in range(4096))
        f = os.path.join(WORK, f"damaged{copy}.tar.bz2")
        open(f, "wb").write(b)
        for name, fn in bz_tools:
            out = os.path.join(WORK, "out")
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            t0 = time.time()
            fn(f, out)
            dt = time.time() - t0
            whole, prefix, wrong, _, good = judge(out, name.startswith("pparse"))
            r = brows.setdefault(name, [0, 0, 0, 0, 0.0])
            r[0] += len(whole)
            r[1] += good
            r[2] += wrong
            r[3] += prefix
            r[4] += dt
        os.remove(f)
    n = WANT["hard"] + WANT["soft"]
    print(f"**bzip2** (`bzip2 -9`, {len(orig_bz) / 1e6:.1f} MB; {n} copies with 4 KiB of random "
          f"bytes at random offsets, totals of {n} x {len(members)} files)\n")
    print("| tool | files whole | MB in whole files | files with wrong bytes | files cut short (exact prefix) | time |")
    print("|---|---|---|---|---|---|")
    for name, _ in bz_tools:
        r = brows[name]
        print(f"| {name} | {r[0]} | {r[1] / 1e6:.1f} | {r[2]} | {r[3]} | {r[4]:.1f} s |")
    print()
