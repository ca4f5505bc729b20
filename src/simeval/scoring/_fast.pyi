"""Types of the C core (``_fast.c``); ``_vector.py`` has the reference implementation of each."""

from collections.abc import Callable, Sequence

class Vectorizer:
    def __init__(
        self,
        miss: Callable[[str], bytes | None],
        char_info: Callable[[int], int],
        fold: Callable[[str], str],
        limit: int = 2000000,
        unicode_tokens: bool = True,
    ) -> None: ...
    def vector(self, text: str, sublinear: bool, /) -> bytes: ...
    def normalize(self, text: str, /) -> str: ...
    def tokens(self, text: str, /) -> list[str]: ...
    def words(self, text: str, /) -> dict[int, str]: ...
    def clear(self) -> None: ...
    def sizes(self) -> tuple[int, int, int]: ...
    def __len__(self) -> int: ...

def vectorize(
    tokens: list[str],
    table: dict[str, bytes | None],
    miss: Callable[[str], bytes | None],
    sublinear: bool,
    /,
) -> bytes: ...
def cosine(
    a: bytes,
    b: bytes,
    pair: bool,
    demote: bytes | None = None,
    input_weight: float = 1.0,
    negators: bytes | None = None,
    negation: float = 1.0,
    curve: bytes | None = None,
    /,
) -> float: ...
def best(
    a: bytes,
    refs: Sequence[bytes],
    pair: bool,
    demote: bytes | None = None,
    input_weight: float = 1.0,
    negators: bytes | None = None,
    negation: float = 1.0,
    curve: bytes | None = None,
    /,
) -> tuple[float, int]: ...
def bands(c: float, n_out: int, n_ref: int, curve: bytes | None, /) -> float: ...
def has_any(vec: bytes, packed: bytes, /) -> bool: ...
def absent(vec: bytes, packed: bytes, top: int, /) -> list[int]: ...
def rank(vec: bytes, words: dict[int, str], /) -> tuple[bytes, list[str]]: ...
def unglue(text: str, /) -> str: ...
