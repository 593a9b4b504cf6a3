"""Writes the seeds of the deflate_pieces fuzz target (fuzz/README.md):
a byte that sets the piece size, then a raw deflate stream from Python's
zlib (most flushed every 4 KiB, so that they have many blocks). Run from the repository root: python3 fuzz/seeds/deflate_pieces.py"""
import zlib

OUT = "fuzz/corpus/deflate_pieces/"
text = b"".join(open(p, "rb").read() for p in ["README.md", "docs/contract.md"])
binary = open("/usr/bin/ls", "rb").read()[:60000]


def raw(data, level=6, strategy=zlib.Z_DEFAULT_STRATEGY, flush=zlib.Z_FULL_FLUSH):
    """Flushed every 4 KiB: blocks small enough for the pieces to start in."""
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 8, strategy)
    out = b""
    for i in range(0, len(data), 4096):
        out += c.compress(data[i:i + 8192])
        if flush is not None:
            out += c.flush(flush)
    return out + c.flush()


flipped = bytearray(raw(text))
flipped[len(flipped) // 2] ^= 0x20
seeds = {
    "text6": bytes([0]) + raw(text),
    "binary9": bytes([3]) + raw(binary, 9),
    "fixed": bytes([1]) + raw(text, 6, zlib.Z_FIXED),
    "stored_holding_deflate": bytes([2]) + raw(raw(text), 0),
    "sync_flush": bytes([0]) + raw(binary, 6, flush=zlib.Z_SYNC_FLUSH),
    "one_stream": bytes([7]) + raw(text, 6, flush=None),
    "huffman_only": bytes([5]) + raw(text, 6, zlib.Z_HUFFMAN_ONLY),
    "flipped": bytes([0]) + bytes(flipped),
    "cut": bytes([0]) + raw(binary)[:20000],
}
for name, data in seeds.items():
    with open(OUT + name, "wb") as f:
        f.write(data)
