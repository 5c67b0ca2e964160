"""Loader fuzzing: any bytes in an npz file are either read or refused in one line.

A seeded loop (no extra dependency) mutates a valid npz in many ways: bit flips,
random bytes, truncation, zeroed and inserted ranges, a plain .npy under the
.npz name, unknown zip compression methods, and mutations of one member's .npy
bytes re-zipped with a correct CRC, so that they reach numpy's header parser
(zeroed or flipped header bytes, absurd shapes such as 10^10 rows, short data).
Every mutation must end in a `Kernel` or a `PipelineError` naming the file, in
one line; any other exception (MemoryError, TokenError, OverflowError, ...)
fails the test.
"""

from __future__ import annotations

import collections
import io
import random
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from baselines.core.errors import PipelineError
from baselines.tiles import data

MUTATIONS = 400
SHAPES = [
    b"'shape': (10000000000, 140)",
    b"'shape': (-1, 140)",
    b"'shape': (5, 140, 2)",
    b"'shape': (5,)",
    b"'shape': (0, 140)",
    b"'shape': (5, 14)",
    b"'shape': (99999999999999999999999,)",
    b"'shape': 5",
    b"'shape': (1.5,)",
    b"'shape': ('a',)",
]


def _kernel(seed: int) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    n, c = 5, 7
    return {
        "node_feat": r.random((n, 140)).astype(np.float32),
        "node_opcode": r.integers(0, 120, n).astype(np.uint8),
        "edge_index": np.array([[i, i - 1] for i in range(1, n)], np.int64),
        "config_feat": r.random((c, 24)).astype(np.float32),
        "config_runtime": r.integers(100, 1000, c).astype(np.int64),
        "config_runtime_normalizers": np.full(c, 500, np.int64),
    }


def _npz_bytes(compressed: bool) -> bytes:
    out = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(out, **_kernel(1))
    return out.getvalue()


def _mutate_member(r: random.Random, original: bytes) -> tuple[bytes, str]:
    """One member's .npy bytes changed, the archive rebuilt with valid CRCs."""
    src = zipfile.ZipFile(io.BytesIO(original))
    victim = r.choice(src.namelist())
    how = r.choice(["zero", "flip", "byte", "short_data", "short_header", "version", "shape"])
    out = io.BytesIO()
    method = r.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
    with zipfile.ZipFile(out, "w", compression=method) as z:
        for name in src.namelist():
            m = bytearray(src.read(name))
            if name == victim:
                header_end = 10 + int.from_bytes(m[8:10], "little")
                if how == "zero":
                    pos, n = r.randrange(header_end), r.randint(1, 20)
                    m[pos : pos + n] = bytes(len(m[pos : pos + n]))
                elif how == "flip":
                    m[r.randrange(header_end)] ^= 1 << r.randrange(8)
                elif how == "byte":
                    m[r.randrange(10, header_end)] = r.randrange(256)
                elif how == "short_data":
                    m = m[: r.randrange(len(m))]
                elif how == "short_header":
                    m = m[: r.randrange(header_end)]
                elif how == "version":
                    m[6] = r.randrange(256)
                else:
                    start = m.find(b"'shape': (")
                    m[start : m.find(b")", start) + 1] = r.choice(SHAPES)
            z.writestr(name, bytes(m))
    return out.getvalue(), f"member-{how}"


def _mutate(r: random.Random, original: bytes) -> tuple[bytes, str]:
    kind = r.choice(["flip", "bytes", "truncate", "zero", "insert", "npy", "method", "member"])
    b = bytearray(original)
    if kind == "member" or r.random() < 0.25:  # member mutations reach the .npy parser
        return _mutate_member(r, original)
    if kind == "flip":
        for _ in range(r.randint(1, 4)):
            b[r.randrange(len(b))] ^= 1 << r.randrange(8)
    elif kind == "bytes":
        pos, n = r.randrange(len(b)), r.randint(1, 64)
        b[pos : pos + n] = bytes(r.randrange(256) for _ in range(n))
    elif kind == "truncate":
        b = b[: r.randrange(len(b))]
    elif kind == "zero":
        pos, n = r.randrange(len(b)), r.randint(1, 200)
        b[pos : pos + n] = bytes(len(b[pos : pos + n]))
    elif kind == "insert":
        pos = r.randrange(len(b))
        b[pos:pos] = bytes(r.randrange(256) for _ in range(r.randint(1, 32)))
    elif kind == "npy":  # a plain .npy file saved under the .npz name
        out = io.BytesIO()
        np.save(out, _kernel(2)["node_feat"])
        b = bytearray(out.getvalue())
    else:  # compression method of local headers / central directory entries
        for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
            at = b.find(signature)
            while at >= 0:
                if r.random() < 0.5:
                    method = r.choice([1, 6, 12, 14, 93, 99])
                    b[at + offset : at + offset + 2] = struct.pack("<H", method)
                at = b.find(signature, at + 1)
    return bytes(b), kind


def test_valid_files_of_both_zip_kinds_are_read(tmp_path):
    for compressed in (False, True):
        path = tmp_path / f"k{int(compressed)}.npz"
        path.write_bytes(_npz_bytes(compressed))
        kernel = data.read_kernel(path)
        np.testing.assert_array_equal(kernel.node_feat, _kernel(1)["node_feat"])


def test_every_mutation_is_read_or_refused_in_one_line(tmp_path):
    originals = [_npz_bytes(False), _npz_bytes(True)]
    path = tmp_path / "fuzzed.npz"
    outcomes: collections.Counter[str] = collections.Counter()
    for seed in range(MUTATIONS):
        r = random.Random(seed)
        mutated, kind = _mutate(r, originals[seed % 2])
        path.write_bytes(mutated)
        try:
            data.read_kernel(path)
            outcomes["read"] += 1
        except PipelineError as e:
            message = str(e)
            assert message.startswith(str(path)) and "\n" not in message, (seed, kind, message)
            outcomes["refused"] += 1
        except Exception as e:  # noqa: BLE001 - the property under test
            pytest.fail(f"mutation {seed} ({kind}) raised {type(e).__name__}: {e}")
    assert sum(outcomes.values()) == MUTATIONS
    assert outcomes["refused"] > MUTATIONS // 2  # the mutations do damage the files


def test_header_declaring_more_rows_than_the_file_holds_is_refused_without_allocating(
    tmp_path: Path,
):
    """10^10 rows of 140 float32 would be 5.6 TB: refused from the header and the size."""
    arrays = _kernel(3)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for key, value in arrays.items():
            member = io.BytesIO()
            np.save(member, value)
            raw = member.getvalue()
            if key == "node_feat":
                raw = raw.replace(b"'shape': (5, 140)", b"'shape': (10000000000, 140)")
            z.writestr(f"{key}.npy", raw)
    path = tmp_path / "huge.npz"
    path.write_bytes(out.getvalue())
    with pytest.raises(PipelineError, match="header declares shape .10000000000, 140."):
        data.read_kernel(path)
