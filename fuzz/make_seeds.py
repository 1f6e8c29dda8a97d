"""Writes a seed corpus for gguf_reader_fuzz: small valid GGUF files made with the `gguf`
Python package (every value type, nested arrays, several tensor types and alignments) plus
truncated and bit-flipped variants. Usage: python3 fuzz/make_seeds.py OUT_DIR"""
import pathlib
import random
import sys

import numpy as np
import gguf

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def build(path, alignment=None, tensors=(), kv=True, arch="llama"):
    w = gguf.GGUFWriter(str(path), arch)
    if alignment:
        w.add_custom_alignment(alignment)
    if kv:
        w.add_uint8("t.u8", 7)
        w.add_int8("t.i8", -7)
        w.add_uint16("t.u16", 700)
        w.add_int16("t.i16", -700)
        w.add_uint32("t.u32", 70000)
        w.add_int32("t.i32", -70000)
        w.add_float32("t.f32", 1.5)
        w.add_uint64("t.u64", 1 << 40)
        w.add_int64("t.i64", -(1 << 40))
        w.add_float64("t.f64", 2.25)
        w.add_bool("t.bool", True)
        w.add_string("t.str", "hello")
        w.add_array("t.arr_i32", [1, 2, 3])
        w.add_array("t.arr_str", ["a", "bc", ""])
        w.add_array("t.nested", [[1, 2], [3]])
        w.add_context_length(64)
    for name, arr, raw_dtype in tensors:
        w.add_tensor(name, arr, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


rng = np.random.default_rng(1)
f32 = rng.standard_normal((4, 8)).astype(np.float32)
f16 = rng.standard_normal((2, 32)).astype(np.float16)
q8 = rng.integers(0, 255, (2, 34), dtype=np.uint8)  # 2 rows × one q8_0 block (32 elems, 34 bytes)
q4k = rng.integers(0, 255, (1, 144), dtype=np.uint8)
seeds = {
    "empty_kv.gguf": dict(kv=False),
    "kv_only.gguf": dict(),
    "f32.gguf": dict(tensors=[("a.weight", f32, None)]),
    "mixed.gguf": dict(tensors=[("a.weight", f32, None), ("b.weight", f16, None),
                                ("c.weight", q8, gguf.GGMLQuantizationType.Q8_0),
                                ("d.weight", q4k, gguf.GGMLQuantizationType.Q4_K)]),
    "align64.gguf": dict(alignment=64, tensors=[("a.weight", f32, None), ("b.weight", f16, None)]),
}
for name, kw in seeds.items():
    build(out / name, **kw)

r = random.Random(2)
for src in list(out.glob("*.gguf")):
    data = src.read_bytes()
    for cut in sorted(r.sample(range(1, len(data)), 4)):
        (out / f"{src.stem}.cut{cut}").write_bytes(data[:cut])
    for k in range(3):
        b = bytearray(data)
        b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        (out / f"{src.stem}.flip{k}").write_bytes(bytes(b))
print(len(list(out.iterdir())), "seeds in", out)
