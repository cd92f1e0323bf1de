"""Read and write safetensors files with NumPy alone (Debian 12 has no
python3-safetensors), and load one as a PyTorch state_dict.

    from safetensors_io import load_state_dict     # model.load_state_dict(load_state_dict(f))
    tensors, meta = read(path)                      # NumPy arrays and the __metadata__ dict
    write(path, tensors, meta)                      # atomic: a temporary file, then rename
"""
import json
import os
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
          "I8": np.int8, "U8": np.uint8}
NAMES = {v: k for k, v in DTYPES.items()}


def read(path):
    """(name -> NumPy array, metadata dict) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).copy()
    return out, meta


def write(path, tensors, meta):
    """Writes name -> array (NumPy, or anything np.asarray takes) with metadata."""
    header, blobs, offset = {"__metadata__": meta}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        raw = a.tobytes()
        header[name] = {"dtype": NAMES[a.dtype.type], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def load_state_dict(path):
    """A PyTorch state_dict (name -> torch.Tensor) from a safetensors file."""
    import torch
    tensors, _ = read(path)
    return {name: torch.from_numpy(a) for name, a in tensors.items()}
