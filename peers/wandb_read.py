"""The wandb SDK's own reading of a .wandb log, the peer of `pparse records` in peers/wandb.sh.

    python wandb_read.py count FILE   # scan + Record.ParseFromString, count records per type
    python wandb_read.py json FILE    # the same + MessageToDict + json.dumps, a line per record

The loop is the one wandb's `sync` and `DataStore` users run: `DataStore().open_for_scan`,
`scan_data()` until None, `Record().ParseFromString(data)`.
`count` prints the counts per record type and the total to stdout; `json` prints one JSON
object per record to stdout (like `pparse records --json`). Both print the total as
"records N" on stderr, last line.
"""

import json
import sys
from collections import Counter

from wandb.proto import wandb_internal_pb2 as pb
from wandb.sdk.internal import datastore

mode, path = sys.argv[1], sys.argv[2]
if mode not in ("count", "json"):
    sys.exit("usage: wandb_read.py count|json FILE")

def records(path):
    """Each record of the log, parsed, as wandb's own readers do it."""
    ds = datastore.DataStore()
    ds.open_for_scan(path)
    while True:
        data = ds.scan_data()
        if data is None:
            return
        rec = pb.Record()
        rec.ParseFromString(data)
        yield rec


counts = Counter()
if mode == "count":
    for rec in records(path):
        counts[rec.WhichOneof("record_type")] += 1
    for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])):
        print(k, v)
    print("records", sum(counts.values()))
else:
    from google.protobuf.json_format import MessageToDict

    out = sys.stdout
    for rec in records(path):
        counts[rec.WhichOneof("record_type")] += 1
        out.write(json.dumps(MessageToDict(rec, preserving_proto_field_name=True)))
        out.write("\n")
    out.flush()
print("records", sum(counts.values()), file=sys.stderr)
