"""Reads the timings the benchmark scripts write ($BENCH_DIR/times, see peers/lib.sh)."""


def load(path):
    """{name: (wall, rss_kib, status)} from a times file."""
    rows = {}
    for line in open(path):
        name, wall, rss, status = line.rstrip("\n").split("\t")
        rows[name] = (wall, rss, status)
    return rows


def x(r):
    """A ratio as the tables print it."""
    return f"{r:.0f}x" if r >= 10 else f"{r:.2f}x"


def cell(rows, name):
    """(wall shown, RSS shown, wall s, RSS KiB) of a run, or placeholders."""
    if name not in rows:
        return "n/a", "n/a", None, None
    wall, rss, status = rows[name]
    if wall == "-":
        return f"failed ({status})", "-", None, None
    w = float(wall)
    shown = f"{w:.2f} s" if w >= 1 else f"{w * 1000:.1f} ms"
    return shown, f"{int(rss) / 1024:.0f} MiB", w, int(rss)


def cells(path):
    """A function from a run's name to its cell, for the times file at `path`."""
    rows = load(path)
    return lambda name: cell(rows, name)


def ratios(peer, ours):
    """Time and memory ratios peer/pparse of two cells."""
    _, _, pv, pm = peer
    _, _, qv, qm = ours
    tr = f"**{x(pv / qv)}**" if pv and qv else "n/a"
    mr = f"{x(pm / qm)}" if pm and qm else "n/a"
    return tr, mr
