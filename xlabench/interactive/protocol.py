"""MLGO's interactive wire format (LLVM's `InteractiveModelRunner` and training log), both directions.

Host and compiler share two files, ideally FIFOs: the compiler writes to `BASE.out` and reads its
advice from `BASE.in`. On `BASE.out`, in the machine's byte order:

- one header line of JSON: `{"features": [spec, ...], "score": spec (optional), "advice": spec}`, a spec
  being `{"name", "port", "shape", "type"}` with type one of `TENSOR_TYPES` (C spellings: "float",
  "int64_t", ...);
- per episode a line `{"context": NAME}`;
- per decision a line `{"observation": N}`, then every feature's raw bytes in header order, then `\\n`;
  with a score spec, once the decision's outcome is known: a line `{"outcome": N}`, the score's raw
  bytes, `\\n`.

The advice, written by the host to `BASE.in`, is the raw bytes of one tensor of the advice spec.
The compiler opens `BASE.in` for reading first, then `BASE.out` for writing; the host opens them in
the matching order (`BASE.in` for writing first), or both sides wait for each other for ever.
JSON lines are written compact, as LLVM's `json::OStream` writes them.
"""

from __future__ import annotations

import errno
import json
import os
import select
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xlabench.errors import UserInputError

# MLGO's tensor element types (llvm/Analysis/TensorSpec.h, SUPPORTED_TENSOR_TYPES) as numpy types.
TENSOR_TYPES: dict[str, type[np.generic]] = {
    "int8_t": np.int8, "uint8_t": np.uint8, "int16_t": np.int16, "uint16_t": np.uint16,
    "int32_t": np.int32, "uint32_t": np.uint32, "int64_t": np.int64, "uint64_t": np.uint64,
    "float": np.float32, "double": np.float64,
}  # fmt: skip


class ChannelClosed(Exception):
    """The other side closed its end, or stayed silent past the timeout: said in one line."""


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of the protocol: its name, port, shape and element type (MLGO's `TensorSpec`)."""

    name: str
    shape: tuple[int, ...]
    type: str = "float"
    port: int = 0

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of its elements, in the machine's byte order."""
        return np.dtype(TENSOR_TYPES[self.type])

    @property
    def byte_size(self) -> int:
        """Bytes of one tensor on the wire."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def to_json(self) -> dict[str, Any]:
        """The spec as LLVM's `TensorSpec::toJSON` writes it."""
        return {"name": self.name, "type": self.type, "port": self.port, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, value: Any) -> TensorSpec:
        """A spec from its JSON; a malformed one raises ValueError naming what is wrong."""
        if not isinstance(value, dict):
            raise ValueError(f"a tensor spec is a JSON object, not {value!r}")
        missing = [key for key in ("name", "type", "shape") if key not in value]
        if missing:
            raise ValueError(f"tensor spec {value!r} lacks {', '.join(missing)}")
        if value["type"] not in TENSOR_TYPES:
            raise ValueError(f"tensor spec {value['name']!r}: unknown type {value['type']!r}")
        shape = value["shape"]
        if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ValueError(f"tensor spec {value['name']!r}: shape {shape!r} is not a list of sizes")
        return cls(str(value["name"]), tuple(shape), str(value["type"]), int(value.get("port", 0)))

    def encode(self, value: Any) -> bytes:
        """The raw bytes of a tensor of this spec holding `value`."""
        array = np.asarray(value, dtype=self.dtype).reshape(self.shape)
        return array.tobytes()

    def decode(self, data: bytes) -> np.ndarray:
        """The tensor whose raw bytes are `data`."""
        return np.frombuffer(data, dtype=self.dtype).reshape(self.shape).copy()


def json_line(value: dict[str, Any]) -> bytes:
    """One protocol line: compact JSON, then a newline."""
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


def header(
    features: list[TensorSpec], advice: TensorSpec, score: TensorSpec | None = None, **extra: Any
) -> bytes:
    """The header line (`extra` keys, such as xlabench's action names, are ignored by MLGO's readers)."""
    document: dict[str, Any] = {"features": [spec.to_json() for spec in features]}
    if score is not None:
        document["score"] = score.to_json()
    document["advice"] = advice.to_json()
    document.update(extra)
    return json_line(document)


def make_fifos(base: str) -> tuple[Path, Path]:
    """Create `BASE.in` and `BASE.out` as FIFOs (ones already there are reused); a path that exists and
    is not a FIFO is refused in one line."""
    paths = (Path(f"{base}.in"), Path(f"{base}.out"))
    for path in paths:
        if path.exists():
            if not stat.S_ISFIFO(path.stat().st_mode):
                raise UserInputError(
                    f"{path}: exists and is not a FIFO (remove it, or choose another --channel-base)"
                )
            continue
        try:
            os.mkfifo(path)
        except OSError as error:
            raise UserInputError(f"{path}: cannot make a FIFO: {error.strerror}") from None
    return paths


def open_fifo(path: Path, mode: str, timeout: float, alive: Any = None) -> int:
    """Open a FIFO end without blocking for ever: "r" waits for a writer to connect, "w" for a reader.

    Returns a file descriptor in blocking mode. `alive`, when given, is asked while waiting: False (the
    other side exited) ends the wait at once. Raises ChannelClosed past `timeout`.
    """
    deadline = time.monotonic() + timeout
    if mode == "r":
        # Opened non-blocking, a FIFO's read end opens at once; data (or the writer's close) comes later.
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    while True:
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: no reader has opened it yet
                raise ChannelClosed(f"{path}: cannot open for writing: {error.strerror}") from None
        else:
            os.set_blocking(descriptor, True)
            return descriptor
        if alive is not None and not alive():
            raise ChannelClosed(f"{path}: the other side exited before opening it")
        if time.monotonic() > deadline:
            raise ChannelClosed(f"{path}: nobody opened it for reading within {timeout:g} s")
        time.sleep(0.01)


class Reader:
    """Lines and exact byte counts from a file descriptor, each within a timeout.

    A FIFO opened for reading without blocking reports nothing until a writer has come and gone
    (Linux), so an empty read is the writer's close, never "not connected yet".
    """

    def __init__(self, descriptor: int, name: str, timeout: float, alive: Any = None) -> None:
        self.descriptor, self.name, self.timeout, self.alive = descriptor, name, timeout, alive
        self.buffer = bytearray()

    def _fill(self) -> bool:
        """Read what is there (waiting up to the timeout); False at the end of the stream."""
        deadline = time.monotonic() + self.timeout
        while True:
            ready, _, _ = select.select([self.descriptor], [], [], 0.05)
            if ready:
                try:
                    data = os.read(self.descriptor, 1 << 16)
                except BlockingIOError:
                    continue
                if not data:
                    return False
                self.buffer += data
                return True
            if self.alive is not None and not self.alive():
                raise ChannelClosed(f"{self.name}: the other side exited")
            if time.monotonic() > deadline:
                raise ChannelClosed(f"{self.name}: nothing came within {self.timeout:g} s")

    def line(self) -> bytes | None:
        """The next line without its newline; None at the end of the stream."""
        while b"\n" not in self.buffer:
            if not self._fill():
                if self.buffer:
                    raise ChannelClosed(f"{self.name}: closed in the middle of a line")
                return None
        index = self.buffer.index(b"\n")
        line = bytes(self.buffer[:index])
        del self.buffer[: index + 1]
        return line

    def exactly(self, count: int) -> bytes:
        """The next `count` bytes."""
        while len(self.buffer) < count:
            if not self._fill():
                raise ChannelClosed(
                    f"{self.name}: closed by the other side ({len(self.buffer)} of {count} bytes came)"
                )
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data


def write_all(descriptor: int, data: bytes, name: str) -> None:
    """Write every byte; a reader that closed its end is ChannelClosed, not a traceback."""
    view = memoryview(data)
    while view:
        try:
            written = os.write(descriptor, view)
        except (BrokenPipeError, ConnectionResetError):
            raise ChannelClosed(f"{name}: the other side closed it") from None
        view = view[written:]
