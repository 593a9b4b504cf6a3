"""PyTorch datasets over the members of an archive (``pip install
pparse[torch]``), read through pparse in DataLoader workers::

    from torch.utils.data import DataLoader
    from pparse.torch import MemberDataset, MemberStream

    ds = MemberDataset("s3://bucket/train.zip", suffix=".jpg", index="train.pidx",
                       transform=decode, cache="/tmp/train-cache")
    for batch in DataLoader(ds, batch_size=64, shuffle=True, num_workers=8): ...

    stream = MemberStream("shard-0001.tar.gz", index="shard-0001.pidx", on_damage="skip")
    for name, data in DataLoader(stream, batch_size=None, num_workers=2): ...
    stream.skipped()      # what the epoch's workers could not read, and why

Members are listed once, when the dataset is made, and kept as one bytes
object of names and a numpy array of offsets: a worker reading a Python
list of a million strings would write to each one's reference count and
so copy every page of it (PyTorch's well-known DataLoader memory growth).
The dataset pickles as that listing and what opens the archive again
(spawn and forkserver workers); each worker opens the archive itself, on
its first read, never sharing the parent's handle.

``cache=FOLDER`` keeps members (and, with ``cache_items=TAG``, what the
transform made of them) in a :class:`pparse.cache.SharedCache` that every
worker and process of the machine shares, keyed by the archive's
fingerprint and the member's PATH.
"""

from __future__ import annotations

import fnmatch
import json
import os
import pickle
import shutil
import tempfile
import uuid
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch.utils.data

import pparse

from .cache import SharedCache, cache_key

__all__ = ["MemberDataset", "MemberStream"]

Transform = Callable[[str, bytes], Any]


def _fingerprint(src: pparse.Source) -> bytes:
    """The archive's identity, the first part of every cache key: a
    changed archive gets new keys, so nothing cached from it before is
    served for it. ``Source.fingerprint`` (its size, mtime or the server's
    ETag, and a hash of its first and last 64 KiB); for a local file also
    its inode and change time, which this machine's cache may use and
    which catch a file rewritten in place with its mtime set back."""
    path, _index, sub = src._recipe
    parts = ["v2", src.fingerprint or "", sub]
    if "://" not in path:
        st = os.stat(path)
        parts += [str(st.st_ino), str(st.st_ctime_ns)]
    return "\0".join(parts).encode("utf-8", "surrogatepass")


def _select(
    entries: List[Dict[str, Any]],
    pattern: Optional[str],
    suffix: Union[None, str, Tuple[str, ...]],
) -> List[str]:
    """The PATHs of the files among ``entries``, in their order. Without a
    filter, containers are opened and their files taken instead (a tar's
    members, not the tar); a container the filter names is a member, whole
    (a tar of ``.npz`` files with ``suffix=".npz"``)."""
    filtered = pattern is not None or suffix is not None
    whole: set = set()
    out = []
    for e in entries:
        if e["kind"] != "file":
            continue
        p = e["path"]
        if whole:
            parts = p.split("/")
            if any("/".join(parts[:k]) in whole for k in range(1, len(parts))):
                continue
        if pattern is not None and not fnmatch.fnmatchcase(p, pattern):
            continue
        if suffix is not None and not p.endswith(suffix):
            continue
        if e["container"]:
            if not filtered:
                continue
            whole.add(p)
        out.append(p)
    return out


def _remove_folder(folder: str, pid: int) -> None:
    # Only the process that made it: a forked worker runs finalizers too.
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


class _Members:
    """The listing, the archive and the cache both datasets share."""

    def __init__(
        self,
        source: Union[str, "os.PathLike[str]", pparse.Source],
        root: str = "",
        pattern: Optional[str] = None,
        suffix: Union[None, str, Sequence[str]] = None,
        transform: Optional[Transform] = None,
        index: Union[None, bool, str, "os.PathLike[str]"] = None,
        cache: Union[None, str, "os.PathLike[str]", SharedCache] = None,
        cache_items: Optional[str] = None,
    ) -> None:
        if isinstance(source, pparse.Source):
            if index is not None:
                raise ValueError("index= is for a path or URL: a Source was opened with its own")
            src = source
        else:
            src = pparse.open(source, index=index)
        if cache_items is not None and cache is None:
            raise ValueError("cache_items= needs cache=")
        sfx = tuple(suffix) if suffix is not None and not isinstance(suffix, str) else suffix
        names = [p.encode("utf-8", "surrogatepass") for p in _select(src.list(root, recursive=True), pattern, sfx)]
        self._offsets = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum([len(n) for n in names], out=self._offsets[1:])
        self._names = b"".join(names)
        del names
        self._recipe = src._recipe
        self._fp = _fingerprint(src)
        self._src: Optional[pparse.Source] = src
        # The process that has checked the archive is still the one listed.
        self._checked = os.getpid()
        self.transform = transform
        if cache is not None and not isinstance(cache, SharedCache):
            # Room for every member and a transformed item of each.
            cache = SharedCache(cache, max_items=max(2 * len(self), 1 << 16))
        self.cache = cache
        self._cache_items = cache_items

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def name(self, i: int) -> str:
        """The PATH of member ``i``."""
        lo, hi = int(self._offsets[i]), int(self._offsets[i + 1])
        return self._names[lo:hi].decode("utf-8", "surrogatepass")

    def names(self) -> Iterator[str]:
        """Every member's PATH, in order."""
        return (self.name(i) for i in range(len(self)))

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        # Opened again in the worker, on its first read: a cached epoch
        # asks the archive nothing.
        state["_src"] = None
        state["_checked"] = None
        return state

    def _source(self) -> pparse.Source:
        if self._src is None:
            self._src = pparse._source(*self._recipe)
        if self._checked != os.getpid():
            if _fingerprint(self._src) != self._fp:
                raise pparse.Error(
                    f"{self._recipe[0]} changed since the dataset listed it: make the dataset again"
                )
            self._checked = os.getpid()
        return self._src

    def _member(self, name: str) -> bytes:
        key = None
        if self.cache is not None:
            key = cache_key(self._fp, "member", name)
            data = self.cache.get(key)
            if data is not None:
                return data
        with self._source().open(name, complete=True) as f:
            data = f.read()
        if key is not None:
            self.cache.put(key, data)
        return data

    def _item(self, name: str, default: Callable[[str, bytes], Any]) -> Any:
        key = None
        if self._cache_items is not None:
            key = cache_key(self._fp, "item", self._cache_items, name)
            blob = self.cache.get(key)
            if blob is not None:
                return pickle.loads(blob)
        data = self._member(name)
        out = (self.transform or default)(name, data)
        if key is not None:
            self.cache.put(key, pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
        return out


class MemberDataset(_Members, torch.utils.data.Dataset):
    """The files in an archive, by number: ``ds[i]`` is member ``i``'s
    bytes, or ``transform(PATH, bytes)``. Members are read at random
    through pparse (with ``index=``, from its persistent index: a worker
    decodes no more than the member it reads).

    ``source``: a path, URL or :class:`pparse.Source`; ``root``: the PATH
    to list below; ``pattern`` (``fnmatch`` on the PATH) and ``suffix``
    (one or a sequence) keep what they match. Without a filter, every file
    at any depth is a member and containers are opened; a container that a
    filter names is a member, whole.

    A damaged member raises :class:`pparse.DamagedError` when read (a
    number must give an item: to skip damaged members, stream them with
    :class:`MemberStream`). ``cache``: a folder or :class:`SharedCache`;
    ``cache_items``: a tag naming the transform, to keep its results too
    (pickled; only for a transform that gives the same item every time,
    and change the tag when the transform changes).
    """

    def __getitem__(self, i: int) -> Any:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"member {i} of {n}")
        return self._item(self.name(i), _bytes_only)


def _bytes_only(name: str, data: bytes) -> bytes:
    return data


def _named(name: str, data: bytes) -> Tuple[str, bytes]:
    return name, data


def _distributed() -> Tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class MemberStream(_Members, torch.utils.data.IterableDataset):
    """The files in an archive in its order, as ``(PATH, bytes)`` or
    ``transform(PATH, bytes)``, split between ranks and DataLoader
    workers: each takes one contiguous run of members, so a ``.tar.gz`` is
    read forward and decoded once. ``rank`` and ``world_size`` default to
    ``torch.distributed``'s when it is initialised (taken when the stream
    is made), else 0 and 1; ``len()`` is this rank's share.

    ``on_damage``: ``"raise"`` (the default) lets a damaged member's
    :class:`pparse.DamagedError` end the epoch; ``"skip"`` goes on without
    it and reports it: :meth:`skipped` lists what every worker skipped,
    with why. Workers write their reports to files in ``report`` (a
    folder; by default a temporary one, removed with the stream), one file
    per worker process: it works alike under fork, spawn and forkserver
    (the stream pickles as the folder's path), needs no lock (one writer a
    file), names what was lost rather than counting it, and outlives a
    worker that dies. Other arguments are :class:`MemberDataset`'s.
    """

    def __init__(
        self,
        source: Union[str, "os.PathLike[str]", pparse.Source],
        root: str = "",
        pattern: Optional[str] = None,
        suffix: Union[None, str, Sequence[str]] = None,
        transform: Optional[Transform] = None,
        index: Union[None, bool, str, "os.PathLike[str]"] = None,
        cache: Union[None, str, "os.PathLike[str]", SharedCache] = None,
        cache_items: Optional[str] = None,
        on_damage: str = "raise",
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        report: Union[None, str, "os.PathLike[str]"] = None,
    ) -> None:
        if on_damage not in ("raise", "skip"):
            raise ValueError(f"on_damage must be 'raise' or 'skip', not {on_damage!r}")
        super().__init__(source, root, pattern, suffix, transform, index, cache, cache_items)
        self.on_damage = on_damage
        r, w = _distributed()
        self.rank = r if rank is None else rank
        self.world_size = w if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in a world of {self.world_size}")
        if report is None:
            self.report = tempfile.mkdtemp(prefix="pparse-skipped-")
            weakref.finalize(self, _remove_folder, self.report, os.getpid())
        else:
            self.report = os.path.abspath(os.fspath(report))
            os.makedirs(self.report, exist_ok=True)

    def __len__(self) -> int:
        n = len(self._offsets) - 1
        return n * (self.rank + 1) // self.world_size - n * self.rank // self.world_size

    def _span(self) -> Tuple[int, int]:
        """The members this worker of this rank reads: [lo, hi)."""
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        shard, shards = self.rank * workers + worker, self.world_size * workers
        n = len(self._offsets) - 1
        return n * shard // shards, n * (shard + 1) // shards

    def __iter__(self) -> Iterator[Any]:
        lo, hi = self._span()
        log = None
        try:
            for i in range(lo, hi):
                name = self.name(i)
                try:
                    item = self._item(name, _named)
                except pparse.DamagedError as e:
                    if self.on_damage == "raise":
                        raise
                    if log is None:
                        path = os.path.join(self.report, f"{os.getpid()}-{uuid.uuid4().hex}.jsonl")
                        log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                    line = {"path": name, "reason": str(e), "offset": getattr(e, "offset", None)}
                    os.write(log, (json.dumps(line) + "\n").encode())
                    continue
                yield item
        finally:
            if log is not None:
                os.close(log)

    def skipped(self) -> List[Dict[str, Any]]:
        """What was skipped since the stream was made (or since
        :meth:`reset_skipped`), by every worker: dicts of ``path``,
        ``reason`` and ``offset``. Read it after the epoch."""
        out = []
        try:
            files = sorted(os.listdir(self.report))
        except FileNotFoundError:
            return out
        for f in files:
            if not f.endswith(".jsonl"):
                continue
            with open(os.path.join(self.report, f), "rb") as fh:
                for line in fh:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        # The last line of a worker killed while writing it.
                        pass
        return out

    def reset_skipped(self) -> None:
        """Forgets what was skipped (call it before an epoch to count
        that epoch's alone)."""
        for f in os.listdir(self.report):
            if f.endswith(".jsonl"):
                os.remove(os.path.join(self.report, f))
