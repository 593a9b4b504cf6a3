"""pparse: nested, huge, truncated or corrupted files from Python.

Open a file, a folder or a URL and use its containers as a file system,
without unpacking anything::

    import pparse
    with pparse.open("backup.tar.gz") as src:
        for e in src.list("", recursive=True):
            print(e["path"], e["size"], e["status"])
        with src.open("photos.zip/cat.jpg") as f:
            PIL.Image.open(f)
        for t in src.tensors():
            print(t.name, t.dtype, t.shape, t.numpy().mean())

Parsing runs in the background in Rust, without the GIL; each call waits
only for what it needs. Damaged bytes are never passed off as whole: every
entry and tensor has a ``status`` (``complete``, ``truncated``,
``corrupt``), and reads that need whole bytes raise :class:`DamagedError`.

Sources, files and tensors go to other processes as workers need them:
they pickle as what opens them again (the path or URL, the index, the
PATH inside, a file's position), for ``spawn`` and ``forkserver``
workers; in a process forked from the one that opened them, the first
call opens the file again there, as the parent's parse cannot go on in
the child.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from . import _pparse
from ._pparse import Damage, DamagedError, Error, NoContent, NotAContainer, NotFound

__all__ = [
    "open",
    "io_stats",
    "set_threads",
    "threads",
    "manifest",
    "trace_io",
    "Source",
    "File",
    "Tensor",
    "Damage",
    "Error",
    "NotFound",
    "NotAContainer",
    "NoContent",
    "DamagedError",
    "DtypeWarning",
]

__version__ = "0.1.0"


class DtypeWarning(UserWarning):
    """A tensor's type needs a package that is not installed (``ml_dtypes``)."""


def manifest(
    path: Union[str, "os.PathLike[str]"],
    index: Union[None, bool, str, "os.PathLike[str]"] = None,
    algorithm: str = "sha256",
) -> List[Dict[str, Any]]:
    """Every file in the containers at ``path`` (a file or URL, as for
    :func:`open`), at any depth, with its digest: a dict per file with
    ``path``, ``size``, ``status`` and ``algorithm``'s hex digest of its
    bytes, or ``None`` and ``reason`` for a file that is not whole (its
    recovered bytes are not vouched for). Containers are opened, not
    digested. Members are read in ranges, never whole in memory.

    One call per archive is the unit of work to hand out to a cluster::

        client.map(pparse.manifest, ["s3://bucket/a.tar.gz", ...])
    """
    import hashlib

    out = []
    with open(path, index=index) as src:
        for e in src.list("", recursive=True):
            if e["kind"] != "file" or e["container"]:
                continue
            item = {"path": e["path"], "size": e["size"], "status": e["status"], algorithm: None}
            try:
                h = hashlib.new(algorithm)
                with src.open(e["path"], complete=True) as f:
                    while True:
                        block = f.read(1 << 20)
                        if not block:
                            break
                        h.update(block)
                item[algorithm] = h.hexdigest()
            except DamagedError as err:
                item["reason"] = str(err)
            out.append(item)
    return out


@contextlib.contextmanager
def trace_io(path: Union[str, "os.PathLike[str]"]) -> Iterator[None]:
    """Writes every read, decode, cache hit and wait of this process
    while the block runs to ``path``, as Chrome trace-event JSON (what
    ``pparse --trace-io`` writes; Perfetto and ``chrome://tracing`` open
    it), each with its bytes, time and thread::

        with pparse.trace_io("io.json"):
            src.open("a.tar/x.csv").read()
    """
    _pparse.trace_io_start(os.fspath(path))
    try:
        yield
    finally:
        _pparse.trace_io_stop()


def set_threads(n: int) -> None:
    """Decode one large gzip stream of an opened file, or its bzip2, xz
    or zstd blocks, on ``n`` threads (``pparse --threads``), for every
    source of this process opened
    after. The default, 1, decodes on the thread that reads: keep it in the
    worker processes of a DataLoader or Dask pool, which already use the
    cores. The bytes are the same either way."""
    _pparse.set_threads(n)


def threads() -> int:
    """The threads :func:`set_threads` set (1 by default)."""
    return _pparse.threads()


def io_stats() -> Dict[str, Union[int, float]]:
    """This process's work so far, as ``pparse --io-stats`` prints it:
    ``file_read``, ``decoded`` (``decoded_ahead`` of it by worker threads,
    see :func:`set_threads`), ``redecoded`` and ``from_cache`` (bytes),
    ``decoding_s`` and ``waiting_s`` (seconds), and what remote objects
    cost: ``remote_requests`` and ``remote_bytes`` (object bytes fetched).
    The counts only grow: take the difference over what you measure."""
    return dict(_pparse.io_stats())


# Handles of the process a child was forked from, held in the child and
# never used or freed there: their parse threads are the parent's, and a
# lock one of them held at the fork stays held in the child.
_PARENTS: List[Any] = []


def _source(path: str, index: Union[None, bool, str], sub: str) -> "Source":
    """Opens a source again from what it was opened with (unpickling)."""
    inner = _pparse.open(path, index)
    if sub:
        inner = inner.sub(sub)
    return Source(inner, (path, index, sub))


def _file(src: "Source", path: str, complete: bool, pos: int) -> "File":
    """Opens a file again at its position (unpickling)."""
    f = src.open(path, complete)
    f.seek(pos)
    return f


def open(
    path: Union[str, "os.PathLike[str]"],
    index: Union[None, bool, str, "os.PathLike[str]"] = None,
) -> "Source":
    """Opens a file, a folder, or an ``http(s)://`` or ``s3://bucket/key``
    URL (read with range requests) and starts parsing it in the background.

    ``index``: where to keep what the parse learns, so that the next open
    of the same file starts from it: ``None`` (the default: nothing is
    written), ``True`` (the user's cache folder, as the ``pparse`` command
    does), a file path (for this machine's copy of the file), or a place
    shared by every process and machine that reads the same bytes: a
    folder (one that exists, or a path ending with ``/``) or a URL
    (``s3://bucket/prefix/``, written there; ``https://…/``, read only),
    where the index is named by a hash of the file's size and ends. Write
    it once (open, let the parse finish), and every worker that opens the
    file with the same ``index`` starts from it without parsing.

    Raises ``OSError`` when it cannot be opened.
    """
    if index is not None and not isinstance(index, bool):
        index = os.fspath(index)
    path = os.fspath(path)
    if "://" not in path:
        # A worker may run in another folder.
        path = os.path.abspath(path)
    if isinstance(index, str) and "://" not in index:
        # abspath drops the "/" that says a folder yet to be made.
        folder = index.endswith(os.sep)
        index = os.path.abspath(index) + (os.sep if folder else "")
    return _source(path, index, "")


class Source:
    """An opened file: its containers as a file system of PATHs
    (``outer.tar.gz/inner.zip/member``, as the ``pparse`` command takes them).

    Use it as a context manager, or call :meth:`close`. It pickles as what
    opens it again, and a forked child opens it again on its first call.
    """

    def __init__(self, inner: Any, recipe: Tuple[str, Union[None, bool, str], str]) -> None:
        self._inner = inner
        # (path or URL, index, PATH inside): what opens it again.
        self._recipe = recipe
        self._pid = os.getpid()
        self._closed = False

    @property
    def _h(self) -> Any:
        """The handle of this process: opened again after a fork."""
        if self._pid != os.getpid():
            if self._closed:
                raise ValueError("I/O operation on a closed source")
            _PARENTS.append(self._inner)
            self._inner = _source(*self._recipe)._inner
            self._pid = os.getpid()
        return self._inner

    def __reduce__(self) -> Any:
        if self._closed:
            raise TypeError("a closed pparse.Source cannot be pickled")
        return (_source, self._recipe)

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stops the parse and lets go of the file."""
        if self._pid == os.getpid():
            self._inner.close()
        self._closed = True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed or (self._pid == os.getpid() and self._inner.closed)

    @property
    def fingerprint(self) -> Optional[str]:
        """The identity of this version of the file or object (its size,
        its mtime or the server's ETag, and a hash of its first and last
        64 KiB), as 32 hex digits: the same in every process and on every
        machine with the same bytes, and another one once the file
        changes. What a cache of its members outside pparse is keyed by.
        ``None`` for a folder."""
        return self._h.fingerprint()

    @property
    def parsing(self) -> bool:
        """Whether the background parse is still going (calls wait for
        what they need of it)."""
        return self._h.parsing

    @property
    def tree_loaded(self) -> bool:
        """Whether the whole extraction tree is in this process's memory.
        A source opened from an index opens and stats members from the
        index's records, mapped and shared by every process that reads the
        index; the tree (a few hundred bytes a member) is built only when
        something needs it whole: :meth:`tree`, :meth:`list`, a PATH the
        records cannot answer."""
        return self._h.tree_loaded

    def tree(self, path: str = "") -> Dict[str, Any]:
        """The extraction tree below ``path`` once it is parsed, as nested
        dicts: ``name``, ``path``, ``parser``, ``kind``, ``size``, ``status``,
        ``detail`` (when not complete), ``damage``, ``children``; the shape of
        ``pparse tree --json``."""
        return json.loads(self._h.tree_json(path))

    def list(self, path: str = "", recursive: bool = False) -> List[Dict[str, Any]]:
        """The entries in ``path`` ("" for the top) as ``ls`` shows a
        directory, in the order their container holds them; with
        ``recursive``, every entry below, containers' contents included.

        Each entry is a dict: ``path``, ``name``, ``kind`` (``file``, ``dir``,
        ``symlink``, ...), ``size``, ``declared_size``, ``status``, ``detail``,
        ``container``, ``member``, ``parser``, ``mtime``, ``mode``.
        """
        return self._h.list(path, recursive)

    def io_stats(self) -> Dict[str, Union[int, float]]:
        """This source's own work so far, as :func:`io_stats` gives the
        process's: what reading it cost, apart from other sources open
        beside it."""
        return dict(self._h.io_stats())

    def stat(self, path: str) -> Dict[str, Any]:
        """The entry at ``path`` (a dict, as :meth:`list` gives)."""
        return self._h.stat(path)

    def open(self, path: str, complete: bool = False) -> "File":
        """The bytes at ``path`` as a read-only binary file object, at any
        depth (a member of a zip in a tar.gz). What was recovered of a
        damaged member is readable and its ``status`` says so; with
        ``complete``, a damaged member raises :class:`DamagedError`."""
        return File(self._h.open(path, complete), path, self, complete)

    def sub(self, path: str) -> "Source":
        """A source rooted at ``path``: its PATHs are relative to it."""
        p, index, sub = self._recipe
        inner = self._h.sub(path)
        return Source(inner, (p, index, f"{sub}/{path}" if sub and path else sub or path))

    def tensors(self, path: Optional[str] = None) -> List["Tensor"]:
        """The tensors at or below ``path`` (the whole file by default), for
        every format pparse reads (PyTorch, safetensors, ONNX, NumPy, ...),
        as ``pparse tensors`` lists them."""
        return [Tensor(t, self, path or "") for t in self._h.tensors(path or "")]

    def records(
        self,
        path: Optional[str] = None,
        type: Union[None, str, Iterable[str]] = None,
        with_damage: bool = False,
    ) -> Iterator[Union[Dict[str, Any], Damage]]:
        """The records of the W&B log (``.wandb``) at or below ``path``, in
        file order, as dicts shaped like wunderbar's: ``number``, ``type``
        (``history``, ``summary``, ``run``, ...), ``offset`` (where its
        first chunk starts) and ``data``, the record's message as protobuf's
        ``MessageToDict`` gives it with field names kept, its lists of
        key/``value_json`` items (a history's ``item``, a summary's
        ``update``, ...) made into dicts of decoded values.

        ``type``: only records of this type (or these types). With
        ``with_damage``, the spans that hold no record pparse can vouch for
        come too, in order, as :class:`Damage` (``offset``, ``end``,
        ``status``, ``reason``); damage that the containers holding the log
        report over its bytes comes last.

        A thread reads and decodes ahead, a few thousand records at most:
        memory stays small however long the log. Raises :class:`Error` when
        ``path`` holds no log.
        """
        types = [type] if isinstance(type, str) else list(type or ())
        batches = self._h.records(path or "", types)
        try:
            if with_damage:
                for batch in batches:
                    yield from batch
            else:
                for batch in batches:
                    for e in batch:
                        if e.__class__ is dict:
                            yield e
        finally:
            batches.close()

    def pickle_ops(self, path: Optional[str] = None) -> Iterator[Tuple[int, str, Any]]:
        """The opcodes of the pickle at or below ``path`` (a ``.pkl``, or
        the ``data.pkl`` of a PyTorch checkpoint) as ``(pos, op, arg)``:
        what ``pickletools.genops`` yields, with the opcode's name for
        ``op`` and ``pos`` counted from the start of the pickle's file. Several
        pickles in one file follow each other. Nothing is unpickled.

        Raises :class:`DamagedError` (``offset``, ``reason``) where the
        pickle is cut or holds a byte that is no opcode, after the opcodes
        before it.
        """
        return iter(self._h.pickle_ops(path or ""))

    def ir(self, path: Optional[str] = None) -> Dict[str, Any]:
        """The programs of the Paddle IR text at ``path`` (what
        ``print(program)`` writes, or a program saved by ``paddle.jit.save``)
        as ``pparse ir --json`` gives them: ``programs`` (each with its
        ``ops``, their ``name``, ``results``, ``operands``, ``attributes``,
        types, byte spans and regions) and ``diagnostics`` (``severity``,
        ``message``, where)."""
        return json.loads(self._h.ir_json(path or ""))


class File(io.RawIOBase):
    """The bytes of one entry: a seekable, read-only binary file.

    ``status`` and ``damage`` say what is wrong with them, if anything. It
    pickles as what opens it again at its position, and a forked child
    opens it again on its first call.
    """

    def __init__(self, inner: Any, path: str, source: "Source", complete: bool) -> None:
        super().__init__()
        self._f = inner
        self.name = path
        self._src = source
        self._complete = complete
        # Kept here, so a forked child knows it without the parent's handle.
        self._pos = 0
        self._pid = os.getpid()

    @property
    def _h(self) -> Any:
        """The handle of this process: opened again after a fork."""
        if self._pid != os.getpid():
            _PARENTS.append(self._f)
            f = self._src._h.open(self.name, self._complete)
            f.seek(self._pos, io.SEEK_SET)
            self._f = f
            self._pid = os.getpid()
        return self._f

    def __reduce_ex__(self, protocol: Any) -> Any:
        if self.closed:
            raise TypeError("a closed pparse.File cannot be pickled")
        return (_file, (self._src, self.name, self._complete, self._pos))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        data = self.read(len(view))
        n = len(data)
        view[:n] = data
        return n

    def read(self, size: Optional[int] = -1) -> bytes:
        self._check()
        data = self._h.read(-1 if size is None else size)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check()
        self._pos = self._h.seek(offset, whence)
        return self._pos

    def tell(self) -> int:
        self._check()
        return self._pos

    def close(self) -> None:
        if not self.closed and self._pid == os.getpid():
            self._f.close()
        super().close()

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on a closed file")

    @property
    def size(self) -> int:
        """Bytes present (for a cut member, what was recovered)."""
        return self._h.size

    @property
    def status(self) -> str:
        """``complete``, ``unverified``, ``truncated`` or ``corrupt``."""
        return self._h.status

    @property
    def damage(self) -> List[Tuple[int, int, str, str]]:
        """``(start, end, status, reason)`` of each damaged span."""
        return self._h.damage


class Tensor:
    """One tensor of a checkpoint, model or array file."""

    __slots__ = ("_t", "_src", "_listed_at", "_pid")

    def __init__(self, inner: Any, source: "Source", listed_at: str) -> None:
        self._t = inner
        # Where it was listed, to find it again in a forked child.
        self._src = source
        self._listed_at = listed_at
        self._pid = os.getpid()

    def _h(self) -> Any:
        """The handle of this process: found again after a fork."""
        if self._pid != os.getpid():
            name, offset, source = self._t.name, self._t.offset, self._t.source
            again = self._src._h.tensors(self._listed_at)
            found = [t for t in again if (t.name, t.offset, t.source) == (name, offset, source)]
            if not found:
                raise Error(f"tensor {name} is not in {self._listed_at or 'the source'} any more")
            _PARENTS.append(self._t)
            self._t = found[0]
            self._pid = os.getpid()
        return self._t

    def __reduce__(self) -> Any:
        return (_tensor, (self._src, self._listed_at, self._t.name, self._t.offset, self._t.source))

    name = property(lambda self: self._t.name, doc="Its name in the file.")
    dtype = property(
        lambda self: self._t.dtype,
        doc="Element type as ``pparse tensors`` spells it (``F32``, ``BF16``, ``Q4_K``).",
    )
    shape = property(lambda self: self._t.shape, doc="Dimensions, outermost first.")
    stride = property(
        lambda self: self._t.stride, doc="Strides in elements, or None for C order."
    )
    source = property(
        lambda self: self._t.source, doc="PATH of the extraction holding the bytes."
    )
    offset = property(lambda self: self._t.offset, doc="Byte offset in ``source``.")
    length = property(lambda self: self._t.length, doc="Bytes it spans in ``source``.")
    status = property(
        lambda self: self._t.status, doc="``complete``, ``unverified``, ``truncated`` or ``corrupt``."
    )
    detail = property(lambda self: self._t.detail, doc="Why it is not complete.")

    def __repr__(self) -> str:
        s = "" if self.status == "complete" else f", status={self.status!r}"
        return f"Tensor({self.name!r}, {self.dtype}, {list(self.shape)}{s})"

    def numpy(self, strict: bool = True, upcast: bool = False) -> Any:
        """The tensor as a numpy array.

        When its bytes are whole bytes of a type numpy has, in a mapped file
        and aligned, the array is a read-only view on the file (no copy);
        otherwise a copy. bfloat16 and the float8 types come as ``ml_dtypes``
        types when that package is installed, else as raw bytes (``V2``,
        ``V1``) with a :class:`DtypeWarning`; ``upcast=True`` decodes them
        (and block-quantized GGML types, complex32, 4- and 6-bit types) to
        float32 or complex64 instead.

        Raises :class:`DamagedError` when bytes are missing, or when they
        are corrupt or unverified and ``strict`` (the default).
        """
        import numpy as np

        holder, ext = self._h().array(strict, upcast)
        arr = np.asarray(holder)
        if ext is None:
            return arr
        try:
            import ml_dtypes
        except ImportError:
            warnings.warn(
                f"tensor {self.name}: {self.dtype} needs ml_dtypes (pip install ml_dtypes); "
                "returning its raw bytes, or pass upcast=True for float32",
                DtypeWarning,
                stacklevel=2,
            )
            return arr
        return arr.view(getattr(ml_dtypes, ext))


def _tensor(src: Source, listed_at: str, name: str, offset: int, source: str) -> Tensor:
    """Finds a tensor again (unpickling)."""
    for t in src.tensors(listed_at or None):
        if (t.name, t.offset, t.source) == (name, offset, source):
            return t
    raise Error(f"tensor {name} is not in {listed_at or 'the source'} any more")
