#!/usr/bin/python3
"""Check that PyTorch reads goddp's safetensors checkpoints and gets the same model.

Usage:
    /usr/bin/python3 scripts/check_safetensors_torch.py CKPT IO [OUT]

CKPT  a goddp checkpoint (.safetensors) of torch.nn.Sequential(Linear(20,16),
      ReLU(), Linear(16,1)), model tensors under the "model." prefix.
IO    a safetensors file with "inputs" [N,20] and the "outputs" [N,1] the Go
      model computed.
OUT   optional: write torch's state dict and outputs back as safetensors, so
      the Go test can check the other direction.

Debian's python3-torch ships no safetensors package, so the format is parsed
here by hand (struct + json + torch.frombuffer). The goddp checksum is
verified too, in either form: "goddp.sha256-4MiB" (what goddp writes: the
SHA-256 of the concatenated SHA-256 digests of the file's consecutive 4 MiB
pieces) or "goddp.sha256" (written until 2026-11-29: the SHA-256 of the whole
file), each computed with its 64 digest characters replaced by '0'. Exit
status 0 means the outputs match.
checkpoint's TestTorchReadsGoCheckpoint (GODDP_TORCH_CHECK=1) runs this.
"""
import hashlib
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
          "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
          "U8": torch.uint8, "I8": torch.int8, "BOOL": torch.bool}
CHUNK = 4 << 20


def whole_sha256(b):
    return hashlib.sha256(b).hexdigest()


def chunked_sha256(b):
    digests = b"".join(hashlib.sha256(b[i:i + CHUNK]).digest() for i in range(0, len(b), CHUNK))
    return hashlib.sha256(digests).hexdigest()


CHECKSUMS = {"goddp.sha256-4MiB": chunked_sha256, "goddp.sha256": whole_sha256}


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: truncated header")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    keys = [k for k in CHECKSUMS if k in meta]
    if len(keys) > 1:
        raise ValueError(f"{path}: metadata holds both {' and '.join(keys)}")
    for key in keys:
        want = meta[key]
        needle = f'"{key}":"{want}"'.encode()
        at = raw.index(needle, 8, 8 + n) + len(needle) - 65
        got = CHECKSUMS[key](raw[:at] + b"0" * 64 + raw[at + 64:])
        if got != want:
            raise ValueError(f"{path}: checksum mismatch ({key}): {got} != {want}")
    data = memoryview(raw)[8 + n:]
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dt = DTYPES[e["dtype"]]
        buf = bytes(data[begin:end])
        t = torch.frombuffer(bytearray(buf), dtype=dt) if buf else torch.empty(0, dtype=dt)
        tensors[name] = t.reshape(e["shape"]).clone()
    return tensors, meta


def save(path, tensors, meta):
    names = sorted(tensors)
    header, off, blobs = {}, 0, []
    rev = {v: k for k, v in DTYPES.items()}
    for name in names:
        t = tensors[name].contiguous()
        b = t.numpy().tobytes()
        header[name] = {"dtype": rev[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    header["__metadata__"] = meta
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * ((8 - (8 + len(js)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + b"".join(blobs))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    ckpt, meta = load(sys.argv[1])
    io, _ = load(sys.argv[2])
    print(f"checkpoint epoch={meta.get('goddp.epoch')} step={meta.get('goddp.step')} "
          f"tensors={len(ckpt)} checksum={'verified' if any(k in meta for k in CHECKSUMS) else 'absent'} ({', '.join(k for k in CHECKSUMS if k in meta)})")
    state = {k[len("model."):]: v for k, v in ckpt.items() if k.startswith("model.")}
    model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model.load_state_dict(state, strict=True)
    with torch.no_grad():
        out = model(io["inputs"])
    diff = (out - io["outputs"]).abs().max().item()
    print(f"torch {torch.__version__}: outputs {tuple(out.shape)}, max |torch - go| = {diff:.3g}")
    if len(sys.argv) == 4:
        sd = {k: v for k, v in model.state_dict().items()}
        sd["outputs"] = out
        save(sys.argv[3], sd, {"format": "pt", "writer": "torch " + torch.__version__})
    if not torch.allclose(out, io["outputs"], rtol=1e-5, atol=1e-5):
        print("MISMATCH")
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
