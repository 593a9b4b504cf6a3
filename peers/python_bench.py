"""The Python package beside the Python libraries its users call, timed inside
one interpreter (no start-up), for peers/python.sh.

    python python_bench.py records FILE RUNS    # pparse: records(), every record as a dict
    python python_bench.py wunderbar FILE       # wunderbar.parse_filepath, every record
    python python_bench.py tensors FILE RUNS    # pparse: open + tensors(), name/dtype/shape of each
    python python_bench.py safe_open FILE RUNS  # safetensors.safe_open: keys, dtype, shape
    python python_bench.py numpy FILE NAME      # pparse: numpy() of one tensor + sum, RSS growth
    python python_bench.py get_tensor FILE NAME # safetensors: get_tensor of it + sum, RSS growth

Prints one line: `ms <median> runs <r1,r2,...> n <items>`, or for numpy and
get_tensor `rss_anon_mib <growth> sum <value>`.
"""

import statistics
import sys
import time


def timed(fn, runs):
    times, n = [], None
    for _ in range(runs):
        t = time.perf_counter()
        n = fn()
        times.append((time.perf_counter() - t) * 1000)
    runs_s = ",".join(f"{x:.1f}" for x in times)
    print(f"ms {statistics.median(times):.1f} runs {runs_s} n {n}")


def rss_anon_mib():
    """Anonymous resident memory: what a copy costs (mapped file pages are not)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(mode, path, *rest):
    if mode == "records":
        import pparse

        def run():
            n = 0
            with pparse.open(path) as src:
                for r in src.records():
                    n += len(r["data"]) > 0
            return n

        timed(run, int(rest[0]))
    elif mode == "wunderbar":
        import wunderbar

        def run():
            n = 0
            for r in wunderbar.parse_filepath(path=path):
                n += len(r.data) > 0
            return n

        timed(run, 1)
    elif mode == "tensors":
        import pparse

        def run():
            with pparse.open(path) as src:
                rows = [(t.name, t.dtype, t.shape) for t in src.tensors()]
            return len(rows)

        timed(run, int(rest[0]))
    elif mode == "safe_open":
        from safetensors import safe_open

        def run():
            with safe_open(path, framework="numpy") as f:
                rows = [(k, f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()]
            return len(rows)

        timed(run, int(rest[0]))
    elif mode in ("numpy", "get_tensor"):
        import numpy as np

        name = rest[0]
        before = rss_anon_mib()
        if mode == "numpy":
            import pparse

            src = pparse.open(path)
            t = next(t for t in src.tensors() if t.name == name)
            a = t.numpy()
        else:
            from safetensors import safe_open

            with safe_open(path, framework="numpy") as f:
                a = f.get_tensor(name)
        s = float(np.sum(a, dtype=np.float64))
        print(f"rss_anon_mib {rss_anon_mib() - before:.1f} sum {s:.6g} bytes {a.nbytes}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(*sys.argv[1:])
