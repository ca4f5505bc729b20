"""The frames the run and its database writer process (``simeval.runs.store_writer``) talk in
over a pipe: an 8-byte length, then a pickle."""

from __future__ import annotations

import pickle
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

_LENGTH = struct.Struct("<Q")


def send_frame(stream: IO[bytes], message: object) -> None:
    """Write one message (``bytes`` inside it are passed as they are, not copied twice)."""
    data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """Read one message; ``EOFError`` at the end of the stream (or in a cut frame)."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("the other side closed the pipe")
    (size,) = _LENGTH.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other side closed the pipe")
    return pickle.loads(data)


def unpickled(
    batches: Iterable[Sequence[tuple[object, ...]] | bytes],
) -> Iterator[Sequence[tuple[object, ...]]]:
    """Batches of rows as they come: a list, or the bytes a pool worker pickled it into."""
    for batch in batches:
        yield pickle.loads(batch) if isinstance(batch, bytes) else batch
