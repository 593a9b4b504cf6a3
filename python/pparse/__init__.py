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
"""

from __future__ import annotations

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


def io_stats() -> Dict[str, Union[int, float]]:
    """This process's work so far, as ``pparse --io-stats`` prints it:
    ``file_read``, ``decoded``, ``redecoded`` and ``from_cache`` (bytes),
    ``decoding_s`` and ``waiting_s`` (seconds). The counts only grow: take
    the difference over what you measure."""
    return dict(_pparse.io_stats())


def open(
    path: Union[str, "os.PathLike[str]"],
    index: Union[None, bool, str, "os.PathLike[str]"] = None,
) -> "Source":
    """Opens a file, a folder, or an ``http(s)://`` or ``s3://bucket/key``
    URL (read with range requests) and starts parsing it in the background.

    ``index``: where to keep what the parse learns, so that the next open
    of the same file starts from it: ``None`` (the default: nothing is
    written), ``True`` (the user's cache folder, as the ``pparse`` command
    does) or a file path.

    Raises ``OSError`` when it cannot be opened.
    """
    if index is not None and not isinstance(index, bool):
        index = os.fspath(index)
    return Source(_pparse.open(os.fspath(path), index))


class Source:
    """An opened file: its containers as a file system of PATHs
    (``outer.tar.gz/inner.zip/member``, as the ``pparse`` command takes them).

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stops the parse and lets go of the file."""
        self._inner.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._inner.closed

    def tree(self, path: str = "") -> Dict[str, Any]:
        """The extraction tree below ``path`` once it is parsed, as nested
        dicts: ``name``, ``path``, ``parser``, ``kind``, ``size``, ``status``,
        ``detail`` (when not complete), ``damage``, ``children``; the shape of
        ``pparse tree --json``."""
        return json.loads(self._inner.tree_json(path))

    def list(self, path: str = "", recursive: bool = False) -> List[Dict[str, Any]]:
        """The entries in ``path`` ("" for the top) as ``ls`` shows a
        directory, in the order their container holds them; with
        ``recursive``, every entry below, containers' contents included.

        Each entry is a dict: ``path``, ``name``, ``kind`` (``file``, ``dir``,
        ``symlink``, ...), ``size``, ``declared_size``, ``status``, ``detail``,
        ``container``, ``member``, ``parser``, ``mtime``, ``mode``.
        """
        return self._inner.list(path, recursive)

    def io_stats(self) -> Dict[str, Union[int, float]]:
        """This source's own work so far, as :func:`io_stats` gives the
        process's: what reading it cost, apart from other sources open
        beside it."""
        return dict(self._inner.io_stats())

    def stat(self, path: str) -> Dict[str, Any]:
        """The entry at ``path`` (a dict, as :meth:`list` gives)."""
        return self._inner.stat(path)

    def open(self, path: str, complete: bool = False) -> "File":
        """The bytes at ``path`` as a read-only binary file object, at any
        depth (a member of a zip in a tar.gz). What was recovered of a
        damaged member is readable and its ``status`` says so; with
        ``complete``, a damaged member raises :class:`DamagedError`."""
        return File(self._inner.open(path, complete), path)

    def sub(self, path: str) -> "Source":
        """A source rooted at ``path``: its PATHs are relative to it."""
        return Source(self._inner.sub(path))

    def tensors(self, path: Optional[str] = None) -> List["Tensor"]:
        """The tensors at or below ``path`` (the whole file by default), for
        every format pparse reads (PyTorch, safetensors, ONNX, NumPy, ...),
        as ``pparse tensors`` lists them."""
        return [Tensor(t) for t in self._inner.tensors(path or "")]

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
        batches = self._inner.records(path or "", types)
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
        return iter(self._inner.pickle_ops(path or ""))

    def ir(self, path: Optional[str] = None) -> Dict[str, Any]:
        """The programs of the Paddle IR text at ``path`` (what
        ``print(program)`` writes, or a program saved by ``paddle.jit.save``)
        as ``pparse ir --json`` gives them: ``programs`` (each with its
        ``ops``, their ``name``, ``results``, ``operands``, ``attributes``,
        types, byte spans and regions) and ``diagnostics`` (``severity``,
        ``message``, where)."""
        return json.loads(self._inner.ir_json(path or ""))


class File(io.RawIOBase):
    """The bytes of one entry: a seekable, read-only binary file.

    ``status`` and ``damage`` say what is wrong with them, if anything.
    """

    def __init__(self, inner: Any, path: str) -> None:
        super().__init__()
        self._f = inner
        self.name = path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        data = self._f.read(len(view))
        n = len(data)
        view[:n] = data
        return n

    def read(self, size: Optional[int] = -1) -> bytes:
        self._check()
        return self._f.read(-1 if size is None else size)

    def readall(self) -> bytes:
        return self.read(-1)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check()
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        self._check()
        return self._f.tell()

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on a closed file")

    @property
    def size(self) -> int:
        """Bytes present (for a cut member, what was recovered)."""
        return self._f.size

    @property
    def status(self) -> str:
        """``complete``, ``unverified``, ``truncated`` or ``corrupt``."""
        return self._f.status

    @property
    def damage(self) -> List[Tuple[int, int, str, str]]:
        """``(start, end, status, reason)`` of each damaged span."""
        return self._f.damage


class Tensor:
    """One tensor of a checkpoint, model or array file."""

    __slots__ = ("_t",)

    def __init__(self, inner: Any) -> None:
        self._t = inner

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

        holder, ext = self._t.array(strict, upcast)
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
