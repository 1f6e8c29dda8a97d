"""`loom tune` end to end on a tiny `loom synth` model (a workload git repository of its own):
init writes a valid commented contract; a session never touches the original checkout, keeps
only what passed every gate (whatever the timing noise on a busy machine), and its evidence
bundle verifies and detects tampering; the keep path (commit with the gate results, diff in the
bundle, accept fast-forwards the checkout); agent candidates that break the program or change
nothing are reverted and leave nothing; resume continues from the manifest."""
import hashlib
import json
import pathlib
import re
import subprocess

import pytest

from conftest import run_loom

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]


def git(repo, *args):
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit_file(wl, name, text, message):
    """Writes `name` into workload `wl` and commits the workload's tree."""
    (wl / name).write_text(text)
    git(wl, "add", "-A")
    git(wl, "commit", "-qm", message)


def strip_comments(text):
    return "\n".join(re.sub(r"\s*//.*$", "", line) for line in text.splitlines())


def workload(loom_bin, tmp_path, schedule_line=None, **contract):
    g = tmp_path / "tiny.gguf"
    run_loom(loom_bin, "synth", "tiny-llama", g, "--seed", 5, "--type", "q8_0")
    wl = tmp_path / "wl"
    wl.mkdir()
    run_loom(loom_bin, "port", g, "-o", wl / "model.loom")
    if schedule_line:
        p = wl / "model.loom"
        p.write_text(p.read_text().replace("threads = 0", "threads = 0,\n    " + schedule_line))
    git(tmp_path, "init", "-q", str(wl))
    run_loom(loom_bin, "tune", "init", wl, "--gguf", g)
    c = json.loads(strip_comments((wl / "loom-tune.json").read_text()))
    for k, v in contract.items():
        c[k] = v
    (wl / "loom-tune.json").write_text(json.dumps(c, indent=2))
    git(wl, "add", "-A")
    git(wl, "commit", "-qm", "workload")
    return wl


def session(loom_bin, wl, *args, check=True):
    r = run_loom(loom_bin, "tune", "run", wl, *args, check=check, timeout=300)
    if not check:
        return r
    m = re.search(r"^session: (.+)$", r.stdout, re.M)
    assert m, r.stdout + r.stderr
    return pathlib.Path(m.group(1))


def breakdown(s):
    return json.loads((s / "evidence" / "session_breakdown.json").read_text())


def test_init_writes_a_commented_valid_contract_and_bad_contracts_are_named(loom_bin, tmp_path):
    wl = workload(loom_bin, tmp_path)
    g = tmp_path / "tiny.gguf"
    (tmp_path / "other").mkdir()
    run_loom(loom_bin, "port", g, "-o", tmp_path / "other" / "p.loom")
    run_loom(loom_bin, "tune", "init", tmp_path / "other", "--gguf", g)
    text = (tmp_path / "other" / "loom-tune.json").read_text()
    assert "//" in text and hashlib.sha256(g.read_bytes()).hexdigest() in text
    for field in ["rtol", "atol", "slo", "pairs", "min_gain", "cache_state", "budget", "selection", "heldout"]:
        assert f'"{field}"' in text, field
    r = run_loom(loom_bin, "tune", "init", tmp_path / "other", "--gguf", g, check=False)
    assert r.returncode != 0 and "not overwritten" in r.stderr
    # A contract whose pinned sha256 is not the file's, and one with too few pairs.
    c = json.loads((wl / "loom-tune.json").read_text())
    c["model"]["sha256"] = "0" * 64
    (wl / "loom-tune.json").write_text(json.dumps(c))
    git(wl, "commit", "-qam", "wrong pin")
    r = session(loom_bin, wl, check=False)
    assert r.returncode == 1 and "the contract pins " + "0" * 64 in r.stderr
    c["model"]["sha256"] = hashlib.sha256(g.read_bytes()).hexdigest()
    c["timing"]["pairs"] = 9
    (wl / "loom-tune.json").write_text(json.dumps(c))
    git(wl, "commit", "-qam", "few pairs")
    r = session(loom_bin, wl, check=False)
    assert r.returncode == 1 and "timing.pairs must be at least 10" in r.stderr


def test_session_keeps_only_what_passed_every_gate_and_its_bundle_verifies(loom_bin, tmp_path):
    wl = workload(loom_bin, tmp_path)
    head = git(wl, "rev-parse", "HEAD")
    s = session(loom_bin, wl, "--budget", "3")
    assert git(wl, "rev-parse", "HEAD") == head and git(wl, "status", "--porcelain") == ""  # untouched
    b = breakdown(s)
    assert b["schema_version"] == "loom.session_breakdown.v1"
    for k in ["session", "workload", "baseline", "final", "optimizations", "validation"]:
        assert k in b
    entries = b["optimizations"]["entries"]
    assert len(entries) == 3
    kept = [e for e in entries if e["decision"] == "keep"]
    for e in entries:
        assert e["gates"] and e["decision"] in ("keep", "revert")
    for e in kept:  # whatever the noise: a keep passed every gate, its CI above 1 + min_gain
        assert all(g["passed"] for g in e["gates"])
        timing = next(g for g in e["gates"] if g["gate"] == "timing")
        assert timing["metrics"]["pairs"] >= 10 and timing["metrics"]["ci95"][0] > 1.02
        assert git(s / "worktree", "cat-file", "-t", e["commit"]) == "commit"
    assert b["final"]["kept"] == len(kept)
    if not kept:
        assert b["final"]["gain_pct"] is None and "nothing kept" in b["final"]["summary"]
        assert git(s / "worktree", "rev-parse", "HEAD") == head
    assert b["validation"]["unscored_keep_count"] == 0
    closing = {g["gate"]: g for g in b["validation"]["close"]}
    assert closing["clean_rebuild"]["passed"] and closing["rollback_drill"]["passed"], closing
    assert closing["clean_rebuild"]["metrics"]["rebuilt_vs_final"]["pairs"] >= 10
    pins = json.loads((s / "evidence" / "pin_ledger.json").read_text())
    assert pins["model"]["sha256"] == hashlib.sha256((tmp_path / "tiny.gguf").read_bytes()).hexdigest()
    assert pins["program"]["sha256"] == hashlib.sha256((wl / "model.loom").read_bytes()).hexdigest()
    assert pins["loom"]["git_revision"] and pins["machine"]["cpu"]
    # A CPU session has no GPU: the device facts are null, never made up.
    assert pins["machine"]["gpu"] is None and pins["machine"]["driver"] is None and pins["machine"]["power"] is None
    prov = json.loads((s / "evidence" / "provenance.json").read_text())
    assert prov["_type"] == "https://in-toto.io/Statement/v1" and prov["predicateType"] == "https://slsa.dev/provenance/v1"
    assert prov["subject"][0]["digest"]["sha256"] == b["final"]["program_sha256"]
    out = run_loom(loom_bin, "evidence", "verify", s / "evidence").stdout
    assert out.startswith("ok:")
    # Tampering: a digest no longer matches.
    led = s / "evidence" / "acceptance_ledger.json"
    led.write_text(led.read_text().replace('"revert"', '"keep"', 1))
    r = run_loom(loom_bin, "evidence", "verify", s / "evidence", check=False)
    assert r.returncode == 1 and "acceptance_ledger.json: digest differs" in r.stderr


def reseal(bundle):
    files = {}
    for p in sorted(bundle.rglob("*")):
        if p.is_file() and p.name != "digests.json":
            files[p.relative_to(bundle).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    (bundle / "digests.json").write_text(json.dumps({"algorithm": "sha256", "files": files}))


def test_keep_path_commit_diff_accept_and_ledger_checks(loom_bin, tmp_path):
    # Mechanics of a keep, on a baseline made slow on purpose (the scalar kernels, ~3-10x slower
    # than the SIMD ones here), so a keep happens whatever the noise. A real session's gain is
    # never measured from such a baseline.
    wl = workload(loom_bin, tmp_path, 'isa = "scalar"', tolerances={"rtol": 0.001, "atol": 0.01, "quality_drop": 1e-6})
    head = git(wl, "rev-parse", "HEAD")
    s = session(loom_bin, wl, "--budget", "3")
    b = breakdown(s)
    kept = [e for e in b["optimizations"]["entries"] if e["decision"] == "keep"]
    assert kept, json.dumps(b["optimizations"], indent=1)
    first = kept[0]
    assert first["point"]["key"] == "isa" and first["gain_pct"] > 2 and first["ci95"][0] > 1
    msg = git(s / "worktree", "log", "-1", "--format=%B", first["commit"])
    assert "gate timing: pass" in msg and "gate numerical: pass" in msg and "gate build: pass" in msg
    diff = (s / "evidence" / first["diff"]).read_text()
    assert '-    isa = "scalar"' in diff
    assert b["validation"]["close_gates_passed"], b["validation"]
    assert git(wl, "rev-parse", "HEAD") == head  # nothing applied before accept
    out = run_loom(loom_bin, "accept", s).stdout
    assert "fast-forwarded" in out
    assert git(wl, "rev-parse", "HEAD") == b["session"]["final_commit"]
    assert 'isa = "scalar"' not in (wl / "model.loom").read_text()
    # The ledger check, with the digests made consistent again: a keep whose gate failed.
    ev = s / "evidence"
    bd = json.loads((ev / "session_breakdown.json").read_text())
    e = next(x for x in bd["optimizations"]["entries"] if x["decision"] == "keep")
    e["gates"][-2]["passed"] = False
    bd["validation"]["unscored_keep_count"] = 1
    (ev / "session_breakdown.json").write_text(json.dumps(bd))
    reseal(ev)
    r = run_loom(loom_bin, "evidence", "verify", ev, check=False)
    assert "kept with a gate that did not pass" in r.stderr and "unscored_keep_count is 1" in r.stderr
    r = run_loom(loom_bin, "accept", s, check=False)
    assert r.returncode == 1


def test_agent_candidates_that_break_or_do_nothing_leave_nothing(loom_bin, tmp_path):
    wl = workload(loom_bin, tmp_path)
    head = git(wl, "rev-parse", "HEAD")
    s = session(loom_bin, wl, "--no-search", "--agent", "echo 'this is not a program' > model.loom; echo I made it 10x faster")
    e = breakdown(s)["optimizations"]["entries"]
    assert len(e) == 1 and e[0]["producer"] == "agent" and e[0]["decision"] == "revert"
    assert e[0]["gates"][0]["gate"] == "build" and not e[0]["gates"][0]["passed"]
    assert git(s / "worktree", "status", "--porcelain") == "" and git(s / "worktree", "rev-parse", "HEAD") == head
    assert "10x faster" in (s / "evidence" / "logs" / "agent.log").read_text()  # logged, not trusted
    # An agent that loosens the contract (and changes the program) is refused at the build gate.
    s3 = session(loom_bin, wl, "--no-search", "--agent",
                 "sed -i 's/\"min_gain\": 0.02/\"min_gain\": -1/' loom-tune.json; echo '// x' >> model.loom")
    e3 = breakdown(s3)["optimizations"]["entries"][0]
    assert e3["decision"] == "revert" and e3["reason"] == "contract changed", e3
    assert git(s3 / "worktree", "status", "--porcelain") == ""
    s2 = session(loom_bin, wl, "--no-search", "--agent", "true")
    e2 = breakdown(s2)["optimizations"]["entries"]
    assert e2[0]["reason"] == "no change" and e2[0]["decision"] == "revert"
    assert run_loom(loom_bin, "accept", s2).stdout.startswith("nothing kept")
    assert git(wl, "rev-parse", "HEAD") == head


def interrupt_after_first_decision(s, edited):
    """Leaves session `s` as if interrupted after its first decision with a candidate half applied
    to `edited` (a worktree file); returns that first entry."""
    m = json.loads((s / "manifest.json").read_text())
    m["state"] = "running"
    m["entries"] = m["entries"][:1]
    (s / "manifest.json").write_text(json.dumps(m))
    (s / "worktree" / edited).write_text("half an edit")
    return m["entries"][0]

def test_resume_continues_from_the_manifest(loom_bin, tmp_path):
    wl = workload(loom_bin, tmp_path)
    s = session(loom_bin, wl, "--budget", "2")
    r = run_loom(loom_bin, "tune", "resume", s, check=False)
    assert r.returncode == 1 and "closed" in r.stderr
    first = interrupt_after_first_decision(s, "model.loom")
    run_loom(loom_bin, "tune", "resume", s, timeout=300)
    m2 = json.loads((s / "manifest.json").read_text())
    assert m2["state"] == "closed" and m2["entries"][0] == first
    same = [e for e in m2["entries"] if e["description"] == first["description"]
            and e["current_commit"] == first["current_commit"]]
    assert len(same) == 1  # decided once, not retried
    assert run_loom(loom_bin, "evidence", "verify", s / "evidence").stdout.startswith("ok:")


SCRIPT = """import json, os, sys
program = open(os.environ["LOOM_TUNE_PROGRAM"]).read()
mode = sys.argv[1]
gate = {"passed": "huge_pages" not in program, "checked": "huge_pages"}
if mode == "skip":
    gate["skipped"] = True
json.dump({"output_throughput": 100.0, "quality_gate": gate}, open(os.environ["LOOM_TUNE_RESULT"], "w"))
"""


def test_scriptable_workload_gate_fails_closed(loom_bin, tmp_path):
    wl = workload(loom_bin, tmp_path, script={"command": "python3 check.py pass"})
    commit_file(wl, "check.py", SCRIPT, "the team's workload script")
    s = session(loom_bin, wl, "--budget", "4")
    m = json.loads((s / "manifest.json").read_text())
    assert m["baseline"]["script"]["passed"], m["baseline"]["script"]
    assert m["baseline"]["script"]["metrics"]["output_throughput"] == 100.0
    entries = breakdown(s)["optimizations"]["entries"]
    hp = next(e for e in entries if e["description"] == "huge_pages = false")
    assert hp["decision"] == "revert" and hp["reason"].startswith("script gate failed"), hp
    others = [e for e in entries if e is not hp]
    assert all(any(g["gate"] == "script" and g["passed"] for g in e["gates"]) for e in others)
    # A skipped gate fails closed: the session refuses to start from it.
    c = json.loads((wl / "loom-tune.json").read_text())
    c["script"]["command"] = "python3 check.py skip"
    (wl / "loom-tune.json").write_text(json.dumps(c))
    git(wl, "commit", "-qam", "skipping")
    r = session(loom_bin, wl, check=False)
    assert r.returncode == 1 and "skipped (fails closed)" in r.stderr, r.stderr


TIMED_SCRIPT = """import json, os
program = open(os.environ["LOOM_TUNE_PROGRAM"]).read()
# The team's own measurement: here a throughput the program's text decides, so the test knows
# what the timing gate must conclude whatever the machine's noise.
rate = 150.0 if "// team fast path" in program else 100.0
json.dump({"output_throughput": rate, "quality_gate": {"passed": True}}, open(os.environ["LOOM_TUNE_RESULT"], "w"))
"""


def test_script_timed_workload_decides_the_timing_gate(loom_bin, tmp_path):
    # A workload of the scriptable kind: the candidate (an agent's edit that changes nothing the
    # engine computes) is kept on the script's paired output_throughput — 1.5x in every round —
    # where the engine's own timing could show no gain; the gain against the baseline, the
    # baseline's self-timing and the close's final timing come from the script too.
    wl = workload(loom_bin, tmp_path, script={"command": "python3 timed.py", "timing": True})
    commit_file(wl, "timed.py", TIMED_SCRIPT, "the team's timed workload")
    s = session(loom_bin, wl, "--no-search", "--agent", "sed -i 's|threads = 0|threads = 0  // team fast path|' model.loom")
    b = breakdown(s)
    [e] = b["optimizations"]["entries"]
    assert e["decision"] == "keep", json.dumps(e, indent=1)
    timing = next(g for g in e["gates"] if g["gate"] == "timing")
    assert timing["metrics"]["source"] == "script"
    assert set(timing["metrics"]["a_tps"]) == {100.0} and set(timing["metrics"]["b_tps"]) == {150.0}
    assert e["gain_pct"] == pytest.approx(50.0)
    m = json.loads((s / "manifest.json").read_text())
    assert m["baseline"]["self_timing"]["source"] == "script"
    assert m["baseline"]["self_timing"]["ratio_median"] == pytest.approx(1.0)
    # A contract asking for script timing without a script is refused by name.
    c = json.loads((wl / "loom-tune.json").read_text())
    c["script"] = {"command": None, "timing": True}
    (wl / "loom-tune.json").write_text(json.dumps(c))
    git(wl, "commit", "-qam", "no script")
    r = session(loom_bin, wl, check=False)
    assert r.returncode == 1 and "script.timing is true but script.command is not set" in r.stderr, r.stderr
