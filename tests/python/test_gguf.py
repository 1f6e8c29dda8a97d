"""The GGUF reader and writer against the `gguf` Python package (the reference implementation),
and `loom inspect` on the provisioned real models."""
import json

import numpy as np
import pytest
import gguf

from conftest import run_loom


def inspect_json(loom_bin, path):
    return json.loads(run_loom(loom_bin, "inspect", "--json", path).stdout)


def py_fields(reader):
    """Metadata as {key: value}, without the reader's synthetic GGUF.* header fields."""
    out = {}
    for k, f in reader.fields.items():
        if k.startswith("GGUF."):
            continue
        out[k] = f.contents()
    return out


PY_TYPE = {"uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16", "uint32": "u32", "int32": "i32",
           "float32": "f32", "bool": "bool", "string": "string", "array": "array", "uint64": "u64",
           "int64": "i64", "float64": "f64"}


def py_type_name(f):
    return PY_TYPE[f.types[0].name.lower()]


def flatten(v):
    return [y for x in v for y in flatten(x)] if isinstance(v, list) else [v]


def assert_same_value(loom_v, py_v, key):
    if isinstance(py_v, list):
        assert isinstance(loom_v, list) and len(loom_v) == len(py_v), key
        for a, b in zip(loom_v, py_v):
            assert_same_value(a, b, key)
    elif isinstance(py_v, float):
        assert loom_v == pytest.approx(py_v, rel=1e-6, abs=1e-12), key
    else:
        assert loom_v == py_v, key


def assert_inspect_matches_reader(loom_bin, path):
    j = inspect_json(loom_bin, path)
    r = gguf.GGUFReader(str(path))
    fields = py_fields(r)
    assert list(j["metadata"].keys()) == list(fields.keys())
    for k, v in fields.items():
        assert j["metadata"][k]["type"] == py_type_name(r.fields[k]), k
        lv = j["metadata"][k]["value"]
        if len(r.fields[k].types) > 2:  # gguf-py's contents() flattens nested arrays
            lv = flatten(lv)
        assert_same_value(lv, v, k)
    assert len(j["tensors"]) == len(r.tensors)
    for lt, pt in zip(j["tensors"], r.tensors):
        assert lt["name"] == pt.name
        assert lt["shape"] == [int(d) for d in pt.shape]
        assert lt["type_id"] == int(pt.tensor_type)
        assert lt["nbytes"] == int(pt.n_bytes)
        assert lt["file_offset"] == int(pt.data_offset)
    assert j["summary"]["params"] == sum(int(np.prod(t.shape)) for t in r.tensors)
    return j, r


def test_loom_written_file_reads_in_gguf_py(loom_bin, tmp_path):
    out = tmp_path / "tiny.gguf"
    run_loom(loom_bin, "synth", "tiny-qwen2", out, "--seed", "3")
    j, r = assert_inspect_matches_reader(loom_bin, out)
    assert r.fields["general.architecture"].contents() == "qwen2"
    assert r.fields["qwen2.block_count"].contents() == 2
    assert len(r.fields["tokenizer.ggml.tokens"].contents()) == 512
    # Tensor bytes: gguf-py's view of the data equals what the file holds at loom's offsets.
    raw = out.read_bytes()
    for lt, pt in zip(j["tensors"], r.tensors):
        a = lt["file_offset"]
        assert raw[a:a + lt["nbytes"]] == pt.data.tobytes(), lt["name"]
    emb = r.tensors[0]
    assert emb.name == "token_embd.weight" and emb.tensor_type == gguf.GGMLQuantizationType.F16
    w = emb.data.astype(np.float32)
    assert 0.015 < float(w.std()) < 0.025 and abs(float(w.mean())) < 0.002


def test_gguf_py_written_file_reads_in_loom(loom_bin, tmp_path):
    path = tmp_path / "py.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 250)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", False)
    w.add_string("t.str", "ünïcode\tand\nnewlines")
    w.add_array("t.arr", [1.5, 2.5])
    w.add_array("t.strs", ["x", "yz"])
    w.add_array("t.nested", [[1, 2, 3], [4]])
    rng = np.random.default_rng(0)
    w.add_tensor("a.weight", rng.standard_normal((3, 64)).astype(np.float32))
    w.add_tensor("b.weight", rng.standard_normal((2, 5, 32)).astype(np.float16))
    q = gguf.quantize(rng.standard_normal((4, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("c.weight", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    j, r = assert_inspect_matches_reader(loom_bin, path)
    assert j["alignment"] == 64
    assert j["metadata"]["t.u64"]["value"] == 2**63 + 5
    assert j["metadata"]["t.nested"]["elem"] == "array"
    assert j["metadata"]["t.nested"]["value"] == [[1, 2, 3], [4]]
    by_name = {t["name"]: t for t in j["tensors"]}
    assert by_name["b.weight"]["shape"] == [32, 5, 2]
    assert by_name["c.weight"]["type"] == "q8_0" and by_name["c.weight"]["nbytes"] == 4 * 2 * 34


@pytest.mark.parametrize("fixture", ["smollm2", "gemma3"])
def test_inspect_real_models(loom_bin, request, fixture):
    path = request.getfixturevalue(fixture)
    j, r = assert_inspect_matches_reader(loom_bin, path)
    counts = {}
    for t in r.tensors:
        name = t.tensor_type.name.lower()
        counts[name] = counts.get(name, 0) + 1
    assert {k.lower(): v for k, v in j["summary"]["per_type"].items()} == counts
    text = run_loom(loom_bin, "inspect", path).stdout
    assert f"tensors ({len(r.tensors)})" in text
    assert "params" in text.splitlines()[-1]
    assert "…" in text  # long token arrays are summarised, not dumped
    assert len(text) < 200_000


def test_inspect_smollm2_text(loom_bin, smollm2):
    text = run_loom(loom_bin, "inspect", "--sha256", smollm2).stdout
    assert 'tokenizer.ggml.tokens                   [string × 49152] "<|endoftext|>", "<|im_start|>"' in text
    assert "134.5 M params" in text
    assert "token_embd.weight" in text and "[576, 49152]" in text
    assert "sha256" in text


def test_inspect_rejects_damaged_files(loom_bin, tmp_path, smollm2):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(smollm2.read_bytes()[:5_000_000])
    r = run_loom(loom_bin, "inspect", cut, check=False)
    assert r.returncode == 1
    assert "runs past end of file" in r.stderr and "at offset" in r.stderr
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x01\x00\x00\x00" + bytes(16))
    r = run_loom(loom_bin, "inspect", bad, check=False)
    assert r.returncode == 1 and "unsupported GGUF version 1" in r.stderr
