"""A cache on the local disk that every process of the machine shares, as
PFIO's ``MultiprocessFileCache``: DataLoader workers come and go each
epoch (and spawned ones share no memory), so what one worker fetched from
a remote archive, or decoded, is kept in a folder where the next epoch's
workers find it.

The folder holds two files: ``data``, the items' bytes appended one after
another, and ``index``, an open-addressing hash table of fixed-size slots
(key, offset, length, CRC-32) behind a header. Keys are digests, so
nothing a caller names (a member's name in an untrusted archive) becomes
a file name. Every access is a positional read or write (``os.pread``,
``os.pwrite``) under ``fcntl.flock`` on the index: shared to look up,
exclusive to add. An item's bytes are written before its slot, and data
is never rewritten, so a reader sees a whole item or none; a second
process adding the same key finds it there and adds nothing.

The cache is bounded by bytes and by items, both fixed when the folder is
made; once either is reached, nothing more is added (as PFIO's
``cache_size_limit`` freezes its cache) and what is there is still
served. Nothing is evicted: to start again, delete the folder while no
process uses it.

The index is read as untrusted: a header that is not a pparse cache is
refused, and a slot whose span leaves the data file or whose bytes fail
their CRC is a miss, never served.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import struct
import zlib
from typing import Any, Dict, Optional, Tuple, Union

__all__ = ["SharedCache", "cache_key"]

# magic, slots, items, max_items, max_bytes; then the slots.
_HEADER = struct.Struct("<16sQQQQ")
_MAGIC = b"pparse-cache\x00\x00\x00\x01"
_HEADER_SIZE = 64
# key (a 20-byte digest), offset, length, CRC-32 of the bytes.
_SLOT = struct.Struct("<20sQQI")
_EMPTY = bytes(20)
# Slots read in one pread while probing.
_PROBE = 16


def cache_key(*parts: Union[str, bytes]) -> bytes:
    """A key from its parts (an archive's fingerprint, a member's PATH,
    ...): a digest, so that a name never reaches the file system and
    parts cannot run into each other."""
    h = hashlib.blake2b(digest_size=20)
    for p in parts:
        b = p.encode("utf-8", "surrogatepass") if isinstance(p, str) else bytes(p)
        h.update(struct.pack("<Q", len(b)))
        h.update(b)
    key = h.digest()
    # The all-zero key marks an empty slot.
    return key if key != _EMPTY else b"\x01" + key[1:]


def _pread_all(fd: int, n: int, off: int) -> bytes:
    parts = []
    while n > 0:
        b = os.pread(fd, n, off)
        if not b:
            break
        parts.append(b)
        n -= len(b)
        off += len(b)
    return b"".join(parts)


def _pwrite_all(fd: int, data: Any, off: int) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.pwrite(fd, view, off)
        view = view[n:]
        off += n


class SharedCache:
    """Items by key in ``folder``, shared by every process that opens it.

    ``max_bytes`` and ``max_items`` bound it when the folder is made; an
    existing folder keeps the bounds it was made with. It pickles as its
    folder, and each process (a forked child too) opens the files again:
    a ``flock`` belongs to an open file, which a child would otherwise
    share with its parent.
    """

    def __init__(
        self,
        folder: Union[str, "os.PathLike[str]"],
        max_bytes: int = 16 << 30,
        max_items: int = 1 << 20,
    ) -> None:
        if max_bytes < 0 or max_items < 1:
            raise ValueError("max_bytes must be >= 0 and max_items >= 1")
        self.folder = os.path.abspath(os.fspath(folder))
        self._asked = (max_bytes, max_items)
        self._pid = -1
        self._fds: Tuple[int, int] = (-1, -1)
        self._open()

    def __reduce__(self) -> Any:
        return (SharedCache, (self.folder, *self._asked))

    def _open(self) -> None:
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        index = os.open(os.path.join(self.folder, "index"), flags, 0o600)
        try:
            data = os.open(os.path.join(self.folder, "data"), flags, 0o600)
        except BaseException:
            os.close(index)
            raise
        self._fds = (index, data)
        self._pid = os.getpid()
        try:
            fcntl.flock(index, fcntl.LOCK_EX)
            try:
                if os.fstat(index).st_size == 0:
                    max_bytes, max_items = self._asked
                    # Half full at most, so probes stay short.
                    slots = 1
                    while slots < 2 * max_items:
                        slots *= 2
                    head = _HEADER.pack(_MAGIC, slots, 0, max_items, max_bytes)
                    _pwrite_all(index, head.ljust(_HEADER_SIZE, b"\0"), 0)
                    os.ftruncate(index, _HEADER_SIZE + slots * _SLOT.size)
                self._read_header()
            finally:
                fcntl.flock(index, fcntl.LOCK_UN)
        except BaseException:
            self.close()
            raise

    def _read_header(self) -> Tuple[int, int, int, int]:
        """(slots, items, max_items, max_bytes), checked against the file."""
        index = self._fds[0]
        raw = _pread_all(index, _HEADER.size, 0)
        if len(raw) != _HEADER.size:
            raise ValueError(f"{self.folder}: not a pparse cache (index too short)")
        magic, slots, items, max_items, max_bytes = _HEADER.unpack(raw)
        if magic != _MAGIC:
            raise ValueError(f"{self.folder}: not a pparse cache (or another version of it)")
        if slots == 0 or slots & (slots - 1) or slots > 1 << 40:
            raise ValueError(f"{self.folder}: damaged pparse cache ({slots} slots)")
        if os.fstat(index).st_size < _HEADER_SIZE + slots * _SLOT.size:
            raise ValueError(f"{self.folder}: damaged pparse cache (index shorter than its slots)")
        return slots, items, max_items, max_bytes

    def _handles(self) -> Tuple[int, int]:
        if self._pid != os.getpid():
            # The parent's descriptors are left open: they are its.
            self._open()
        return self._fds

    def close(self) -> None:
        """Lets go of the files (in this process; the folder stays)."""
        if self._pid == os.getpid():
            for fd in self._fds:
                if fd >= 0:
                    os.close(fd)
        self._fds = (-1, -1)
        self._pid = -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _find(self, index: int, slots: int, key: bytes) -> Tuple[int, Optional[Tuple[int, int, int]]]:
        """The slot holding ``key`` (and its offset, length, CRC), or the
        empty slot where it would go and None. Linear probing."""
        mask = slots - 1
        at = int.from_bytes(key[:8], "little") & mask
        seen = 0
        while seen < slots:
            n = min(_PROBE, slots - at, slots - seen)
            raw = _pread_all(index, n * _SLOT.size, _HEADER_SIZE + at * _SLOT.size)
            for i in range(len(raw) // _SLOT.size):
                k, off, length, crc = _SLOT.unpack_from(raw, i * _SLOT.size)
                if k == key:
                    return at + i, (off, length, crc)
                if k == _EMPTY:
                    return at + i, None
            if len(raw) < n * _SLOT.size:
                break
            seen += n
            at = (at + n) & mask
        return -1, None

    def get(self, key: bytes) -> Optional[bytes]:
        """The bytes kept under ``key``, or None (never kept, or not
        whole: a damaged cache is a miss)."""
        index, data = self._handles()
        fcntl.flock(index, fcntl.LOCK_SH)
        try:
            slots = self._read_header()[0]
            found = self._find(index, slots, key)[1]
        finally:
            fcntl.flock(index, fcntl.LOCK_UN)
        if found is None:
            return None
        off, length, crc = found
        # Data is only ever appended: what a slot points to does not
        # change, so it is read without the lock.
        if off + length > os.fstat(data).st_size:
            return None
        body = _pread_all(data, length, off)
        if len(body) != length or zlib.crc32(body) != crc:
            return None
        return body

    def put(self, key: bytes, value: Any) -> bool:
        """Keeps ``value`` (bytes-like) under ``key``. False when the
        cache is full (nothing is added) or another process added it
        first (its item stays)."""
        index, data = self._handles()
        body = memoryview(value).cast("B")
        fcntl.flock(index, fcntl.LOCK_EX)
        try:
            slots, items, max_items, max_bytes = self._read_header()
            at, found = self._find(index, slots, key)
            if found is not None or at < 0:
                return False
            end = os.fstat(data).st_size
            if items >= max_items or end + len(body) > max_bytes:
                return False
            try:
                _pwrite_all(data, body, end)
            except OSError as e:
                # A full disk stops the cache, not the training; the
                # bytes written are past every slot's span.
                if e.errno in (errno.ENOSPC, errno.EDQUOT):
                    return False
                raise
            _pwrite_all(index, _SLOT.pack(key, end, len(body), zlib.crc32(body)), _HEADER_SIZE + at * _SLOT.size)
            _pwrite_all(index, struct.pack("<Q", items + 1), 24)
            return True
        finally:
            fcntl.flock(index, fcntl.LOCK_UN)

    def stats(self) -> Dict[str, int]:
        """``items``, ``bytes`` (of data), and the bounds ``max_items`` and
        ``max_bytes``."""
        index, data = self._handles()
        fcntl.flock(index, fcntl.LOCK_SH)
        try:
            _, items, max_items, max_bytes = self._read_header()
            size = os.fstat(data).st_size
        finally:
            fcntl.flock(index, fcntl.LOCK_UN)
        return {"items": items, "bytes": size, "max_items": max_items, "max_bytes": max_bytes}
