"""The onnx package's listing of a model's initializers, the peer of `pparse tensors` in peers/onnx.sh.

    python onnx_list.py FILE.onnx

`onnx.load(FILE, load_external_data=False)`, then one line per initializer: name,
data type name, dims, and the byte length of its data (len(raw_data); for a tensor
stored outside the model, the `length` of its external_data entry, "?" if none).
The count goes to stderr as "initializers N".
"""

import sys

import onnx
from onnx import TensorProto

m = onnx.load(sys.argv[1], load_external_data=False)
out = sys.stdout
type_name = TensorProto.DataType.Name
n = 0
for t in m.graph.initializer:
    if t.data_location == TensorProto.EXTERNAL:
        ext = {e.key: e.value for e in t.external_data}
        size = ext.get("length", "?")
    else:
        size = len(t.raw_data)
    out.write(f"{t.name}\t{type_name(t.data_type)}\t{list(t.dims)}\t{size}\n")
    n += 1
print("initializers", n, file=sys.stderr)
