"""`loom check --backend/--keys/--explain` and `loom logits --dump-dir` on a `loom synth` file:
the schedule is the only knob, so a bad key fails with its line:col, --explain shows a key's
effect, and the dump directory is a schedule key that the plan records."""
import re

import pytest

from conftest import run_loom


def ported(loom_bin, tmp_path, schedule=""):
    g = tmp_path / "tiny.gguf"
    if not g.exists():
        run_loom(loom_bin, "synth", "tiny-llama", g, "--seed", 5, "--type", "q8_0")
    prog = tmp_path / "tiny.loom"
    run_loom(loom_bin, "port", g, "-o", prog)
    text = prog.read_text()
    prog.write_text(text + schedule + "\n")
    return g, prog, text.count("\n") + 1


def test_unknown_key_and_bad_value_name_line_and_column(loom_bin, tmp_path):
    _, prog, line = ported(loom_bin, tmp_path, 'schedule { kernel = "q4k_gemv_v2" }')
    r = run_loom(loom_bin, "check", "--backend", "cpu", prog, check=False)
    assert r.returncode != 0
    assert f"tiny.loom:{line}:12: schedule: backend cpu has no key 'kernel'" in r.stderr
    _, prog, line = ported(loom_bin, tmp_path, "schedule { attention = {chunk = 9999999} }")
    r = run_loom(loom_bin, "check", "--backend", "cpu", prog, check=False)
    assert f"tiny.loom:{line}:25: schedule: attention setting chunk must be an integer in [0, 1048576], found 9999999" in r.stderr
    # Without --backend the schedule's keys are the backends' business: the program verifies.
    run_loom(loom_bin, "check", prog)


def test_keys_list_every_declared_key(loom_bin, tmp_path):
    _, prog, _ = ported(loom_bin, tmp_path)
    out = run_loom(loom_bin, "check", "--backend", "cpu", "--keys", prog).stdout
    for key in ["threads", "isa", "huge_pages", "matmul_group_lookback", "matmul_group_parts", "dump_dir", "profile",
                "matmul(@glob) = {layout", "matmul(@glob) = {prefill_repack", "attention = {chunk"]:
        assert key in out, key
    ref = run_loom(loom_bin, "check", "--backend", "cpu-ref", "--keys", prog).stdout
    assert "threads" in ref and "dump_dir" in ref and "layout" not in ref


def test_explain_shows_each_choice(loom_bin, tmp_path):
    g, prog, _ = ported(loom_bin, tmp_path)
    base = run_loom(loom_bin, "check", "--explain", "--gguf", g, prog).stdout
    assert "kv chunk 256 (default)" in base and "grouped with" in base
    g, prog, _ = ported(loom_bin, tmp_path, 'schedule { attention = {chunk = 64}, matmul_group_lookback = 0, '
                                            'matmul(@blk0.*) = {layout = "rows"} }')
    prog.write_text(prog.read_text().replace("threads = 0", "threads = 1"))  # the porter writes threads = 0
    out = run_loom(loom_bin, "check", "--backend", "cpu", "--explain", "--gguf", g, prog).stdout
    assert "kv chunk 64" in out and "kv chunk 64 (" not in out and "grouped with" not in out
    assert re.search(r"backend cpu: threads 1,", out)
    for line in out.splitlines():
        if "x @blk0." in line:
            assert "layout rows" in line, line


def test_logits_dump_dir(loom_bin, tmp_path):
    g, prog, _ = ported(loom_bin, tmp_path)
    ids = tmp_path / "ids.txt"
    ids.write_text("1 2 3 4")
    for backend in ["cpu", "cpu-ref"]:
        d = tmp_path / f"dump-{backend}"
        d.mkdir()
        run_loom(loom_bin, "logits", "-m", prog, "--gguf", g, "--tokens", ids, "--out", tmp_path / "l.f32",
                 "--backend", backend, "--dump-dir", d)
        assert (d / "x0.f32").stat().st_size == 4 * 64 * 4, backend  # 4 rows of the 64-wide embedding


def test_cuda_keys_declare_the_decode_latency_choices(loom_bin, tmp_path):
    """The CUDA backend's keys are checked on any machine (no GPU is needed to list or check them)."""
    if "cuda (NVIDIA GPU)" not in run_loom(loom_bin, "check", "--help").stdout:
        pytest.skip("this build has no CUDA backend (nvcc was not found when it was configured)")
    _, prog, _ = ported(loom_bin, tmp_path)
    r = run_loom(loom_bin, "check", "--backend", "cuda", "--keys", prog)
    for key in ["graph_rows", "gemm_rows", "gemm_f16_weights", "mma_rows", "mma_wide_split", "mma_tiles", "gemv_resident", "decode_fusion",
                "decode_rope_fold", "programmatic_launch", "step_times", "attention_mma", "decode_merge_in_kernel",
                "attention_mma_shared", "decode_persistent"]:
        assert key in r.stdout, key
    _, prog, line = ported(loom_bin, tmp_path, "schedule { decode_fusion = 3 }")
    r = run_loom(loom_bin, "check", "--backend", "cuda", prog, check=False)
    assert r.returncode != 0 and f"tiny.loom:{line}:" in r.stderr and "decode_fusion" in r.stderr
    keys = "decode_fusion = false, programmatic_launch = false, gemm_f16_weights = true, mma_wide_split = true, mma_tiles = false, step_times = true"
    _, prog, _ = ported(loom_bin, tmp_path, f"schedule {{ {keys} }}")
    run_loom(loom_bin, "check", "--backend", "cuda", prog)
