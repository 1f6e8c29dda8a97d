"""Loom's scalar quant references against two independent oracles, on fresh random data.

Oracles, per operation and type:
  dequantize  every type: gguf-py's gguf.quants.dequantize (the `gguf` package) where it
              implements the type (all but Q8_K), AND ggml's own dequantize_row_* /
              ggml_*_to_fp32_row from the libggml-base.so that llama-cpp-python ships.
  quantize    gguf.quants.quantize for F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (what it
              implements); ggml's quantize_row_*_ref (llama.cpp's reference quantizers, the
              path llama-quantize takes without an imatrix) for every type incl. Q2_K..Q8_K, Q8_1.
  vec_dot     ggml's ggml_vec_dot_*_generic from libggml-cpu.so (see the note above
              test_vec_dot_matches_ggml for which are bit-identical and why).

(De)quantization must be BIT-IDENTICAL: floats are compared as uint32 views, blocks as bytes.
NaN handling: random F16/BF16 payloads may be NaN; positions of NaN must agree and all
other outputs must match bit for bit (NaN payload bits are not compared: numpy and ggml
quiet NaNs differently). Quant block scale fields are replaced by finite random fp16 values
so no NaN arises there.

Loom side: <build>/bin/loom-quant-tool (tests/quant/loom_quant_tool.cpp).
"""
import ctypes
import functools
import os
import pathlib
import subprocess
import time

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import quants

from conftest import ggml_lib_dir

# name -> (gguf type, elements/block, bytes/block, fp16 field offsets, f32 field offsets)
TYPES = {
    "f16":  (QT.F16, 1, 2, [], []),
    "bf16": (QT.BF16, 1, 2, [], []),
    "q4_0": (QT.Q4_0, 32, 18, [0], []),
    "q4_1": (QT.Q4_1, 32, 20, [0, 2], []),
    "q5_0": (QT.Q5_0, 32, 22, [0], []),
    "q5_1": (QT.Q5_1, 32, 24, [0, 2], []),
    "q8_0": (QT.Q8_0, 32, 34, [0], []),
    "q2_K": (QT.Q2_K, 256, 84, [80, 82], []),
    "q3_K": (QT.Q3_K, 256, 110, [108], []),
    "q4_K": (QT.Q4_K, 256, 144, [0, 2], []),
    "q5_K": (QT.Q5_K, 256, 176, [0, 2], []),
    "q6_K": (QT.Q6_K, 256, 210, [208], []),
    "q8_K": (QT.Q8_K, 256, 292, [], [0]),
}
GGUF_QUANTIZES = {"f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"}
# weight type -> (activation type, ggml generic dot symbol)
DOTS = {
    "q4_0": ("q8_0", "ggml_vec_dot_q4_0_q8_0_generic"),
    "q4_1": ("q8_1", "ggml_vec_dot_q4_1_q8_1_generic"),
    "q5_0": ("q8_0", "ggml_vec_dot_q5_0_q8_0_generic"),
    "q5_1": ("q8_1", "ggml_vec_dot_q5_1_q8_1_generic"),
    "q8_0": ("q8_0", "ggml_vec_dot_q8_0_q8_0_generic"),
    "q2_K": ("q8_K", "ggml_vec_dot_q2_K_q8_K_generic"),
    "q3_K": ("q8_K", "ggml_vec_dot_q3_K_q8_K_generic"),
    "q4_K": ("q8_K", "ggml_vec_dot_q4_K_q8_K_generic"),
    "q5_K": ("q8_K", "ggml_vec_dot_q5_K_q8_K_generic"),
    "q6_K": ("q8_K", "ggml_vec_dot_q6_K_q8_K_generic"),
}
ACT_BYTES = {"q8_0": (32, 34), "q8_1": (32, 36), "q8_K": (256, 292)}

SEED = int(os.environ.get("LOOM_TEST_SEED", time.time_ns() % 2**32))
print(f"test_quant seed={SEED} (set LOOM_TEST_SEED to replay)")


def _ggml_libs():
    lib = ggml_lib_dir()
    base = ctypes.CDLL(str(lib / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(str(lib / "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    cpu.ggml_cpu_init()  # fills the fp16 table the CPU dot products read scales through
    return base, cpu


BASE, CPU = _ggml_libs()
_P, _I64 = ctypes.c_void_p, ctypes.c_int64


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def ggml_dequant(name, raw, n):
    if name == "q8_1":  # ggml has no dequantize_row_q8_1 (activation-only format): x = d * q
        b = raw.reshape(-1, 36)
        return (b[:, :2].copy().view(np.float16).astype(np.float32) * b[:, 4:].view(np.int8)).reshape(-1)
    out = np.zeros(n, dtype=np.float32)
    sym = {"f16": "ggml_fp16_to_fp32_row", "bf16": "ggml_bf16_to_fp32_row"}.get(name, f"dequantize_row_{name}")
    fn = getattr(BASE, sym)
    fn.argtypes, fn.restype = [_P, _P, _I64], None
    fn(_ptr(raw), _ptr(out), n)
    return out


def ggml_quant(name, x):
    qt, be, bb = (TYPES[name][:3] if name in TYPES else (None, *ACT_BYTES[name]))
    out = np.zeros(len(x) // be * bb, dtype=np.uint8)
    sym = {"f16": "ggml_fp32_to_fp16_row", "bf16": "ggml_fp32_to_bf16_row_ref"}.get(name, f"quantize_row_{name}_ref")
    fn = getattr(BASE, sym)
    fn.argtypes, fn.restype = [_P, _P, _I64], None
    fn(_ptr(x), _ptr(out), len(x))
    return out


def ggml_dot(wname, w_row, a_row, n):
    fn = getattr(CPU, DOTS[wname][1])
    fn.argtypes = [ctypes.c_int, _P, ctypes.c_size_t, _P, ctypes.c_size_t, _P, ctypes.c_size_t, ctypes.c_int]
    fn.restype = None
    s = np.zeros(1, dtype=np.float32)
    fn(n, _ptr(s), 0, _ptr(w_row), 0, _ptr(a_row), 0, 1)
    return s.view(np.uint32)[0]


@pytest.fixture(scope="module")
def tool(build_dir):
    p = pathlib.Path(build_dir) / "bin" / "loom-quant-tool"
    if not p.exists():
        pytest.fail(f"{p} missing; build the loom-quant-tool target")
    return p


def run_tool(tool, *args):
    r = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"loom-quant-tool {args} failed: {r.stderr}"
    return r.stdout


def random_finite_halves(rng, size):
    h = rng.integers(0, 0x7C00, size=size, dtype=np.uint32)  # exponent < 31: finite
    sign = rng.integers(0, 2, size=size, dtype=np.uint32) << 15
    return (h | sign).astype(np.uint16)


def random_blocks(rng, name, nblocks):
    _, _, bb, halves, f32s = TYPES[name]
    raw = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
    for off in halves:
        raw[:, off:off + 2] = random_finite_halves(rng, nblocks).view(np.uint8).reshape(nblocks, 2)
    for off in f32s:
        d = random_finite_halves(rng, nblocks).view(np.float16).astype(np.float32)
        raw[:, off:off + 4] = d.view(np.uint8).reshape(nblocks, 4)
    return raw.reshape(-1)


def random_floats(rng, n, block):
    """Gaussian rows whose scale varies per block over 12 decades, with a few outliers."""
    x = rng.standard_normal(n).astype(np.float32)
    scales = (10.0 ** rng.uniform(-8, 4, size=n // block)).astype(np.float32)
    x *= np.repeat(scales, block)
    spikes = rng.integers(0, n, size=max(1, n // 97))
    x[spikes] *= np.float32(20)
    return x


def same_bits(a, b, allow_nan=False):
    a32, b32 = a.view(np.uint32), b.view(np.uint32)
    if allow_nan:
        na, nb = np.isnan(a), np.isnan(b)
        assert np.array_equal(na, nb), f"NaN positions differ at {np.flatnonzero(na != nb)[:8]}"
        keep = ~na
        a32, b32 = a32[keep], b32[keep]
    bad = np.flatnonzero(a32 != b32)
    return bad


@pytest.mark.parametrize("name", list(TYPES))
def test_dequantize_bit_identical(tool, tmp_path, name):
    rng = np.random.default_rng([SEED, list(TYPES).index(name), 1])
    qt, be, bb, _, _ = TYPES[name]
    nblocks = 8192 if be == 1 else (4096 if be == 32 else 1024)
    if be == 1:  # F16/BF16: every bit pattern is a "block", NaN and inf included
        raw = rng.integers(0, 2**16, size=nblocks * 8, dtype=np.uint16).view(np.uint8)
    else:
        raw = random_blocks(rng, name, nblocks)
    n = raw.size // bb * be
    (tmp_path / "in.bin").write_bytes(raw.tobytes())
    run_tool(tool, "dequant", name, tmp_path / "in.bin", tmp_path / "out.f32")
    loom = np.fromfile(tmp_path / "out.f32", dtype=np.float32)
    assert loom.size == n

    oracles = {"ggml": ggml_dequant(name, raw, n)}
    if name != "q8_K":  # gguf.quants has no Q8_K
        with np.errstate(all="ignore"):
            oracles["gguf.quants"] = quants.dequantize(raw, qt).reshape(-1).astype(np.float32)
    for oracle, ref in oracles.items():
        bad = same_bits(loom, ref, allow_nan=(be == 1))
        print(f"dequant {name}: {raw.size // bb} blocks vs {oracle}, mismatches={bad.size}")
        assert bad.size == 0, f"{name} vs {oracle}: first mismatches at {bad[:8]}: loom {loom[bad[:4]]} ref {ref[bad[:4]]}"


@pytest.mark.parametrize("name", list(TYPES) + ["q8_1"])
def test_quantize_bit_identical(tool, tmp_path, name):
    rng = np.random.default_rng([SEED, 100 + (list(TYPES) + ["q8_1"]).index(name), 2])
    be, bb = (TYPES[name][1:3] if name in TYPES else ACT_BYTES[name])
    block = max(be, 32)
    nblocks = (4096 * 32) // block if be != 256 else 1024
    x = random_floats(rng, nblocks * block, block)
    if name == "f16":  # keep inside fp16's range (gguf's numpy cast and ggml agree there)
        x = np.clip(x, -65000, 65000)
    (tmp_path / "in.f32").write_bytes(x.tobytes())
    run_tool(tool, "quant", name, tmp_path / "in.f32", tmp_path / "out.bin")
    loom = np.fromfile(tmp_path / "out.bin", dtype=np.uint8)

    oracles = {"ggml quantize_row_*_ref": ggml_quant(name, x)}
    if name in GGUF_QUANTIZES:
        with np.errstate(over="ignore"):  # block scales beyond fp16's range become inf in both
            oracles["gguf.quants"] = np.asarray(quants.quantize(x, TYPES[name][0])).view(np.uint8).reshape(-1)
    for oracle, ref in oracles.items():
        assert ref.size == loom.size
        bad_blocks = np.flatnonzero((loom.reshape(-1, bb) != ref.reshape(-1, bb)).any(axis=1))
        print(f"quant {name}: {loom.size // bb} blocks vs {oracle}, mismatching blocks={bad_blocks.size}")
        assert bad_blocks.size == 0, f"{name} vs {oracle}: blocks {bad_blocks[:8]} differ"


# The llama-cpp-python build of libggml-cpu contracts a*b+c into fused multiply-adds inside
# some generic dots (e.g. `sumf -= dmin*sumi`); which ones depends on the compiler and the
# -march it was built for (on the AVX-512 Xeon this was written on, the block updates of the
# q4_0, q8_0, q3_K and q6_K dots are fused too; oracle_fuses_q4_0 detects it from q4_0). Loom's
# references evaluate ggml's expressions as written (-ffp-contract=off). Where the shipped binary
# has no such fusion the results must be bit-identical; elsewhere they must agree to 1e-6 of
# sum|w_i*a_i| (a few float roundings per block). ggml's shipped q5_0 *generic* disagrees with
# ggml's own dequantization on some builds (test_ggml_q5_0_simd_dot_matches_its_dequantization), so q5_0 is
# checked against its SIMD dot instead.
EXACT_DOTS = {"q4_0", "q8_0", "q3_K", "q6_K"}
DOT_ORACLE = dict({k: v[1] for k, v in DOTS.items()}, q5_0="ggml_vec_dot_q5_0_q8_0")


def ggml_dot_sym(sym, w_row, a_row, n):
    fn = getattr(CPU, sym)
    fn.argtypes = [ctypes.c_int, _P, ctypes.c_size_t, _P, ctypes.c_size_t, _P, ctypes.c_size_t, ctypes.c_int]
    fn.restype = None
    s = np.zeros(1, dtype=np.float32)
    fn(n, _ptr(s), 0, _ptr(w_row), 0, _ptr(a_row), 0, 1)
    return s[0]


def _q4_0_dot_as_written(w_row, a_row, n, fused):
    """ggml_vec_dot_q4_0_q8_0_generic's float steps, `sumf += sumi*dx*dy` evaluated as two
    roundings and an add (fused=False) or as fma(sumi*dx, dy, sumf) (fused=True)."""
    wb, ab = w_row.view(np.uint8).reshape(-1, 18), a_row.view(np.uint8).reshape(-1, 34)
    dx = wb[:, :2].copy().view(np.float16)[:, 0].astype(np.float32)
    dy = ab[:, :2].copy().view(np.float16)[:, 0].astype(np.float32)
    qs, yq = wb[:, 2:].astype(np.int32), ab[:, 2:].view(np.int8).astype(np.int32)
    sumi = (((qs & 15) - 8) * yq[:, :16]).sum(1) + (((qs >> 4) - 8) * yq[:, 16:]).sum(1)
    s = np.float32(0)
    for ib in range(n // 32):
        p = np.float32(np.float32(sumi[ib]) * dx[ib])
        s = np.float32(np.float64(p) * np.float64(dy[ib]) + np.float64(s)) if fused else np.float32(s + p * dy[ib])
    return s


@functools.cache
def oracle_fuses_q4_0():
    """True when the shipped ggml_vec_dot_q4_0_q8_0_generic was compiled with the block update
    contracted into an FMA: its results match the fused evaluation on every probe row and the
    unfused one on not all of them."""
    rng = np.random.default_rng([SEED, 400])
    n = 4096
    w, a, _ = dot_case(rng, "q4_0", 8, n)
    got = [ggml_dot_sym("ggml_vec_dot_q4_0_q8_0_generic", w[r], a[r], n) for r in range(8)]
    fused = all(g == _q4_0_dot_as_written(w[r], a[r], n, True) for r, g in enumerate(got))
    plain = all(g == _q4_0_dot_as_written(w[r], a[r], n, False) for r, g in enumerate(got))
    return fused and not plain


def dot_case(rng, wname, rows, n):
    aname = DOTS[wname][0]
    w = random_blocks(rng, wname, rows * n // TYPES[wname][1]).reshape(rows, -1)
    a = np.stack([ggml_quant(aname, rng.standard_normal(n).astype(np.float32)) for _ in range(rows)])
    mag = np.array([np.abs(ggml_dequant(wname, w[r], n).astype(np.float64) *
                           ggml_dequant(aname, a[r], n).astype(np.float64)).sum() for r in range(rows)])
    return w, a, mag


@pytest.mark.parametrize("wname", list(DOTS))
def test_vec_dot_matches_ggml(tool, tmp_path, wname):
    rng = np.random.default_rng([SEED, 200 + list(DOTS).index(wname), 3])
    rows, n = 64, 4096
    w, a, mag = dot_case(rng, wname, rows, n)
    (tmp_path / "w.bin").write_bytes(w.tobytes())
    (tmp_path / "a.bin").write_bytes(a.tobytes())
    out = run_tool(tool, "dot", wname, tmp_path / "w.bin", tmp_path / "a.bin", n).split()
    loom = np.array([int(v, 16) for v in out], dtype=np.uint32).view(np.float32)
    ref = np.array([ggml_dot_sym(DOT_ORACLE[wname], w[r], a[r], n) for r in range(rows)], dtype=np.float32)
    exact = int((loom.view(np.uint32) == ref.view(np.uint32)).sum())
    rel = np.abs(loom.astype(np.float64) - ref) / mag
    print(f"vec_dot {wname}: {rows} rows x {n // TYPES[wname][1]} blocks vs {DOT_ORACLE[wname]}: "
          f"bit-identical {exact}/{rows}, max |diff|/sum|wa| = {rel.max():.2e}")
    if wname in EXACT_DOTS and not oracle_fuses_q4_0():
        assert exact == rows, f"{wname}: rows {np.flatnonzero(loom != ref)[:8]} differ"
    else:
        if wname in EXACT_DOTS:
            print(f"  (this libggml-cpu fuses its generic dots into FMAs: bound 1e-6, not bit-identity)")
        assert rel.max() <= 1e-6, f"{wname}: worst row {rel.argmax()} loom {loom[rel.argmax()]} ggml {ref[rel.argmax()]}"


def test_ggml_q5_0_simd_dot_matches_its_dequantization():
    """q5_0 is checked against ggml's SIMD dot, which must agree with the dot of ggml's own
    dequantized rows. (On some builds the shipped *generic* q5_0 dot disagrees with them by far
    more than rounding — seen on an AVX-512 GCC build — while on others, e.g. an AVX2 build on
    AMD Zen 3, it agrees: a property of the oracle's build, so it is printed, not asserted.)"""
    rng = np.random.default_rng([SEED, 300])
    w, a, mag = dot_case(rng, "q5_0", 8, 4096)
    exact = [float((ggml_dequant("q5_0", w[r], 4096).astype(np.float64) *
                    ggml_dequant("q8_0", a[r], 4096).astype(np.float64)).sum()) for r in range(8)]
    gen = [ggml_dot_sym("ggml_vec_dot_q5_0_q8_0_generic", w[r], a[r], 4096) for r in range(8)]
    simd = [ggml_dot_sym("ggml_vec_dot_q5_0_q8_0", w[r], a[r], 4096) for r in range(8)]
    assert all(abs(s - e) <= 1e-5 * m for s, e, m in zip(simd, exact, mag))
    worst = max(abs(g - e) / m for g, e, m in zip(gen, exact, mag))
    print(f"ggml's generic q5_0 dot vs its dequantization: worst |diff|/sum|wa| = {worst:.2e}")


# What llama.cpp runs on x86 is not the *_ref/_generic code above but the AVX kernels of
# arch/x86/quants.c: quantize_row_q8_0/q8_1 (id = 127/amax, ties to even) and the eight-lane
# ggml_vec_dot_* of the legacy types and of Q4_K/Q5_K/Q6_K (one activation row). Loom's
# reference backend computes with quant::ggml's scalar copies of them (loom-quant-tool
# actquant / gdot); these must match bit for bit.
RUNTIME_DOTS = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K"]


def ggml_runtime_quant(aname, x):
    be, bb = ACT_BYTES[aname]
    out = np.zeros(len(x) // be * bb, dtype=np.uint8)
    fn = getattr(CPU, f"quantize_row_{aname}")
    fn.argtypes, fn.restype = [_P, _P, _I64], None
    fn(_ptr(x), _ptr(out), len(x))
    return out


@pytest.mark.parametrize("aname", ["q8_0", "q8_1", "q8_K"])
def test_runtime_activation_quantize_bit_identical(tool, tmp_path, aname):
    rng = np.random.default_rng([SEED, 500 + list(ACT_BYTES).index(aname)])
    be, bb = ACT_BYTES[aname]
    n = 256 * 512
    x = random_floats(rng, n, be)
    # Rows on integer and half-integer grids: x*id lands on ties (2.5, -3.5) for most blocks.
    ties = (rng.integers(-254, 255, size=n) / 2).astype(np.float32)
    ties[::be] = np.float32(127)
    x = np.concatenate([x, ties])
    (tmp_path / "in.f32").write_bytes(x.tobytes())
    run_tool(tool, "actquant", aname, tmp_path / "in.f32", tmp_path / "out.bin")
    loom = np.fromfile(tmp_path / "out.bin", dtype=np.uint8)
    ref = ggml_runtime_quant(aname, x)
    bad = np.flatnonzero((loom.reshape(-1, bb) != ref.reshape(-1, bb)).any(axis=1))
    print(f"run-time quantize {aname}: {ref.size // bb} blocks vs ggml quantize_row_{aname}, mismatching={bad.size}")
    assert bad.size == 0, f"{aname}: blocks {bad[:8]} differ from ggml's run-time quantizer"


@pytest.mark.parametrize("wname", RUNTIME_DOTS)
def test_runtime_dot_bit_identical(tool, tmp_path, wname):
    rng = np.random.default_rng([SEED, 600 + RUNTIME_DOTS.index(wname)])
    rows, n = 64, 4096
    aname = DOTS[wname][0]
    w = random_blocks(rng, wname, rows * n // TYPES[wname][1]).reshape(rows, -1)
    a = np.stack([ggml_runtime_quant(aname, random_floats(rng, n, 256 if aname == "q8_K" else 32))
                  for _ in range(rows)])
    (tmp_path / "w.bin").write_bytes(w.tobytes())
    (tmp_path / "a.bin").write_bytes(a.tobytes())
    got = [int(h, 16) for h in run_tool(tool, "gdot", wname, tmp_path / "w.bin", tmp_path / "a.bin", n, 1).split()]
    sym = f"ggml_vec_dot_{wname}_{aname}"
    want = [int(np.float32(ggml_dot_sym(sym, w[r], a[r], n)).view(np.uint32)) for r in range(rows)]
    bad = [r for r in range(rows) if got[r] != want[r]]
    print(f"run-time dot {wname}: {rows} rows vs ggml {sym}, mismatches={len(bad)}")
    assert not bad, f"{wname}: rows {bad[:8]} differ from {sym}"
