#!/usr/bin/env python3
"""Rewrites a GGUF file's <arch>.context_length in place (the value's size does not change).

llama.cpp's llama2.c converter writes 128 whatever the checkpoint's seq_len, and llama-server
then ends every request at 128 tokens of prompt plus output. Side-by-side serving figures need
both servers to allow the same context:
    tools/gguf_set_context_length.py stories110M.gguf 1024
"""
import struct
import sys

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, UINT32 = 8, 9, 4


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_set_context_length.py FILE.gguf TOKENS")
    path, tokens = sys.argv[1], int(sys.argv[2])
    with open(path, "r+b") as f:
        header = f.read(24)
        if len(header) < 24 or header[:4] != b"GGUF":
            sys.exit(f"{path}: not a GGUF file")
        _, version, _, n_kv = struct.unpack("<4sIQQ", header)
        if version < 2:
            sys.exit(f"{path}: GGUF v{version}; only v2 and later are read")

        def string():
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8", "replace")

        def skip(kind):
            if kind in SCALAR:
                f.seek(SCALAR[kind], 1)
            elif kind == STRING:
                string()
            elif kind == ARRAY:
                item, n = struct.unpack("<IQ", f.read(12))
                for _ in range(n):
                    skip(item)
            else:
                sys.exit(f"{path}: unknown value type {kind}")

        for _ in range(n_kv):
            key = string()
            (kind,) = struct.unpack("<I", f.read(4))
            if key.endswith(".context_length") and kind == UINT32:
                at = f.tell()
                (old,) = struct.unpack("<I", f.read(4))
                f.seek(at)
                f.write(struct.pack("<I", tokens))
                print(f"{path}: {key} {old} -> {tokens}")
                return
            skip(kind)
    sys.exit(f"{path}: no uint32 *.context_length key")


if __name__ == "__main__":
    try:
        main()
    except struct.error:
        sys.exit(f"{sys.argv[1]}: truncated GGUF metadata")
