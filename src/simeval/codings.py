"""HTTP content codings read back (``Content-Encoding``: gzip, deflate, br, zstd), bounded.

A body may come from anyone: a gzip or zstd body of many members (frames) is read in one pass,
its time linear in the body whatever the members (each member's rest is never copied again),
at most ``MAX_MEMBERS`` of them, and never inflated past the caller's limit (a bomb of a few
KB never becomes gigabytes). Like ``simeval.checks``, this imports only the standard library
and the errors; Brotli and zstd need the ``proxy`` extra's codecs (``brotli``, ``zstandard``).
"""

from __future__ import annotations

import importlib
import zlib
from types import ModuleType

from simeval.errors import InvalidInput, TooLarge

MAX_MEMBERS = 1000  # gzip members or zstd frames in one body (exporters send one)
# input fed at a time: a gzip member's end is found within it, so what is handed to the next
# member is at most this much (never the whole rest of the body)
_GZIP_STEP = 64 * 1024
# zstd: 256 bytes inflate to at most ~8 MB (RLE blocks), so a bomb overshoots the limit by no
# more than that before it is refused; frames may ask for a window of at most 16 MB
_ZSTD_STEP = 256
_ZSTD_WINDOW = 16 * 1024 * 1024


def inflate(data: bytes, encoding: str, limit: int, what: str = "body") -> bytes:
    """``data`` decoded as its HTTP ``Content-Encoding`` says, at most ``limit`` bytes of it:
    ``gzip`` (every member, as ``gunzip`` reads them), ``deflate`` (zlib, or the raw deflate
    some servers send), ``br`` and ``zstd`` (every frame), ``identity`` or none (as is). Past
    ``limit`` or ``MAX_MEMBERS``: ``TooLarge``, having inflated no more than that; another
    coding, a damaged or a truncated stream: ``InvalidInput`` naming ``what``.

    >>> import gzip
    >>> inflate(gzip.compress(b"one ") + gzip.compress(b"two"), "gzip", 100)
    b'one two'
    """
    coding = encoding.strip().lower()
    if coding in ("", "identity"):
        if len(data) > limit:
            raise TooLarge(f"{what} is larger than {limit:,} bytes")
        return data
    if coding == "br":
        return _brotli(data, limit, what)
    if coding == "zstd":
        return _zstd(data, limit, what)
    if coding not in ("gzip", "x-gzip", "deflate"):
        raise InvalidInput(f"{what} has an unsupported Content-Encoding {encoding!r} (use gzip)")
    return _zlib(data, coding, limit, what)


def _members(count: int, what: str, unit: str) -> None:
    if count > MAX_MEMBERS:
        raise TooLarge(f"{what} has more than {MAX_MEMBERS:,} {unit}")


def _zlib(data: bytes, coding: str, limit: int, what: str) -> bytes:
    # 47: a gzip or a zlib header, detected; 15: zlib; -15: raw deflate
    wbits = 47 if coding != "deflate" else 15
    view = memoryview(data)
    out = bytearray()
    at, members = 0, 0
    while True:  # one member
        members += 1
        _members(members, what, f"{coding} members")
        inflater = zlib.decompressobj(wbits)
        start = at
        while not inflater.eof:
            chunk = view[at : at + _GZIP_STEP]
            if not chunk:
                raise InvalidInput(f"{what} ends inside its {coding} stream (truncated)")
            try:
                # one byte more than is left: so that "past the limit" is seen, never inflated
                out += inflater.decompress(chunk, limit - len(out) + 1)
            except zlib.error as exc:
                if wbits == 15 and at == start == 0:  # not zlib: raw deflate, from the start
                    wbits = -15
                    inflater = zlib.decompressobj(wbits)
                    continue
                raise InvalidInput(f"{what} is not valid {coding} data ({exc})") from None
            if len(out) > limit or inflater.unconsumed_tail:
                raise TooLarge(f"{what} inflates to more than {limit:,} bytes")
            at += len(chunk) - len(inflater.unused_data)
        rest = view[at:]
        # gzip files may be padded with zeros after the last member (no member starts with
        # one: the padding is looked at once, at the end)
        if coding == "deflate" or not rest or (rest[0] == 0 and not bytes(rest).strip(b"\0")):
            return bytes(out)


def _zstd(data: bytes, limit: int, what: str) -> bytes:
    codec = _codec("zstd", what)
    view = memoryview(data)
    out = bytearray()
    at, frames = 0, 0
    try:
        decompressor = codec.ZstdDecompressor(max_window_size=_ZSTD_WINDOW)
        while at < len(data):  # one frame
            frames += 1
            _members(frames, what, "zstd frames")
            frame = decompressor.decompressobj()
            while not frame.eof:
                chunk = view[at : at + _ZSTD_STEP]
                if not chunk:
                    raise InvalidInput(f"{what} ends inside its zstd stream (truncated)")
                out += frame.decompress(chunk)
                if len(out) > limit:
                    raise TooLarge(f"{what} inflates to more than {limit:,} bytes")
                at += len(chunk) - len(frame.unused_data)
    except codec.ZstdError as exc:  # a damaged stream, a window past the bound
        raise InvalidInput(f"{what} is not valid zstd data ({exc})") from None
    if not frames:
        raise InvalidInput(f"{what} is not valid zstd data (empty)")
    return bytes(out)


def _brotli(data: bytes, limit: int, what: str) -> bytes:
    codec = _codec("br", what)
    try:
        decoder = codec.Decompressor()
        # the output buffer stops growing at the limit: a bomb never inflates past it
        out = decoder.process(data, output_buffer_limit=limit + 1)
        while len(out) <= limit and not decoder.can_accept_more_data():
            out += decoder.process(b"", output_buffer_limit=limit + 1 - len(out))
        complete = decoder.is_finished()
    except codec.error as exc:  # a damaged stream
        raise InvalidInput(f"{what} is not valid br data ({exc})") from None
    if len(out) > limit:
        raise TooLarge(f"{what} inflates to more than {limit:,} bytes")
    if not complete:
        raise InvalidInput(f"{what} ends inside its br stream (truncated)")
    return bytes(out)


def _codec(coding: str, what: str) -> ModuleType:
    """The module reading ``coding`` (the ``proxy`` extra's), or ``InvalidInput`` saying so."""
    package = "brotli" if coding == "br" else "zstandard"
    try:
        return importlib.import_module(package)
    except ImportError:
        raise InvalidInput(
            f"{what} is {coding}-encoded: install {package} (pip install 'simeval[proxy]')"
        ) from None
