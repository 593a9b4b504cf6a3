"""Writes a large ONNX model with the onnx package, for peers/onnx.sh.

    python onnx_gen.py DIR MIB [SEED]

DIR/big.onnx          the model with its weights inline (raw_data), by onnx.save_model
DIR/ext/big.onnx      the same model saved with save_as_external_data=True,
DIR/ext/big.onnx.data all_tensors_to_one_file=True, location="big.onnx.data"
                      (tensors under onnx's 1 KiB threshold stay inline)

The graph is a chain X[1, d0] -> (MatMul W_i[d_i, d_i+1] -> Add b_i -> Mul g_i -> Relu)*
with widths drawn from 384..1024, a Reshape (INT64 shape initializer) every 25 layers,
until about MIB MiB of weights. Weights are seeded normal floats (nothing sparse or
compressible); a given MIB and SEED always give the same files. MIB must keep the model
under protobuf's 2 GiB limit. Prints "initializers N bytes B" on stdout, last line.
"""

import os
import shutil
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out_dir, mib = sys.argv[1], float(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
if mib > 1900:
    sys.exit("onnx_gen.py: MIB must stay under ~1900 (protobuf's 2 GiB limit)")
target = int(mib * 2**20)
rng = np.random.default_rng(seed)
WIDTHS = [384, 512, 640, 768, 896, 1024]

inits, nodes = [], []
d = int(rng.choice(WIDTHS))
x = "input"
graph_in = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, d])
total, i, t0 = 0, 0, time.time()
next_report = 0.1
while total < target:
    d2 = int(rng.choice(WIDTHS))
    p = f"layers.{i}"
    w = (rng.standard_normal((d, d2), dtype=np.float32) * 0.02)
    b = rng.standard_normal(d2, dtype=np.float32) * 0.01
    g = 1 + rng.standard_normal(d2, dtype=np.float32) * 0.05
    for name, arr in ((f"{p}.linear.weight", w), (f"{p}.linear.bias", b), (f"{p}.norm.weight", g)):
        inits.append(numpy_helper.from_array(arr, name))
        total += arr.nbytes
    nodes += [
        helper.make_node("MatMul", [x, f"{p}.linear.weight"], [f"{p}.mm"], name=f"{p}/MatMul"),
        helper.make_node("Add", [f"{p}.mm", f"{p}.linear.bias"], [f"{p}.add"], name=f"{p}/Add"),
        helper.make_node("Mul", [f"{p}.add", f"{p}.norm.weight"], [f"{p}.mul"], name=f"{p}/Mul"),
        helper.make_node("Relu", [f"{p}.mul"], [f"{p}.out"], name=f"{p}/Relu"),
    ]
    x, d = f"{p}.out", d2
    if i % 25 == 24:
        shape = np.array([1, d], dtype=np.int64)
        inits.append(numpy_helper.from_array(shape, f"{p}.reshape.shape"))
        nodes.append(helper.make_node("Reshape", [x, f"{p}.reshape.shape"], [f"{p}.reshaped"],
                                      name=f"{p}/Reshape"))
        x = f"{p}.reshaped"
    i += 1
    if total >= next_report * target:
        print(f"  {total / 2**20:7.0f} MiB, {len(inits)} initializers, {time.time() - t0:.0f} s",
              file=sys.stderr, flush=True)
        next_report += 0.1
del w, b, g

nodes.append(helper.make_node("Identity", [x], ["output"], name="output/Identity"))
graph_out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, d])
graph = helper.make_graph(nodes, "pparse_bench", [graph_in], [graph_out], initializer=inits)
model = helper.make_model(graph, producer_name="pparse-bench", producer_version="1",
                          opset_imports=[helper.make_opsetid("", 17)])
helper.set_model_props(model, {"seed": str(seed), "mib": str(mib)})
n_inits = len(inits)
del inits

os.makedirs(out_dir, exist_ok=True)
inline = os.path.join(out_dir, "big.onnx")
print(f"  saving {inline} ...", file=sys.stderr, flush=True)
onnx.save_model(model, inline + ".tmp")
os.replace(inline + ".tmp", inline)

# External data: onnx appends to an existing data file, so start from an empty folder.
ext_tmp = os.path.join(out_dir, "ext.tmp")
shutil.rmtree(ext_tmp, ignore_errors=True)
os.makedirs(ext_tmp)
print(f"  saving {out_dir}/ext/big.onnx + big.onnx.data ...", file=sys.stderr, flush=True)
onnx.save_model(model, os.path.join(ext_tmp, "big.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="big.onnx.data")
ext = os.path.join(out_dir, "ext")
shutil.rmtree(ext, ignore_errors=True)
os.replace(ext_tmp, ext)
print(f"  done in {time.time() - t0:.0f} s", file=sys.stderr)
print(f"initializers {n_inits} bytes {os.path.getsize(inline)}")
