"""Arrays read from the files people save (:mod:`ntkcheck.io.arrays`): safetensors written by the
``safetensors`` package (an independent writer), BF16 read exactly, .pt refused with how to save one
when torch is absent, nothing unpickled."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from ntkcheck.errors import InputError
from ntkcheck.io.arrays import load_array, read_tensors


def test_safetensors_from_the_reference_writer_round_trip(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(0)
    arrays = {"a": rng.standard_normal((3, 4)), "b": rng.standard_normal(5).astype(np.float32),
              "c": np.arange(6, dtype=np.int64).reshape(2, 3), "h": rng.standard_normal((2, 2)).astype(np.float16)}
    f = tmp_path / "t.safetensors"
    st.save_file(arrays, str(f))
    got = read_tensors(f)
    assert sorted(got) == sorted(arrays)
    for k, v in arrays.items():
        assert got[k].array.dtype == v.dtype and np.array_equal(got[k].array, v)  # bit for bit


def _write_bf16(path, name, words, shape):
    data = np.asarray(words, dtype="<u2").tobytes()
    header = json.dumps({name: {"dtype": "BF16", "shape": list(shape), "data_offsets": [0, len(data)]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


def test_bfloat16_is_read_exactly_and_keeps_its_precision(tmp_path):
    """BF16 words 0x3F80 (1.0), 0xC040 (-3.0), 0x3EAB (0.333984375): the upper halves of float32s."""
    f = tmp_path / "k.safetensors"
    _write_bf16(f, "K", [0x3F80, 0xC040, 0x3EAB, 0x3F80], (2, 2))
    t = load_array(f)
    assert t.precision == "bfloat16" and t.array.dtype == np.float32
    assert t.array.tolist() == [[1.0, -3.0], [0.333984375, 1.0]]


@pytest.mark.parametrize("bad", ["short", "header", "offsets", "dtype"])
def test_malformed_safetensors_are_one_clear_error(bad, tmp_path):
    f = tmp_path / "x.safetensors"
    if bad == "short":
        f.write_bytes(b"\x01\x02")
    elif bad == "header":
        f.write_bytes(struct.pack("<Q", 10**9) + b"{}")
    elif bad == "offsets":
        h = json.dumps({"K": {"dtype": "F64", "shape": [1000], "data_offsets": [0, 8000]}}).encode()
        f.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * 16)
    else:
        h = json.dumps({"K": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}).encode()
        f.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * 8)
    with pytest.raises(InputError) as info:
        read_tensors(f)
    assert str(f) in str(info.value) and "\n" not in str(info.value)


def test_a_pt_file_without_torch_says_how_to_save_one(tmp_path):
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torch is installed: the .pt file is read (tested in test_pt_file_is_read_with_torch)")
    f = tmp_path / "K.pt"
    f.write_bytes(b"PK\x03\x04 not really a torch archive")
    with pytest.raises(InputError, match=r"numpy.save\('K.npy'") as info:
        load_array(f)
    assert "allow_pickle" not in str(info.value) and "data.pkl" not in str(info.value)


def test_pt_file_is_read_with_torch(tmp_path):
    torch = pytest.importorskip("torch")
    K = torch.eye(3, dtype=torch.float64) * 2
    f = tmp_path / "K.pt"
    torch.save(K, f)
    assert np.array_equal(load_array(f).array, 2 * np.eye(3))
    torch.save({"w": torch.ones(2, dtype=torch.bfloat16)}, f)
    t = load_array(f)
    assert t.precision == "bfloat16" and t.array.tolist() == [1.0, 1.0]


def test_object_arrays_are_never_unpickled(tmp_path):
    f = tmp_path / "o.npy"
    np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError) as info:
        load_array(f)
    assert "Python objects" in str(info.value) and "allow_pickle" not in str(info.value)
