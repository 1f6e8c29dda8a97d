"""scripts/gpu_targets.py, gpu-check's last table: issue 11's targets against one call's files.
The files here have the layout `loom bench --json`, llama-bench `-o json` and llama-batched-bench
`--output-format jsonl` write (the fields the table reads); no GPU is needed to check the table."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def loom_bench(tests, peak=6200.0, depth=0):
    return {"tests": tests, "peak_device_mib": peak, "depth": depth}


def write_call(out):
    (out / "bench-llama3-8b.json").write_text(json.dumps(loom_bench([
        {"test": "pp512", "loom_tps": {"median": 19544.6}},
        {"test": "tg128", "loom_tps": {"median": 395.7}}])))
    (out / "bench-depth-llama3-8b.json").write_text(json.dumps(loom_bench([
        {"test": "tg128", "loom_tps": {"median": 396.9}}], 6665.0, 4096)))
    (out / "bench-parallel-llama3-8b.json").write_text(json.dumps(loom_bench([
        {"sequences": 8, "loom_tps": {"median": 1706.0}, "loom_pp_tps": {"median": 16670.7}},
        {"sequences": 64, "loom_tps": {"median": 4563.9}, "loom_pp_tps": {"median": 17460.8}}], 8437.0)))
    tag = "gemm_rows___32__gemm_f16_weights___true_"
    (out / f"bench-parallel-{tag}.json").write_text(json.dumps(loom_bench([
        {"sequences": 64, "loom_tps": {"median": 9100.0}, "loom_pp_tps": {"median": 24568.6}}], 21749.0)))
    (out / f"bench-parallel-{tag}.schedule").write_text("gemm_rows = 32, gemm_f16_weights = true\n")
    (out / "bench-smollm2-135m-untied.json").write_text(json.dumps(loom_bench([
        {"test": "tg128", "loom_tps": {"median": 1251.1}}], 332.0)))
    (out / "llama-bench-llama3-8b.json").write_text(json.dumps([
        {"n_prompt": 512, "n_gen": 0, "avg_ts": 9753.1}, {"n_prompt": 0, "n_gen": 128, "avg_ts": 278.1}]))
    (out / "llama-bench-depth.json").write_text(json.dumps([{"n_prompt": 0, "n_gen": 128, "n_depth": 4096, "avg_ts": 256.2}]))
    (out / "llama-batched-bench.jsonl").write_text(
        "main: n_kv_max = 16448\n" +
        "".join(json.dumps({"pl": b, "speed_tg": tg, "speed_pp": pp}) + "\n"
                for b, tg, pp in ((1, 270.0, 9000.0), (8, 977.0, 8517.4), (64, 4653.5, 10050.1))))


def table(out, device):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_targets.py"), str(out), device],
                       capture_output=True, text=True, check=True)
    return {tuple(c.strip() for c in line.strip("|").split("|")[:2]): [c.strip() for c in line.strip("|").split("|")]
            for line in r.stdout.splitlines()[2:]}


def test_targets_ratios_and_memory_on_an_h200(tmp_path):
    write_call(tmp_path)
    rows = table(tmp_path, "NVIDIA H200, 580.159.04, 143771 MiB")
    # shape | test | Loom | llama.cpp | ratio | target | met | peak device
    assert rows[("llama3-8b", "pp512")] == ["llama3-8b", "pp512", "19,544.6", "9,753.1", "2.00x", ">= 18,500", "yes", "6,200"]
    assert rows[("llama3-8b", "tg128")][4:7] == ["1.42x", ">= 650", "no (61%)"]
    assert rows[("llama3-8b", "tg128@d4096")][3:8] == ["256.2", "1.55x", ">= 600", "no (66%)", "6,665"]
    assert rows[("llama3-8b", "S_TG B=64")][3:7] == ["4,653.5", "0.98x", ">= 9,000", "no (51%)"]
    assert rows[("llama3-8b", "S_PP B=8")][3:7] == ["8,517.4", "1.96x", "-", "-"]
    with_f16 = rows[("llama3-8b", "S_TG B=64 with { gemm_rows = 32, gemm_f16_weights = true }")]
    assert with_f16[2:] == ["9,100.0", "4,653.5", "1.96x", ">= 9,000", "yes", "21,749"]
    # The 135M ran without its peer's file: no ratio, the target still judged.
    assert rows[("smollm2-135m-untied", "tg128")][2:7] == ["1,251.1", "-", "-", ">= 5,000", "no (25%)"]
    assert ("llama3.2-1b-untied", "tg128") not in rows  # no file, no row


def test_targets_not_judged_on_another_card(tmp_path):
    write_call(tmp_path)
    rows = table(tmp_path, "NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB")
    assert rows[("llama3-8b", "pp512")][6] == "(targets are for an H200)"
    assert rows[("llama3-8b", "pp512")][4] == "2.00x"  # the ratio is the same call's either way
