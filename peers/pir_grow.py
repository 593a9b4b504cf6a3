"""Grows a program Paddle printed to at least N ops (default 1,000,000):
the ops of its top-level block are repeated, each copy's values renumbered
(%12 -> %12+k*step, %arg_3 likewise) so every copy defines what it uses.

    python peers/pir_grow.py printed.txt grown.txt [N]
"""

import re
import sys

src, dst = sys.argv[1], sys.argv[2]
want = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
lines = open(src).read().split("\n")
start = lines.index("{") + 1
end = len(lines) - 1 - lines[::-1].index("}")
body = lines[start:end]
ops = sum(1 for l in body if l.lstrip().startswith("("))
nums = [int(n) for n in re.findall(r"%(\d+)", "\n".join(body))]
args = [int(n) for n in re.findall(r"%arg_(\d+)", "\n".join(body))]
step = max(nums) + 1
astep = (max(args) + 1) if args else 0
copies = -(-want // ops)
value = re.compile(r"%(arg_)?(\d+)")
with open(dst, "w") as f:
    f.write("{\n")
    for k in range(copies):
        def shift(m, k=k):
            if m.group(1):
                return "%arg_" + str(int(m.group(2)) + k * astep)
            return "%" + str(int(m.group(2)) + k * step)
        f.write(value.sub(shift, "\n".join(body)))
        f.write("\n")
    f.write("}\n")
print(f"{copies} copies of {ops} ops: {copies * ops} ops", file=sys.stderr)
