"""A small persistent vector: structural sharing for the snapshot's message list.

Every accepted fact publishes a snapshot (SPEC R1.3), and old snapshots must
stay valid.  Copying the whole message list per delta would make a long answer
quadratic, so messages live in a two-level vector: a tuple of blocks of at
most ``BLOCK`` items.  Replacing one item copies one block and the (short)
tuple of blocks; appending touches only the last block.  Both are O(BLOCK +
n / BLOCK), independent of how many facts came before.

The vector is immutable; every "mutation" returns a new vector that shares
all untouched blocks with the old one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TypeVar, overload

__all__ = ["PVec"]

T = TypeVar("T")
BLOCK = 32


class PVec(Sequence[T], Generic[T]):
    __slots__ = ("_blocks", "_len")

    def __init__(self, items: Iterable[T] = ()) -> None:
        seq = list(items)
        self._blocks: tuple[tuple[T, ...], ...] = tuple(
            tuple(seq[i : i + BLOCK]) for i in range(0, len(seq), BLOCK)
        )
        self._len = len(seq)

    @classmethod
    def _make(cls, blocks: tuple[tuple[T, ...], ...], length: int) -> PVec[T]:
        v = object.__new__(cls)
        v._blocks = blocks
        v._len = length
        return v

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("PVec index out of range")
        return self._blocks[index // BLOCK][index % BLOCK]

    def __iter__(self) -> Iterator[T]:
        for block in self._blocks:
            yield from block

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PVec):
            return self._len == other._len and all(a == b for a, b in zip(self, other))
        if isinstance(other, (list, tuple)):
            return self._len == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PVec({list(self)!r})"

    def set(self, index: int, value: T) -> PVec[T]:
        """A new vector with ``value`` at ``index``."""
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("PVec index out of range")
        b, i = divmod(index, BLOCK)
        blocks = self._blocks
        block = blocks[b]
        new_block = block[:i] + (value,) + block[i + 1 :]
        v = object.__new__(PVec)  # _make, inlined: once per delta
        v._blocks = blocks[:b] + (new_block,) + blocks[b + 1 :]
        v._len = self._len
        return v

    def get(self, index: int) -> T:
        """``self[index]`` for a valid index ``0 <= index < len(self)`` (no slice, no negative index)."""
        return self._blocks[index // BLOCK][index % BLOCK]

    def append(self, value: T) -> PVec[T]:
        """A new vector with ``value`` added at the end."""
        blocks = self._blocks
        if blocks and len(blocks[-1]) < BLOCK:
            blocks = blocks[:-1] + (blocks[-1] + (value,),)
        else:
            blocks = blocks + ((value,),)
        return PVec._make(blocks, self._len + 1)

    def to_list(self) -> list[T]:
        return list(self)
