"""Writes a large .wandb log with wandb's own writer, for peers/wandb.sh.

    python wandb_gen.py OUT.wandb MIB [SEED]

The log is written by `wandb.sdk.internal.datastore.DataStore` (the leveldb-style
writer of the wandb SDK's internal process, 0.17.x): a W&B header, then records built
with `wandb.proto.wandb_internal_pb2`, as an offline run would log them:
  header, run, telemetry, config, metric, files, then until MIB MiB are written
  ~87% history  (20 items: _step/_runtime/_timestamp + 17 metrics as value_json, a step)
  ~ 8% output_raw (a stdout/stderr line with a timestamp)
  ~ 3% stats    (system metrics, every ~30 history rows)
  ~ 2% summary  (an update of the latest metrics)
  and about one record in 1,500 of 50-100 kB (a history row holding a logged table,
  or a summary/config holding a histogram), so that FIRST/MIDDLE/LAST chunks occur
  beside the usual FIRST/LAST splits at block ends; then exit.
Every record gets a number and the run id as its stream id, like the SDK's.
Seeded (default 0): the same file every time for the same arguments.
Progress goes to stderr; stdout: "counts TYPE=N ...", then "records N bytes B".
"""

import json
import os
import random
import sys
import time

from wandb.proto import wandb_internal_pb2 as pb
from wandb.sdk.internal import datastore

path, mib = sys.argv[1], float(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
target = int(mib * 2**20)
rnd = random.Random(seed)
RUN_ID = "bench0001"

# The writer fsyncs after every record that spans blocks (~once per 32 KiB block);
# the bytes written are the same without it, and thousands of fsyncs only slow the
# generation down. WANDB_GEN_FSYNC=1 keeps them.
if not os.environ.get("WANDB_GEN_FSYNC"):
    datastore.os = type("os_no_fsync", (), {"fsync": staticmethod(lambda fd: None)})

tmp = path + ".tmp"
if os.path.exists(tmp):
    os.remove(tmp)
ds = datastore.DataStore()
ds.open_for_write(tmp)

num = 0
counts = {}


def write(rec):
    global num
    num += 1
    rec.num = num
    rec._info.stream_id = RUN_ID
    counts[rec.WhichOneof("record_type")] = counts.get(rec.WhichOneof("record_type"), 0) + 1
    ds.write(rec)


def jf(x):
    return repr(float(x))  # same text as json.dumps for finite floats


t_start = 1_722_000_000.0

# ---- run start ----------------------------------------------------------------
r = pb.Record()
r.header.version_info.producer = "0.17.5+bench"
r.header.version_info.min_consumer = "0.17.0"
write(r)

r = pb.Record()
run = r.run
run.run_id = RUN_ID
run.entity = "pparse"
run.project = "bench-wandb"
run.display_name = "glorious-bench-1"
run.host = "bench-host"
run.job_type = "train"
run.tags.extend(["bench", "synthetic"])
run.start_time.seconds = int(t_start)
cfg = {"lr": 3e-4, "batch_size": 64, "epochs": 100, "optimizer": "adamw",
       "model": {"layers": 24, "hidden": 1024, "heads": 16, "dropout": 0.1},
       "seed": seed, "dataset": "synthetic-v1"}
for k, v in cfg.items():
    it = run.config.update.add()
    it.key = k
    it.value_json = json.dumps({"desc": None, "value": v})
write(r)

r = pb.Record()
r.telemetry.python_version = "3.11.2"
r.telemetry.cli_version = "0.17.5"
r.telemetry.platform = "linux-x86_64"
r.telemetry.feature.offline = True
r.telemetry.feature.metric = True
r.telemetry.imports_init.torch = True
write(r)

r = pb.Record()
for k in ("_wandb", "trainer"):
    it = r.config.update.add()
    it.key = k
    it.value_json = json.dumps({"desc": None, "value": {"python_version": "3.11.2", "cli_version": "0.17.5",
                                                        "framework": "torch", "is_jupyter_run": False}})
write(r)

METRICS = ["train/loss", "train/acc", "train/lr", "train/grad_norm", "train/tokens_per_s",
           "val/loss", "val/acc", "val/perplexity", "sys/step_time", "sys/data_time",
           "epoch", "layer0/weight_norm", "layer1/weight_norm", "layer2/weight_norm",
           "attn/entropy", "mlp/sparsity", "loss_scale"]
for name in ("train/*", "val/*"):
    r = pb.Record()
    r.metric.glob_name = name
    r.metric.step_metric = "_step"
    write(r)

r = pb.Record()
for p in ("wandb-metadata.json", "requirements.txt", "config.yaml", "output.log"):
    f = r.files.files.add()
    f.path = p
    f.policy = pb.FilesItem.END if p != "output.log" else pb.FilesItem.LIVE
write(r)

# ---- the run --------------------------------------------------------------------
state = {m: rnd.random() for m in METRICS}
step = 0
t = t_start
next_report = 0.05
LINES = ["epoch {e} step {s}: loss={l:.4f} acc={a:.4f} lr={lr:.2e}",
         "  batch {s}/{n} | {tps:.0f} tok/s | grad_norm {g:.3f}",
         "Warning: gradient overflow, skipping step {s}; loss scale now {ls:.0f}",
         "saving checkpoint to ./checkpoints/step_{s}.pt"]


def big_json():
    """A 50-100 kB value: a logged table or a histogram."""
    size = rnd.randint(50_000, 100_000)
    if rnd.random() < 0.5:
        rows, n = [], 0
        while n < size:
            row = [rnd.randint(0, 10**6), rnd.choice(["cat", "dog", "bird", "fish"]),
                   round(rnd.random(), 6), "sample text %08x" % rnd.getrandbits(32)]
            rows.append(row)
            n += 50
        return json.dumps({"_type": "table", "columns": ["id", "label", "score", "text"], "data": rows})
    nb = size // 24
    return json.dumps({"_type": "histogram", "values": [rnd.randint(0, 10**5) for _ in range(nb)],
                       "bins": [round(-3 + 6 * i / nb, 6) for i in range(nb + 1)]})


t0 = time.time()
while ds._index < target:
    step += 1
    t += rnd.uniform(0.05, 0.5)
    for m in METRICS:
        state[m] = state[m] * 0.999 + rnd.gauss(0, 0.01)
    r = pb.Record()
    h = r.history
    h.step.num = step
    for k, v in (("_step", str(step)), ("_runtime", jf(t - t_start)), ("_timestamp", jf(t))):
        it = h.item.add()
        it.key = k
        it.value_json = v
    for m in METRICS:
        it = h.item.add()
        it.key = m
        it.value_json = jf(state[m])
    big = rnd.random() < 1 / 1500
    if big and rnd.random() < 0.6:
        it = h.item.add()
        it.key = "samples"
        it.value_json = big_json()
    write(r)

    if rnd.random() < 0.095:
        r = pb.Record()
        o = r.output_raw
        o.output_type = pb.OutputRawRecord.STDERR if rnd.random() < 0.1 else pb.OutputRawRecord.STDOUT
        o.timestamp.seconds = int(t)
        o.timestamp.nanos = int((t % 1) * 1e9)
        o.line = rnd.choice(LINES).format(e=step // 1000, s=step, n=1000, l=state["train/loss"],
                                          a=state["train/acc"], lr=3e-4, tps=rnd.uniform(1e4, 5e4),
                                          g=rnd.random() * 3, ls=2.0 ** rnd.randint(8, 16)) + "\n"
        write(r)
    if step % 30 == 0:
        r = pb.Record()
        s = r.stats
        s.stats_type = pb.StatsRecord.SYSTEM
        s.timestamp.seconds = int(t)
        for k in ("cpu", "memory", "disk", "proc.memory.rssMB", "proc.cpu.threads", "network.sent",
                  "network.recv", "gpu.0.gpu", "gpu.0.memory", "gpu.0.temp", "gpu.0.powerWatts"):
            it = s.item.add()
            it.key = k
            it.value_json = jf(round(rnd.uniform(0, 100), 2))
        write(r)
    if step % 50 == 0 or big:
        r = pb.Record()
        for m in METRICS[:8]:
            it = r.summary.update.add()
            it.key = m
            it.value_json = jf(state[m])
        if big and not h.item[-1].key == "samples":
            it = r.summary.update.add()
            it.key = "weights/histogram"
            it.value_json = big_json()
        write(r)

    if ds._index >= next_report * target:
        el = time.time() - t0
        print(f"  {ds._index / 2**20:7.1f} MiB, {num} records, {el:.0f} s", file=sys.stderr, flush=True)
        next_report += 0.05

r = pb.Record()
r.exit.exit_code = 0
r.exit.runtime = int(t - t_start)
write(r)
ds.close()
os.replace(tmp, path)
print("counts " + " ".join(f"{k}={v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
print(f"records {num} bytes {os.path.getsize(path)}")
