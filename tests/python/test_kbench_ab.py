"""scripts/kbench_ab.py, gpu-check's kernel A/B: the kernel bench tables of two builds (and the
first build again) as one table, and two ncu reports' figures side by side. The inputs here have
the layout loom_cuda_kernel_bench and ncu's text output print; no GPU is needed to check them."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kbench_ab.py"

HEAD = """device-to-device copy: 3046 GB/s (read + write)

| type   | kernel | N x K        | rows | us        | GB/s      | of copy  |
|--------|--------|--------------|------|-----------|-----------|----------|
"""


def bench(rows):
    return HEAD + "".join(f"| {t:<6} | {k:<6} | {nk:>13} | {r:<4} | {us:9.1f} |       595 |      20% |\n"
                          for t, k, nk, r, us in rows)


def run(*args):
    r = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=True)
    return r.stdout.splitlines()


def test_the_cases_all_runs_share_side_by_side_with_the_ratio(tmp_path):
    new = tmp_path / "new.txt"
    base = tmp_path / "base.txt"
    again = tmp_path / "again.txt"
    new.write_text(bench([("q4_K", "glu-mmat", "14336 x 4096", 64, 104.4), ("q6_K", "mma-t", "4096 x 14336", 64, 66.9),
                          ("q4_K", "mma", "4096 x 4096", 8, 16.3)]))
    base.write_text(bench([("q4_K", "glu-mmat", "14336 x 4096", 64, 109.3), ("q6_K", "mma-t", "4096 x 14336", 64, 68.2)]))
    again.write_text(bench([("q4_K", "glu-mmat", "14336 x 4096", 64, 103.9), ("q6_K", "mma-t", "4096 x 14336", 64, 66.2),
                            ("q4_K", "mma", "4096 x 4096", 8, 16.3)]))
    out = run(new, base, again)
    assert out[0].startswith("| type | kernel | N x K | rows | new µs | base µs | new / base | new again µs |")
    rows = out[2:]
    assert rows == ["| q4_K | glu-mmat | 14336 x 4096 | 64 | 104.4 | 109.3 | 0.955 | 103.9 |",
                    "| q6_K | mma-t | 4096 x 14336 | 64 | 66.9 | 68.2 | 0.981 | 66.2 |"]  # the base lacks the third case
    assert len(run(new, base)[0].split("|")) == 9  # no "again" column without a third table


def test_no_shared_case_says_so(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(bench([("q4_K", "mma", "4096 x 4096", 8, 16.3)]))
    b.write_text(bench([("q6_K", "mma", "4096 x 4096", 8, 16.3)]))
    assert "no case in common" in run(a, b)[0]


NCU = """  void matmul_mma_tiled_kernel<8, 1>(TiledParts, XTiles) (224, 1, 1)x(512, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    ----------------------- ----------- ------------
    Elapsed Cycles                cycle      {cycles}
    Duration                         us       {us}
    ----------------------- ----------- ------------
    Section: Instruction Statistics
    Executed Instructions                           inst   {inst}
    Section: Command line profiler metrics
    smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio                   {barrier}
    smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio          {short}
    smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio              0.01
"""


def test_ncu_figures_and_stalls_side_by_side(tmp_path):
    new, base = tmp_path / "new.raw", tmp_path / "base.raw"
    new.write_text(NCU.format(cycles="187,303", us="103.87", inst="30,151,602", barrier="0.88", short="1.65"))
    base.write_text(NCU.format(cycles="197,324", us="109.76", inst="33,904,050", barrier="0.95", short="1.27"))
    out = run("--ncu", new, base)
    assert out[:2] == ["| figure | new | base |", "|---|---|---|"]
    assert "| Duration (us) | 103.87 | 109.76 |" in out
    assert "| Executed Instructions (inst) | 30,151,602.00 | 33,904,050.00 |" in out
    stalls = [l for l in out if l.startswith("| stall")]
    assert stalls == ["| stall: short_scoreboard | 1.65 | 1.27 |", "| stall: barrier | 0.88 | 0.95 |"]  # largest first, tiny ones left out
