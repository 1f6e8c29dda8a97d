"""`loom tune` on a workload that builds the engine from source (the contract's `build`): a
tiny project whose "engine" is a small wrapper around the loom under test, built by a shell
command (no compiler: the build writes the wrapper from its source). Every tree is built in a
fresh checkout, the arms run the built binary out of process (`loom tune-arm`), and the normal
gates decide: a source change that is genuinely faster is kept with its gain against the
baseline; a build that fails, or only works thanks to a stale artifact, is reverted at the build
gate; a build that drifts (its clean rebuild measurably slower than the final program) fails the
close; a child that under-reports its time is rejected by the timing audit; a child that dies
fails that candidate and the session goes on (a baseline child that dies is started again)."""
import json
import pathlib
import subprocess

from conftest import run_loom
from test_tune import breakdown, commit_file, git, interrupt_after_first_decision, session, strip_comments, workload

# The project's engine source. Constants a candidate edits decide what the built engine does;
# without any of them it is loom itself (exec). The proxy modes sit between the session and
# loom, forwarding the arm protocol (tune/arm_server.h) and misbehaving as told.
ENGINE = r'''#!/usr/bin/env python3
import json, os, signal, subprocess, sys
LOOM = "@LOOM@"
FORCE_SCALAR = {force_scalar}  # this source lacks its SIMD kernels (the program is run on the scalar ones)
LIE = False              # report half of every timed run's time
SLOW = False             # report twice every timed run's time (as a slower build would measure)
CRASH_AT = 0             # die (SIGKILL) at this timed run; 0: never
PARTIAL = False          # leave the first row of every logits answer unwritten (the poison the child filled)
MUTATE = False           # scribble on the input tokens (sent back, as the protocol does for a changed input)
TRIGGER = {trigger!r}    # a file naming part of a program path: that arm dies at its next request, once

args = sys.argv[1:]
program = args[args.index("--program") + 1]
if FORCE_SCALAR:
    text = open(program).read().replace("threads = 0", 'threads = 0,\n    isa = "scalar"')
    copy = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scalar-%d.loom" % os.getpid())
    open(copy, "w").write(text)
    args[args.index("--program") + 1] = copy
if not (LIE or SLOW or CRASH_AT or TRIGGER or PARTIAL or MUTATE):
    os.execv(LOOM, [LOOM] + args)

child = subprocess.Popen([LOOM] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
out = sys.stdout.buffer


def die():
    child.kill()
    os.kill(os.getpid(), signal.SIGKILL)


out.write(child.stdout.readline())
out.flush()
timed = 0
for line in sys.stdin.buffer:
    req = json.loads(line)
    if TRIGGER and os.path.exists(TRIGGER) and open(TRIGGER).read().strip() in program:
        os.remove(TRIGGER)
        die()
    if req["op"] == "timed_run":
        timed += 1
        if CRASH_AT and timed >= CRASH_AT:
            die()
    child.stdin.write(line)
    child.stdin.flush()
    head = child.stdout.readline()
    reply = json.loads(head)
    if (LIE or SLOW) and req["op"] == "timed_run" and reply.get("ok"):
        for k in ("prefill_seconds", "decode_seconds", "untimed_seconds"):
            reply[k] = reply[k] / 2 if LIE else reply[k] * 2
        head = (json.dumps(reply) + "\n").encode()
    if MUTATE and req["op"] == "logits" and reply.get("ok"):
        reply["tokens_after"] = [t + 1 for t in req["tokens"]]
        head = (json.dumps(reply) + "\n").encode()
    out.write(head)
    if req["op"] == "logits" and reply.get("ok"):
        rows = bytearray(child.stdout.read(reply["bytes"]))
        if PARTIAL:
            vocab = len(rows) // 4 // len(req["tokens"])
            rows[: 4 * vocab] = (0x7FC0DEAD).to_bytes(4, "little") * vocab
        out.write(rows)
    out.flush()
'''

# The build: the engine from its source, plus a generated file (as a code generator's output).
BUILD = """set -e
mkdir -p out
echo "generating out/engine.gen"
echo generated > out/engine.gen
sed "s|@LOOM@|$1|" engine.py.in > out/loom
chmod +x out/loom
"""


# A build that is not reproducible: it counts its runs in a file outside the tree ($2) and from
# its second run on writes an engine that reports twice each timed run's time.
DRIFTING_BUILD = """set -e
mkdir -p out
n=$(( $(cat "$2" 2>/dev/null || echo 0) + 1 ))
echo $n > "$2"
sed "s|@LOOM@|$1|" engine.py.in > out/loom
if [ $n -ge 2 ]; then sed -i 's/^SLOW = False/SLOW = True/' out/loom; fi
chmod +x out/loom
"""


def project(loom_bin, tmp_path, force_scalar=False, trigger="", build=BUILD, build_args="", **contract):
    """A workload repository with the program, the engine's source and its build."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    contract.setdefault("timing", {"prompts": ["The quick brown fox jumps over the lazy dog.", "Once upon a time"],
                                   "generate_tokens": 16, "pairs": 10, "warmup": 1})
    command = f"sh build.sh {pathlib.Path(loom_bin).resolve()} {build_args}".strip()
    wl = workload(loom_bin, tmp_path, build={"command": command, "binary": "out/loom"}, **contract)
    (wl / "engine.py.in").write_text(ENGINE.format(force_scalar=force_scalar, trigger=trigger))
    (wl / "build.sh").write_text(build)
    (wl / ".gitignore").write_text("out/\n")
    git(wl, "add", "-A")
    git(wl, "commit", "-qm", "the engine's source and its build")
    return wl


def no_build_checkouts_left(wl, s):
    listed = git(wl, "worktree", "list")
    assert "/builds/" not in listed and "clean_rebuild" not in listed, listed
    builds = s / "builds"
    assert not builds.exists() or not [p for p in builds.iterdir() if p.is_dir()], list(builds.iterdir())


def test_a_faster_source_change_is_kept_through_process_arms(loom_bin, tmp_path):
    # The baseline's engine runs the scalar kernels; the candidate's source change brings the
    # SIMD ones back (several times faster here, within the contract's tolerances): measured
    # through the built binaries in child processes, it passes every gate and is kept.
    wl = project(loom_bin, tmp_path, force_scalar=True,
                 tolerances={"rtol": 0.001, "atol": 0.01, "quality_drop": 1e-6})
    head = git(wl, "rev-parse", "HEAD")
    s = session(loom_bin, wl, "--no-search", "--agent",
                "sed -i 's/^FORCE_SCALAR = True/FORCE_SCALAR = False/' engine.py.in")
    b = breakdown(s)
    [e] = b["optimizations"]["entries"]
    assert e["decision"] == "keep", json.dumps(e, indent=1)
    gates = {g["gate"]: g for g in e["gates"]}
    assert list(gates) == ["build", "structural", "repeat_input", "numerical", "quality", "threads", "timing_audit",
                           "timing", "slo"]
    assert all(g["passed"] for g in e["gates"])
    built = gates["build"]["metrics"]
    assert built["exit_status"] == 0 and len(built["binary_sha256"]) == 64
    assert gates["threads"]["metrics"]["observed"] == 1  # the child's threads, counted in the child
    assert e["gain_pct"] > 20 and e["ci95"][0] > 1, e  # against the baseline, paired
    assert "-FORCE_SCALAR = True" in (s / "evidence" / e["diff"]).read_text()
    # The pin ledger records the baseline's build: its command, exit status and binary digest.
    pins = json.loads((s / "evidence" / "pin_ledger.json").read_text())
    sb = pins["source_build"]
    assert sb["command"].startswith("sh build.sh") and sb["binary"] == "out/loom"
    assert sb["baseline"]["exit_status"] == 0 and sb["baseline"]["commit"] == head
    assert sb["baseline"]["binary_sha256"] != built["binary_sha256"]  # a different source, a different binary
    assert b["workload"]["build"]["binary"] == "out/loom"
    # The close rebuilt the final commit's source in a fresh checkout and reproduced its outputs.
    close = {g["gate"]: g for g in b["validation"]["close"]}
    assert close["clean_rebuild"]["passed"], close["clean_rebuild"]
    assert close["clean_rebuild"]["metrics"]["build"]["binary_sha256"] == built["binary_sha256"]
    assert close["clean_rebuild"]["metrics"]["rebuilt_vs_final"]["pairs"] >= 10
    assert close["rollback_drill"]["passed"] and b["validation"]["close_gates_passed"]
    assert (s / "evidence" / "logs" / "build-baseline.log").read_text().count("generating out/engine.gen") == 1
    assert run_verify(loom_bin, s).startswith("ok:")
    assert git(wl, "rev-parse", "HEAD") == head and git(s / "worktree", "status", "--porcelain") == ""
    no_build_checkouts_left(wl, s)
    # Resumed after the keep (as if interrupted before the close): the kept commit's source is
    # built again for the current arm, and the session closes from there.
    m = json.loads((s / "manifest.json").read_text())
    m["state"] = "running"
    (s / "manifest.json").write_text(json.dumps(m))
    subprocess.run([str(loom_bin), "tune", "resume", str(s)], check=True, capture_output=True, timeout=300)
    m2 = json.loads((s / "manifest.json").read_text())
    assert m2["state"] == "closed" and m2["close_gates_passed"] and m2["entries"][0] == m["entries"][0]
    assert "generating out/engine.gen" in (s / "evidence" / "logs" / "build-current.log").read_text()
    assert breakdown(s)["final"]["commit"] == e["commit"]
    no_build_checkouts_left(wl, s)


def run_verify(loom_bin, s):
    return subprocess.run([str(loom_bin), "evidence", "verify", str(s / "evidence")], capture_output=True, text=True,
                          check=True).stdout


def test_a_clean_rebuild_measurably_slower_than_the_final_program_fails_the_close(loom_bin, tmp_path):
    # The build drifts: the baseline's (its first run) is honest, every later one reports twice
    # each timed run's time, outputs unchanged. Nothing is tried, so the final program is the
    # baseline's; the close's fresh rebuild of the final commit reproduces its outputs bit for bit
    # but measures half as fast: clean_rebuild fails, the close fails, and accept refuses.
    counter = tmp_path / "builds.count"
    wl = project(loom_bin, tmp_path, build=DRIFTING_BUILD, build_args=str(counter))
    s = session(loom_bin, wl, "--no-search")
    b = breakdown(s)
    close = {g["gate"]: g for g in b["validation"]["close"]}
    rebuilt = close["clean_rebuild"]
    assert not rebuilt["passed"], rebuilt
    t = rebuilt["metrics"]["rebuilt_vs_final"]
    # The floor: 1 - the contract's min_gain, or the baseline's A/A lower bound where lower.
    assert t["ci95"][1] < t["fails_below"] <= 0.98, t
    assert t["fails_below"] == min(0.98, b["baseline"]["self_timing"]["ci95"][0]), (t, b["baseline"])
    # A first reading of "slower" fails the close only when a second timing on fresh inputs agrees.
    again = rebuilt["metrics"]["confirmation"]
    assert again["ci95"][1] < again["fails_below"] == t["fails_below"] and again["pairs"] == t["pairs"], again
    assert again["rebuilt_tps"] != t["rebuilt_tps"]  # timed again, not copied
    assert "outputs reproduced bit for bit" in rebuilt["detail"] and "measurably slower twice" in rebuilt["detail"]
    assert close["rollback_drill"]["passed"]  # outputs only: the drifted build still health-checks
    assert not b["validation"]["close_gates_passed"]
    r = run_loom(loom_bin, "accept", s, check=False)
    assert r.returncode == 1 and "a close gate failed" in r.stderr
    assert int(counter.read_text()) == 3  # baseline, clean rebuild, rollback drill


def test_a_failing_build_and_a_stale_artifact_fail_the_build_gate(loom_bin, tmp_path):
    wl = project(loom_bin, tmp_path)
    head = git(wl, "rev-parse", "HEAD")
    # The build command fails: reverted at the build gate, its log's tail in the record.
    s = session(loom_bin, wl, "--no-search", "--agent",
                "sed -i 's/^set -e/set -e\\necho \"engine.cc:12: error: expected ;\" >\\&2; exit 3/' build.sh")
    [e] = breakdown(s)["optimizations"]["entries"]
    assert e["decision"] == "revert" and e["reason"] == "build failed", e
    g = e["gates"][0]
    assert g["gate"] == "build" and not g["passed"]
    assert "exit status 3" in g["detail"] and "engine.cc:12: error: expected ;" in g["detail"], g["detail"]
    assert g["metrics"]["exit_status"] == 3 and g["metrics"]["binary_sha256"] is None
    assert all(not x["passed"] for x in e["gates"])  # the later gates: not run
    assert git(s / "worktree", "status", "--porcelain", "--ignored") == ""
    assert git(s / "worktree", "rev-parse", "HEAD") == head and git(wl, "rev-parse", "HEAD") == head
    assert breakdown(s)["validation"]["close_gates_passed"]
    no_build_checkouts_left(wl, s)
    # A stale artifact: the agent builds in the worktree (out/ is ignored, so never part of the
    # candidate), then changes the build to need out/engine.gen without making it. It builds
    # where the old output lies around; in a fresh checkout it does not.
    loom = pathlib.Path(loom_bin).resolve()
    s2 = session(loom_bin, wl, "--no-search", "--agent",
                 f"sh build.sh {loom} > /dev/null && sed -i 's/^echo generated > out\\/engine.gen/"
                 f"test -f out\\/engine.gen || {{ echo \"out\\/engine.gen: no such file\" >\\&2; exit 4; }}/' build.sh"
                 f" && sh build.sh {loom}")
    [e2] = breakdown(s2)["optimizations"]["entries"]
    assert e2["decision"] == "revert" and e2["reason"] == "build failed", e2
    assert "exit status 4" in e2["gates"][0]["detail"] and "out/engine.gen: no such file" in e2["gates"][0]["detail"]
    assert git(s2 / "worktree", "status", "--porcelain", "--ignored") == ""  # the agent's out/ went with the revert
    no_build_checkouts_left(wl, s2)


def test_a_child_that_under_reports_its_time_is_rejected(loom_bin, tmp_path):
    wl = project(loom_bin, tmp_path)
    s = session(loom_bin, wl, "--no-search", "--agent", "sed -i 's/^LIE = False/LIE = True/' engine.py.in")
    [e] = breakdown(s)["optimizations"]["entries"]
    gates = {g["gate"]: g for g in e["gates"]}
    assert e["decision"] == "revert", e
    assert gates["numerical"]["passed"] and gates["quality"]["passed"]  # it computes honestly
    audit = gates["timing_audit"]
    assert not audit["passed"] and audit["metrics"]["reported_share"] < 0.75, audit
    # Its proxy process and loom below it are two threads of a one-thread contract: counted too.
    assert not gates["threads"]["passed"] and gates["threads"]["metrics"]["observed"] == 2, gates["threads"]
    assert git(s / "worktree", "status", "--porcelain") == ""


def test_a_child_that_computes_part_or_mutates_its_input_fails_the_structural_gate(loom_bin, tmp_path):
    # The structural gate through the protocol: an unwritten row reaches the session as the
    # poison, and an input the child changed reaches the caller's buffer.
    wl = project(loom_bin, tmp_path)
    for flag, metric in (("PARTIAL", "non_finite_or_unwritten"), ("MUTATE", "inputs_mutated")):
        s = session(loom_bin, wl, "--no-search", "--agent", f"sed -i 's/^{flag} = False/{flag} = True/' engine.py.in")
        [e] = breakdown(s)["optimizations"]["entries"]
        g = next(x for x in e["gates"] if x["gate"] == "structural")
        assert e["decision"] == "revert" and e["reason"].startswith("structural gate failed"), e
        assert not g["passed"] and g["metrics"][metric] > 0, g


def test_a_child_that_dies_fails_its_candidate_and_the_session_goes_on(loom_bin, tmp_path):
    # The candidate's engine dies at its third timed run: its timing gate fails, naming how it
    # died; the session closes normally.
    wl = project(loom_bin, tmp_path)
    head = git(wl, "rev-parse", "HEAD")
    s = session(loom_bin, wl, "--no-search", "--agent", "sed -i 's/^CRASH_AT = 0/CRASH_AT = 3/' engine.py.in")
    b = breakdown(s)
    [e] = b["optimizations"]["entries"]
    gates = {g["gate"]: g for g in e["gates"]}
    assert e["decision"] == "revert" and gates["structural"]["passed"] and gates["quality"]["passed"], e
    assert not gates["timing"]["passed"] and "killed by signal 9" in gates["timing"]["detail"], gates["timing"]
    assert gates["slo"]["detail"].startswith("not run")
    assert b["validation"]["close_gates_passed"] and git(s / "worktree", "rev-parse", "HEAD") == head
    no_build_checkouts_left(wl, s)
    # The baseline's engine dies once, when the candidate's numerical gate asks it for logits
    # (the agent arms the trigger after the baseline was measured): that gate fails with the
    # baseline named, and the baseline's arm is started again for the close.
    trigger = tmp_path / "trigger"
    wl2 = project(loom_bin, tmp_path / "second", trigger=str(trigger))
    s2 = session(loom_bin, wl2, "--no-search", "--agent",
                 f"echo /baseline/program.loom > {trigger} && echo '# a comment' >> engine.py.in")
    b2 = breakdown(s2)
    [e2] = b2["optimizations"]["entries"]
    num = next(g for g in e2["gates"] if g["gate"] == "numerical")
    assert not num["passed"] and num["detail"].startswith("the baseline failed to run") and "killed by signal 9" in num["detail"]
    assert not trigger.exists()
    assert "restarting the arm process" in (s2 / "evidence" / "logs" / "arm-baseline.log").read_text()
    close = {g["gate"]: g for g in b2["validation"]["close"]}
    assert close["rollback_drill"]["passed"] and b2["validation"]["close_gates_passed"], close


def test_without_a_build_section_the_arms_stay_in_process(loom_bin, tmp_path):
    wl = workload(loom_bin, tmp_path)
    # init's example contract carries the section commented out, with what it means.
    (tmp_path / "fresh").mkdir()
    subprocess.run(["cp", str(wl / "model.loom"), str(tmp_path / "fresh")], check=True)
    subprocess.run([str(loom_bin), "tune", "init", str(tmp_path / "fresh"), "--gguf", str(tmp_path / "tiny.gguf")],
                   check=True, capture_output=True)
    text = (tmp_path / "fresh" / "loom-tune.json").read_text()
    assert '// "build": { "command":' in text and '//             "binary": "build/bin/loom" },' in text
    uncommented = text.replace('  // "build":', '  "build":').replace('  //             "binary"', '  "binary"')
    assert json.loads(strip_comments(uncommented))["build"]["binary"] == "build/bin/loom"  # valid once uncommented
    s = session(loom_bin, wl, "--no-search", "--agent", "echo '// a comment' >> model.loom")
    b = breakdown(s)
    assert b["workload"]["build"] is None and "source_build" not in json.loads((s / "evidence" / "pin_ledger.json").read_text())
    assert not list((s / "evidence" / "logs").glob("arm-*.log")) and not (s / "builds").exists()
    # A contract whose build names no binary is refused by name.
    c = json.loads((wl / "loom-tune.json").read_text())
    c["build"] = {"command": "true"}
    (wl / "loom-tune.json").write_text(json.dumps(c))
    git(wl, "commit", "-qam", "build without a binary")
    r = session(loom_bin, wl, check=False)
    assert r.returncode == 1 and "build.command is set but build.binary" in r.stderr, r.stderr


def test_search_points_are_built_screened_and_resumed_through_process_arms(loom_bin, tmp_path):
    # The built-in search on a source workload: every point is a candidate tree built in a
    # fresh checkout of its own and measured by the built binary; resume builds the baseline
    # again and goes on from the manifest.
    wl = project(loom_bin, tmp_path)
    s = session(loom_bin, wl, "--budget", "2")
    entries = breakdown(s)["optimizations"]["entries"]
    assert len(entries) == 2
    for e in entries:
        build = e["gates"][0]
        assert build["gate"] == "build" and build["passed"] and build["metrics"]["exit_status"] == 0, e
        assert "a fresh checkout" in build["detail"]
    assert (s / "evidence" / "logs" / "arm-baseline.log").exists()
    no_build_checkouts_left(wl, s)
    m = json.loads((s / "manifest.json").read_text())
    first = interrupt_after_first_decision(s, "engine.py.in")
    subprocess.run([str(loom_bin), "tune", "resume", str(s)], check=True, capture_output=True, timeout=300)
    m2 = json.loads((s / "manifest.json").read_text())
    assert m2["state"] == "closed" and m2["entries"][0] == first and m2["close_gates_passed"], m2["state"]
    assert m2["pins"]["source_build"] == m["pins"]["source_build"]  # the baseline's pin is the first build's
    assert run_verify(loom_bin, s).startswith("ok:")
    no_build_checkouts_left(wl, s)


SCRIPT = """import json, os
loom = os.environ.get("LOOM_TUNE_LOOM", "")
# The team's script measures the program with the loom built from its tree, which it is handed.
ok = loom.endswith("/out/loom") and os.access(loom, os.X_OK) and "/builds/" in loom
json.dump({"output_throughput": 100.0, "quality_gate": {"passed": ok, "loom": loom}},
          open(os.environ["LOOM_TUNE_RESULT"], "w"))
"""


def test_the_workload_script_is_handed_the_built_loom(loom_bin, tmp_path):
    wl = project(loom_bin, tmp_path, script={"command": "python3 check.py", "timing": False})
    commit_file(wl, "check.py", SCRIPT, "the team's workload script")
    s = session(loom_bin, wl, "--no-search", "--agent", "echo '# a comment' >> engine.py.in")
    m = json.loads((s / "manifest.json").read_text())
    assert m["baseline"]["script"]["passed"]
    assert m["baseline"]["script"]["metrics"]["quality_gate"]["loom"].endswith("/builds/baseline/out/loom")
    [e] = breakdown(s)["optimizations"]["entries"]
    g = next(x for x in e["gates"] if x["gate"] == "script")
    assert g["passed"] and g["metrics"]["quality_gate"]["loom"].endswith("/builds/c001/out/loom"), g
