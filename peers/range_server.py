"""A small HTTP server with Range support, for peers/remote.sh.

Serves the files of one folder on 127.0.0.1:PORT (HEAD, GET, and GET with
one `Range: bytes=a-b`), counting requests and bytes sent; `GET /_stats`
returns the counts as JSON. Python's http.server has no Range support.
"""
import http.server
import json
import os
import re
import sys

ROOT = sys.argv[1]
PORT = int(sys.argv[2])
STATS = {"requests": 0, "bytes": 0}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.serve(body=False)

    def do_GET(self):
        if self.path == "/_stats":
            data = json.dumps(STATS).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.serve(body=True)

    def serve(self, body):
        STATS["requests"] += 1
        path = os.path.join(ROOT, os.path.basename(self.path.split("?")[0]))
        if not os.path.isfile(path):
            self.send_error(404)
            return
        size = os.path.getsize(path)
        start, end = 0, size - 1
        m = re.match(r"bytes=(\d*)-(\d*)$", self.headers.get("Range", ""))
        if m:
            if m.group(1):
                start = int(m.group(1))
                end = int(m.group(2)) if m.group(2) else size - 1
            else:
                start = max(0, size - int(m.group(2)))
            end = min(end, size - 1)
            if start > end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        if not body:
            return
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)
                STATS["bytes"] += len(chunk)


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
