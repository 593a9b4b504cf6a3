"""The containers of a file as an fsspec filesystem, protocol ``pparse``.

Registered through the ``fsspec.specs`` entry point, so pandas, Dask,
Hugging Face ``datasets`` and anything else that opens URLs with fsspec
read members of nested archives through pparse::

    import pandas as pd
    pd.read_csv("pparse://backup.tar/data/inner.zip/x.csv::file:///data/backup.tar.gz")

The path inside comes after ``pparse://`` (PATHs as the ``pparse`` command
takes them); the container's URL after ``::``, as fsspec chains
filesystems, or as ``fo=`` (``fsspec.filesystem("pparse",
fo="s3://bucket/backup.tar.gz")``). The container is read by pparse
itself: local files, ``http(s)://`` and ``s3://`` (credentials and
endpoint from the environment, as for :func:`pparse.open`), with range
requests and never whole.

Listing and ``info`` come from pparse's parse, kept in its index
(``index=True``, the default: the user's cache folder), so a worker that
receives the filesystem (it pickles as its arguments) opens the index and
does not scan the archive again. Reads fetch ranges of the member through
pparse. A damaged member lists with its ``status`` and ``detail``;
reading it raises :class:`pparse.DamagedError`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

import pparse

# Options of the container's hop that pparse reads from elsewhere (the
# environment) or that change nothing for reading.
_IGNORED = {"anon", "auto_mkdir", "skip_instance_cache", "use_listings_cache"}


def _container_url(fo: str, protocol: Optional[str], options: Optional[Dict[str, Any]]) -> str:
    options = {k: v for k, v in (options or {}).items() if k not in _IGNORED}
    if options:
        raise ValueError(
            f"pparse reads the container itself and does not take {sorted(options)}: "
            "set credentials and endpoints in the environment (AWS_ACCESS_KEY_ID, "
            "AWS_ENDPOINT_URL, ...)"
        )
    if not fo:
        raise ValueError("pparse:// needs the container: chain it (pparse://PATH::s3://...) or pass fo=")
    if protocol in (None, "file", "local"):
        return fo
    if protocol in ("s3", "s3a", "http", "https"):
        return f"{'s3' if protocol == 's3a' else protocol}://{fo}"
    raise ValueError(f"pparse cannot read a container over {protocol}:// (file, http(s) and s3 only)")


class PparseFileSystem(AbstractFileSystem):
    """A file's containers, at any depth, as a read-only filesystem."""

    protocol = "pparse"
    root_marker = ""

    def __init__(
        self,
        fo: str = "",
        target_protocol: Optional[str] = None,
        target_options: Optional[Dict[str, Any]] = None,
        index: Union[None, bool, str] = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(fo=fo, target_protocol=target_protocol, target_options=target_options, index=index, **kwargs)
        if target_protocol is None and "://" in fo:
            target_protocol, fo = fo.split("://", 1)
        self.source = pparse.open(_container_url(fo, target_protocol, target_options), index=index)

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        path = str(path)
        if path.startswith("pparse://"):
            path = path[len("pparse://") :]
        return path.strip("/")

    @staticmethod
    def _entry(e: Dict[str, Any]) -> Dict[str, Any]:
        folder = e["kind"] == "dir" or e.get("container")
        out = dict(e)
        out["name"] = e["path"].rstrip("/")
        out["type"] = "directory" if folder else "file"
        out["size"] = e["size"] if e["size"] is not None else 0
        return out

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> List[Any]:
        path = self._strip_protocol(path)
        try:
            entries = self.source.list(path)
        except pparse.NotAContainer:
            # fsspec lists a file as itself.
            entries = [self.source.stat(path)]
        except pparse.NotFound as e:
            raise FileNotFoundError(path) from e
        out = [self._entry(e) for e in entries]
        return out if detail else [e["name"] for e in out]

    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        path = self._strip_protocol(path)
        if not path:
            return {"name": "", "size": 0, "type": "directory"}
        try:
            return self._entry(self.source.stat(path))
        except pparse.NotFound as e:
            raise FileNotFoundError(path) from e

    def cat_file(self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any) -> bytes:
        path = self._strip_protocol(path)
        with self.source.open(path, complete=True) as f:
            size = f.size
            lo = 0 if start is None else (max(size + start, 0) if start < 0 else min(start, size))
            hi = size if end is None else (max(size + end, 0) if end < 0 else min(end, size))
            if hi <= lo:
                return b""
            f.seek(lo)
            return f.read(hi - lo)

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Any = None,
        autocommit: bool = True,
        cache_options: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> "PparseFile":
        if mode != "rb":
            raise PermissionError("pparse:// is read-only")
        path = self._strip_protocol(path)
        return PparseFile(self, path, block_size=block_size, cache_options=cache_options, **kwargs)

    def ukey(self, path: str) -> str:
        info = self.info(path)
        return f"{self.source._recipe}:{info['name']}:{info['size']}:{info.get('status')}"


class PparseFile(AbstractBufferedFile):
    """A member, read in ranges through pparse (never whole)."""

    def __init__(self, fs: PparseFileSystem, path: str, **kwargs: Any) -> None:
        # Opening checks the member is whole: a damaged one raises
        # DamagedError here, before any byte is read.
        self._member = fs.source.open(path, complete=True)
        super().__init__(fs, path, mode="rb", size=self._member.size, **kwargs)

    def _fetch_range(self, start: int, end: int) -> bytes:
        end = min(end, self.size)
        if end <= start:
            return b""
        self._member.seek(start)
        return self._member.read(end - start)

    def close(self) -> None:
        super().close()
        self._member.close()
