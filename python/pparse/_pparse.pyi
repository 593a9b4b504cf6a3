"""Type stubs of the extension module (the Python half wraps it: see
``pparse/__init__.py``)."""

from os import PathLike
from typing import Any, Dict, List, Optional, Tuple, Union

class Error(Exception):
    path: str

class NotFound(Error): ...
class NotAContainer(Error): ...
class NoContent(Error): ...

class DamagedError(Error):
    offset: int
    reason: str
    status: str

def open(path: Union[str, PathLike[str]], index: Union[None, bool, str] = ...) -> Source: ...

class Source:
    closed: bool
    def tree_json(self, path: str = ...) -> str: ...
    def list(self, path: str = ..., recursive: bool = ...) -> List[Dict[str, Any]]: ...
    def stat(self, path: str) -> Dict[str, Any]: ...
    def open(self, path: str, complete: bool = ...) -> File: ...
    def sub(self, path: str) -> Source: ...
    def tensors(self, path: str = ...) -> List[Tensor]: ...
    def close(self) -> None: ...

class File:
    size: int
    status: str
    damage: List[Tuple[int, int, str, str]]
    def read(self, size: int = ...) -> bytes: ...
    def seek(self, offset: int, whence: int = ...) -> int: ...
    def tell(self) -> int: ...
    def close(self) -> None: ...

class Array:
    mapped: bool
    __array_interface__: Dict[str, Any]

class Tensor:
    name: str
    dtype: str
    shape: Tuple[int, ...]
    stride: Optional[Tuple[int, ...]]
    source: str
    offset: int
    length: int
    status: str
    detail: Optional[str]
    big_endian: bool
    def array(self, strict: bool = ..., upcast: bool = ...) -> Tuple[Array, Optional[str]]: ...
