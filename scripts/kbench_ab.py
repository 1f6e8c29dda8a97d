#!/usr/bin/env python3
"""A kernel A/B of one device call, side by side (scripts/gpu-check's kbench section).

  kbench_ab.py NEW BASE [AGAIN]   loom_cuda_kernel_bench tables of this build, the base build and
                                  this build once more (run after the base: the spread between
                                  NEW and AGAIN is the drift the ratio must beat), as one table
                                  of the cases all of them ran: µs a launch and new / base.
  kbench_ab.py --ncu NEW BASE     Nsight Compute text output of one launch of each build (the
                                  sections and --metrics gpu-check asks for): the figures that
                                  decide a kernel version (duration, instructions, issue slots,
                                  eligible warps, the stall reasons an issued instruction), side by side.
"""
import re
import sys


def bench_rows(path):
    rows = {}
    for line in open(path, errors="replace"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not re.fullmatch(r"[\d.]+", cells[4]):
            continue
        rows[tuple(cells[:4])] = float(cells[4])
    return rows


def bench_table(paths):
    runs = [bench_rows(p) for p in paths]
    keys = [k for k in runs[0] if all(k in r for r in runs[1:])]
    if not keys:
        return "no case in common (did every binary run the same --kernels / --types / --rows?)"
    head = "| type | kernel | N x K | rows | new µs | base µs | new / base |"
    rule = "|---|---|---|---|---|---|---|"
    if len(runs) > 2:
        head += " new again µs |"
        rule += "---|"
    out = [head, rule]
    for k in keys:
        new, base = runs[0][k], runs[1][k]
        line = f"| {' | '.join(k)} | {new:.1f} | {base:.1f} | {new / base:.3f} |"
        if len(runs) > 2:
            line += f" {runs[2][k]:.1f} |"
        out.append(line)
    return "\n".join(out)


# The ncu figures kept: a metric's display name (or a name's prefix for the stall ratios) and
# how the table shows it.
NCU_KEEP = ("Duration", "Elapsed Cycles", "SM Active Cycles", "Executed Instructions", "Issue Slots Busy",
            "Eligible Warps Per Scheduler", "Active Warps Per Scheduler", "Warp Cycles Per Issued Instruction",
            "Registers Per Thread", "Achieved Occupancy")
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")


def ncu_figures(path):
    figs = {}
    for line in open(path, errors="replace"):
        parts = re.split(r"\s{2,}", line.strip())
        if len(parts) < 2 or not re.fullmatch(r"[\d,.]+", parts[-1]):
            continue
        value = float(parts[-1].replace(",", ""))
        m = STALL.fullmatch(parts[0])
        if m:
            figs[f"stall: {m.group(1)}"] = value
        elif parts[0] in NCU_KEEP and parts[0] not in figs:  # the first launch's
            unit = parts[1] if len(parts) > 2 else ""
            figs[parts[0] + (f" ({unit})" if unit else "")] = value
    return figs


def ncu_table(new_path, base_path):
    new, base = ncu_figures(new_path), ncu_figures(base_path)
    if not new or not base:
        return f"no ncu figures in {new_path if not new else base_path}"
    names = [n for n in new if not n.startswith("stall")] + sorted(
        (n for n in new if n.startswith("stall") and max(new[n], base.get(n, 0)) >= 0.05),
        key=lambda n: -new[n])
    out = ["| figure | new | base |", "|---|---|---|"]
    for n in names:
        b = base.get(n)
        out.append(f"| {n} | {new[n]:,.2f} | {'' if b is None else f'{b:,.2f}'} |")
    return "\n".join(out)


def main(argv):
    if len(argv) == 3 and argv[0] == "--ncu":
        print(ncu_table(argv[1], argv[2]))
    elif len(argv) in (2, 3) and not argv[0].startswith("-"):
        print(bench_table(argv))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
