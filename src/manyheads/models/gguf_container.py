"""GGUF's container format read in one pass: the metadata and where each tensor's bytes lie (chapters 6-7's decoder).

``gguf.GGUFReader`` builds a NumPy view for every value of the metadata, and SmolLM2's metadata holds its whole
vocabulary and merge list (about 100,000 strings): reading them that way took 8 of the 12 s that loading the decoder
took on a 2-core CPU. This reader parses the same bytes with :mod:`struct` (the format is a header, typed key-value
pairs and a table of tensors; https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) and gives each tensor's
data as the same memory-mapped NumPy array GGUFReader gives, so ``gguf.quants.dequantize`` reads it unchanged.
tests/package/test_smollm2_weights.py compares both readers on the course's file, value for value.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GGUFTensor", "read_container"]

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_DEFAULT_ALIGNMENT = 32
# GGUF's value types (gguf.constants.GGUFValueType) -> struct format of one item; 8 is a string, 9 an array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
# Tensors stored as plain numbers (gguf.constants.GGMLQuantizationType) -> their NumPy type; others are quantised
# blocks, given as bytes (uint8), as GGUFReader gives them.
_PLAIN = {0: np.float32, 1: np.float16, 24: np.int8, 25: np.int16, 26: np.int32, 27: np.int64, 28: np.float64}


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of the file: its name, GGML type, and data (a read-only view of the mapped file)."""

    name: str
    tensor_type: Any  # gguf.constants.GGMLQuantizationType
    data: np.ndarray


class _Cursor:
    def __init__(self, buffer) -> None:
        self.buffer, self.offset = buffer, 0

    def unpack(self, fmt: str):
        values = struct.unpack_from("<" + fmt, self.buffer, self.offset)
        self.offset += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string(self) -> str:
        length = self.unpack("Q")
        start, self.offset = self.offset, self.offset + length
        return bytes(self.buffer[start : self.offset]).decode("utf-8")

    def value(self, kind: int):
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.unpack("I"), self.unpack("Q")
            if item == _STRING:
                return [self.string() for _ in range(count)]
            if item in _SCALARS:
                values = list(struct.unpack_from(f"<{count}{_SCALARS[item]}", self.buffer, self.offset))
                self.offset += count * struct.calcsize(_SCALARS[item])
                return values
            return [self.value(item) for _ in range(count)]  # arrays of arrays
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        raise ValueError(f"unknown GGUF value type {kind} at byte {self.offset}")


def read_container(path: str | Path) -> tuple[dict[str, Any], list[GGUFTensor]]:
    """``(metadata, tensors)`` of a little-endian GGUF file (version 2 or 3).

    ``metadata`` maps every key to its value as ``GGUFReader``'s ``field.contents()`` gives it (a string, a Python
    number or bool, or a list of them); ``tensors`` are in the file's order, each ``data`` shaped as GGUFReader
    shapes it (dimensions reversed; quantised rows as their bytes).
    """
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import quant_shape_to_byte_shape

    path = Path(path)
    whole = np.memmap(path, mode="r")
    cursor = _Cursor(memoryview(whole))
    if bytes(cursor.buffer[:4]) != _MAGIC:
        raise ValueError(f"{path} is not a GGUF file (its first bytes are not 'GGUF')")
    cursor.offset = 4
    version, n_tensors, n_keys = cursor.unpack("IQQ")
    if version not in _VERSIONS:
        raise ValueError(f"{path}: GGUF version {version}; this reader reads versions {_VERSIONS} (little-endian)")
    metadata = {}
    for _ in range(n_keys):
        key = cursor.string()
        metadata[key] = cursor.value(cursor.unpack("I"))
    table = []
    for _ in range(n_tensors):
        name = cursor.string()
        dims = cursor.unpack(f"{cursor.unpack('I')}Q")
        dims = (dims,) if isinstance(dims, int) else dims
        kind, offset = cursor.unpack("IQ")
        table.append((name, tuple(dims), GGMLQuantizationType(kind), offset))
    alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
    start = -(-cursor.offset // alignment) * alignment
    tensors = []
    for name, dims, kind, offset in table:
        shape = tuple(reversed(dims))
        count = int(np.prod(dims))
        if int(kind) in _PLAIN:
            dtype, n_bytes = np.dtype(_PLAIN[int(kind)]), count * np.dtype(_PLAIN[int(kind)]).itemsize
        else:
            block, size = GGML_QUANT_SIZES[kind]
            dtype, n_bytes, shape = np.dtype(np.uint8), count * size // block, quant_shape_to_byte_shape(shape, kind)
        data = whole[start + offset : start + offset + n_bytes].view(dtype).reshape(shape)
        tensors.append(GGUFTensor(name, kind, data))
    return metadata, tensors
