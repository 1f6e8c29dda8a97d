#include "tune/session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <utility>

#include "common/error.h"
#include "tune/candidate.h"
#include "tune/digest.h"
#include "tune/evidence.h"
#include "tune/git.h"
#include "tune/script_result.h"
#include "tune/session_state.h"

namespace loom::tune {

namespace fs = std::filesystem;
using nlohmann::json;

ArmSpec SessionState::spec(const std::string& program) const {
  ArmSpec a;
  a.program = program;
  a.gguf = c.path_of(c.gguf);
  a.backend = c.backend;
  a.threads = c.threads;
  size_t longest = 64;
  for (const auto& t : timing_tokens) longest = std::max(longest, t.size() + size_t(c.generate_tokens) + 1);
  for (const auto& t : selection_tokens) longest = std::max(longest, t.size() + 1);
  a.n_ctx = int32_t(longest);  // what the prompts need, within any program bound that fits them
  return a;
}

std::unique_ptr<Arm> SessionState::open(const std::string& program, const std::string& binary, const std::string& tag) const {
  if (binary.empty()) return open_engine_arm(spec(program));
  return open_process_arm(spec(program), binary, dir + "/evidence/logs/arm-" + tag + ".log");
}

SourceBuild SessionState::build_tree(const std::string& commit, const std::string& tag) const {
  return build_source(c, manifest["workload"].get<std::string>(), commit, dir + "/builds/" + tag,
                      dir + "/evidence/logs/build-" + tag + ".log");
}

GateInputs SessionState::gate_inputs(uint64_t salt) const {
  GateInputs in;
  for (const auto& t : timing_tokens) in.timing_lengths.push_back(int(t.size()));
  in.selection = selection_tokens;
  in.baseline_quality = baseline_quality;
  // Fresh inputs per candidate: from the contract's seed, the session id and the candidate.
  in.seed = c.seed ^ (std::hash<std::string>{}(id) + salt * 0x9e3779b97f4a7c15ull);
  return in;
}

std::pair<std::vector<double>, std::vector<double>> SessionState::timed_pairs(const Side& a, const Side& b, uint64_t salt,
                                                                             const std::string& tag) {
  if (c.script_timing) {
    auto p = script_pairs(c, c.dir, a.program, b.program, dir + "/script/" + tag, dir + "/evidence/logs/script.log",
                          c.pairs, a.loom, b.loom);
    return {std::move(p.a), std::move(p.b)};
  }
  auto t = time_pair(a.arm, b.arm, c, gate_inputs(salt), c.pairs, process_threads());
  return {std::move(t.a_tps), std::move(t.b_tps)};
}

std::string SessionState::current_program_file() const {
  const std::string path = dir + "/script/current.loom";
  fs::create_directories(dir + "/script");
  write_text(path, git(worktree, {"show", "HEAD:" + c.program}) + "\n");
  return path;
}

void SessionState::say(const std::string& line) {
  fmt::print(stderr, "tune: {}\n", line);
  log << line << "\n";
  log.flush();
}

void SessionState::save_manifest() const {
  write_text(dir + "/manifest.json.tmp", manifest.dump(2) + "\n");
  fs::rename(dir + "/manifest.json.tmp", dir + "/manifest.json");
}

std::vector<float> reference_outputs(Arm& arm, const SessionState& s) {
  std::vector<float> out;
  for (const auto* set : {&s.timing_tokens, &s.selection_tokens})
    for (const auto& t : *set) {
      const auto o = observe(arm, t);
      out.insert(out.end(), o.logits.begin(), o.logits.end());
    }
  return out;
}

namespace {

std::string digest_of(const std::vector<float>& v) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

void revert(SessionState& s) {
  git(s.worktree, {"reset", "-q", "--hard", "HEAD"});
  // A source workload's ignored files (build outputs an agent made in the worktree) go too: the
  // next candidate starts from the commit alone.
  git(s.worktree, {"clean", s.from_source() ? "-fdxq" : "-fdq"});
  remove_checkout(s.manifest["workload"].get<std::string>(), s.candidate_build_dir);
  s.candidate_build_dir.clear();
  s.candidate_binary.clear();
}

json ratio_json(const std::vector<double>& a, const std::vector<double>& b) {
  const auto r = bench::paired_ratio(a, b);
  return {{"pairs", r.pairs}, {"ratio_median", r.median}, {"ci95", {r.ci_lo, r.ci_hi}}};
}

bool decided(SessionState& s, const Candidate& cand) {
  for (const auto& e : s.entries())
    if (e["producer"] == cand.producer && e["description"] == cand.description && e["current_commit"] == git(s.worktree, {"rev-parse", "HEAD"}))
      return true;
  return false;
}

json new_entry(SessionState& s, const Candidate& cand) {
  return {{"id", fmt::format("c{:03d}", s.entries().size() + 1)},
          {"producer", cand.producer},
          {"description", cand.description},
          {"point", cand.point},
          {"current_commit", git(s.worktree, {"rev-parse", "HEAD"})},
          {"gates", json::array()},
          {"measurements", json::object()},
          {"ci95", nullptr},
          {"gain_pct", nullptr},
          {"unscored", false},
          {"decision", "revert"},
          {"reason", nullptr},
          {"commit", nullptr},
          {"diff", nullptr},
          {"diff_sha256", nullptr}};
}

void record(SessionState& s, json e) {
  s.say(fmt::format("{} {}: {} ({})", e["id"].get<std::string>(), e["description"].get<std::string>(),
                    e["decision"].get<std::string>(), e["reason"].is_string() ? e["reason"].get<std::string>() : ""));
  s.entries().push_back(std::move(e));
  s.save_manifest();
}

// Applies a candidate and opens it: the build gate. Null (and the entry decided) when it fails.
std::unique_ptr<Arm> build(SessionState& s, const Candidate& cand, json& e, int& threads_before) {
  try {
    cand.apply(s.worktree);
    if (git(s.worktree, {"status", "--porcelain"}).empty()) {
      e["gates"].push_back(GateResult{"build", false, "the candidate changed nothing"}.to_json());
      e["reason"] = "no change";
      return nullptr;
    }
    // The contract is the session's, read from the original checkout; a candidate that edits
    // it would carry changed thresholds into the accepted branch.
    if (!git(s.worktree, {"status", "--porcelain", "--", kContractFile}).empty()) {
      e["gates"].push_back(GateResult{"build", false, std::string("the candidate changed the contract ") + kContractFile}.to_json());
      e["reason"] = "contract changed";
      return nullptr;
    }
    threads_before = process_threads();
    std::unique_ptr<Arm> arm;
    if (s.from_source()) {
      // The candidate's tree (source and program) built in a fresh checkout of its own, and
      // its arm that build's binary in a child process.
      const std::string id = e["id"];
      const auto b = s.build_tree(snapshot_commit(s.worktree, s.dir + "/builds/scratch.index"), id);
      s.candidate_build_dir = b.dir;
      s.candidate_binary = b.binary;
      if (!b.ok) {
        e["gates"].push_back(GateResult{"build", false, b.detail, b.to_json()}.to_json());
        e["reason"] = "build failed";
        return nullptr;
      }
      arm = s.open(s.program_in(b.dir), b.binary, id);
      e["gates"].push_back(GateResult{"build", true,
                                      b.detail + "; the program checked against backend " + s.c.backend +
                                          "'s keys and compiled by it (an arm in a child process)",
                                      b.to_json()}
                               .to_json());
    } else {
      arm = s.open(s.program_in(s.worktree));
      e["gates"].push_back(GateResult{"build", true, "checked against backend " + s.c.backend + "'s keys and compiled"}.to_json());
    }
    if (!s.c.script_command.empty()) {
      // Run from the original checkout: the script is the base commit's, whatever the candidate edited.
      const auto g = run_script_gate(s.c, s.c.dir, s.program_in(s.worktree),
                                     s.dir + "/script/" + e["id"].get<std::string>() + ".json",
                                     s.dir + "/evidence/logs/script.log", s.candidate_binary);
      e["gates"].push_back(g.to_json());
      if (!g.passed) {
        e["reason"] = "script gate failed: " + g.detail;
        return nullptr;
      }
    }
    return arm;
  } catch (const std::exception& ex) {
    e["gates"].push_back(GateResult{"build", false, ex.what()}.to_json());
    e["reason"] = "build failed";
    return nullptr;
  }
}

void keep(SessionState& s, json& e, std::unique_ptr<Arm> arm, const Verdict& v) {  // e["gates"]: build + v.gates
  std::string msg = "loom tune " + s.id + ": keep " + e["description"].get<std::string>() + "\n\n";
  for (const auto& g : e["gates"])
    msg += fmt::format("gate {}: {} - {}\n", g["gate"].get<std::string>(), g["passed"].get<bool>() ? "pass" : "FAIL",
                       g["detail"].get<std::string>());
  git(s.worktree, {"add", "-A"});
  git(s.worktree, {"-c", "user.name=loom tune", "-c", "user.email=loom-tune@localhost", "commit", "-q", "-m", msg});
  e["commit"] = git(s.worktree, {"rev-parse", "HEAD"});
  const std::string diff = fmt::format("diffs/{:03d}.diff", s.kept + 1);
  fs::create_directories(s.dir + "/evidence/diffs");
  write_text(s.dir + "/evidence/" + diff, git(s.worktree, {"diff", "HEAD~1", "HEAD"}) + "\n");
  e["diff"] = diff;
  e["diff_sha256"] = sha256_file(s.dir + "/evidence/" + diff);
  ++s.kept;
  s.current = std::move(arm);
  s.current_quality = v.quality;
  if (s.from_source()) {  // the kept candidate's build is the current engine now
    remove_checkout(s.manifest["workload"].get<std::string>(), s.current_build_dir);
    s.current_build_dir = std::exchange(s.candidate_build_dir, std::string());
    s.current_binary = std::exchange(s.candidate_binary, std::string());
  }
  // The gain is measured against the session baseline, paired, never projected.
  try {
    const auto [a, b] = s.timed_pairs(s.baseline_side(), s.current_side(), 1000 + s.kept,
                                      e["id"].get<std::string>() + "-vs-baseline");
    e["measurements"]["vs_baseline"] = ratio_json(a, b);
  } catch (const std::exception& ex) {  // an arm died: the keep stands, its gain is unmeasured (null)
    s.say(fmt::format("{}: the timing against the baseline failed: {}", e["id"].get<std::string>(), ex.what()));
  }
}

void judge_entry(SessionState& s, const Candidate& cand, json e) {
  int before = 0;
  auto arm = build(s, cand, e, before);
  if (!arm) {
    revert(s);
    return record(s, std::move(e));
  }
  const bool at_baseline = s.kept == 0;
  GateInputs in = s.gate_inputs(s.entries().size() + 1);
  if (s.c.script_timing)
    in.script_timing = [&s, &arm, id = e["id"].get<std::string>()] {
      return s.timed_pairs(s.current_side(), {*arm, s.program_in(s.worktree), s.candidate_binary}, 0, id);
    };
  const Verdict v = judge(*s.baseline, *s.current, *arm, s.c, in, before);
  for (const auto& g : v.gates) e["gates"].push_back(g.to_json());
  e["unscored"] = v.unscored;
  if (!v.a_tps.empty()) e["measurements"]["timing"] = ratio_json(v.a_tps, v.b_tps);
  e["decision"] = v.keep ? "keep" : "revert";
  if (!v.keep)
    for (const auto& g : v.gates)
      if (!g.passed) {
        e["reason"] = g.name + " gate failed: " + g.detail;
        break;
      }
  if (v.keep) {
    e["reason"] = "every gate passed";
    keep(s, e, std::move(arm), v);
  } else {
    arm.reset();  // its child process (a source build) ends before its checkout goes
    revert(s);
  }
  const json& vb = v.keep ? e["measurements"]["vs_baseline"] : (at_baseline ? e["measurements"]["timing"] : json());
  if (vb.is_object()) {
    e["gain_pct"] = (vb["ratio_median"].get<double>() - 1) * 100;
    e["ci95"] = vb["ci95"];
  }
  record(s, std::move(e));
}

// Successive halving over the search's points: every point screened with a few pairs, the
// better half (those that showed a gain) through every gate.
void run_search(SessionState& s, int budget) {
  auto producer = make_schedule_search(budget);
  struct Screened {
    double median;
    Candidate cand;
    json gates;  // what the screening build passed (build, and the script gate where declared)
  };
  std::vector<Screened> finalists;
  for (auto& cand : producer->propose(s.c, s.worktree)) {
    if (decided(s, cand)) continue;
    json e = new_entry(s, cand);
    int before = 0;
    auto arm = build(s, cand, e, before);
    if (!arm) {
      revert(s);
      record(s, std::move(e));
      continue;
    }
    PairedTiming t;
    try {
      t = time_pair(*s.current, *arm, s.c, s.gate_inputs(5000 + s.entries().size()), s.c.screen_pairs, before);
    } catch (const std::exception& ex) {
      e["gates"].push_back(GateResult{"screen", false, std::string("the screening runs failed: ") + ex.what()}.to_json());
      e["reason"] = "screening failed";
      arm.reset();
      revert(s);
      record(s, std::move(e));
      continue;
    }
    const double median = bench::paired_ratio(t.a_tps, t.b_tps).median;
    arm.reset();
    revert(s);
    s.say(fmt::format("screened {}: speed ratio median {:.4f} over {} pairs", cand.description, median, s.c.screen_pairs));
    s.manifest["screen"][cand.description] = ratio_json(t.a_tps, t.b_tps);
    finalists.push_back({median, std::move(cand), e["gates"]});
  }
  const bool screened_at_baseline = s.kept == 0;  // the screens' A arm was the baseline
  std::stable_sort(finalists.begin(), finalists.end(), [](const auto& x, const auto& y) { return x.median > y.median; });
  const size_t half = (finalists.size() + 1) / 2;
  for (size_t i = 0; i < finalists.size(); ++i) {
    auto& [median, cand, gates] = finalists[i];
    json e = new_entry(s, cand);
    e["measurements"]["screen"] = s.manifest["screen"][cand.description];
    if (i < half && median > 1) {
      judge_entry(s, cand, std::move(e));
      continue;
    }
    e["gates"] = gates;
    e["gates"].push_back(GateResult{"screen", false,
                                    median > 1 ? "not in the better half of the screened points"
                                               : fmt::format("no gain shown in screening (median ratio {:.4f})", median)}
                             .to_json());
    e["reason"] = "successive halving: dropped after screening";
    if (screened_at_baseline) {
      e["gain_pct"] = (median - 1) * 100;
      e["ci95"] = e["measurements"]["screen"]["ci95"];
    }
    record(s, std::move(e));
  }
}

// The baseline's engine built from the base commit's source, once, in a fresh checkout; the
// command, its exit status and the binary's SHA-256 go into the pin ledger.
void open_source_baseline(SessionState& s) {
  const auto b = s.build_tree(s.base_commit, "baseline");
  if (!b.ok) loom::fail("the baseline's source does not build: {}", b.detail);
  s.baseline_binary = b.binary;
  s.baseline_build_dir = b.dir;
  auto& pins = s.manifest["pins"];
  if (pins.contains("source_build") && pins["source_build"]["baseline"]["binary_sha256"] != b.binary_sha256)
    s.say("the baseline binary's sha256 differs from the one pinned at the start (the build is not bit-reproducible;"
          " the baseline's reference outputs decide whether the session goes on)");
  if (!pins.contains("source_build"))
    pins["source_build"] = {{"command", s.c.build_command}, {"binary", s.c.build_binary}, {"baseline", b.to_json()}};
  s.say("baseline built from source: " + b.detail);
}

void drive(SessionState& s) {
  s.timing_tokens = tokenize_for(s.spec(s.baseline_program()), s.c.timing_prompts, 1);
  s.selection_tokens = s.c.selection.empty() ? std::vector<std::vector<int32_t>>{}
                                             : tokenize_for(s.spec(s.baseline_program()), s.c.selection, 2);
  if (s.from_source()) open_source_baseline(s);
  s.baseline = s.open(s.baseline_program(), s.baseline_binary, "baseline");
  // The threads gate holds every candidate to the contract's count: a contract the baseline
  // itself does not meet (CUDA runs one host thread) would fail every candidate; say so now.
  if (s.baseline->threads() != s.c.threads)
    loom::fail("contract threads = {}, but the baseline runs {} thread(s) on backend {}: set \"threads\": {} in {}",
               s.c.threads, s.baseline->threads(), s.c.backend, s.baseline->threads(), kContractFile);
  if (!s.selection_tokens.empty()) s.baseline_quality = score_quality(*s.baseline, s.selection_tokens);
  const auto ref = reference_outputs(*s.baseline, s);
  const std::string ref_sha = digest_of(ref);
  if (s.manifest["baseline"].contains("reference_outputs_sha256") &&
      s.manifest["baseline"]["reference_outputs_sha256"] != ref_sha)
    loom::fail("resume: the baseline's outputs differ from those the session recorded (machine or build changed)");
  auto& b = s.manifest["baseline"];
  b["reference_outputs_sha256"] = ref_sha;
  b["reference_outputs"] = {{"values", ref.size()}, {"prompts", s.timing_tokens.size() + s.selection_tokens.size()}};
  b["selection_quality"] = s.baseline_quality ? json{{"mean_loglik", s.baseline_quality->mean_loglik},
                                                      {"tokens", s.baseline_quality->tokens}}
                                              : json(nullptr);
  if (!b.contains("self_timing")) {  // A against itself: the noise a difference must exceed
    const auto [ta, tb] = s.timed_pairs(s.baseline_side(), s.baseline_side(), 0, "self");
    b["self_timing"] = ratio_json(ta, tb);
    b["self_timing"]["source"] = s.c.script_timing ? "script" : "engine";
    b["tps_median"] = bench::quantile(ta, 0.5);
  }
  if (!s.c.script_command.empty() && !b.contains("script")) {
    fs::create_directories(s.dir + "/script");
    const auto g = run_script_gate(s.c, s.c.dir, s.baseline_program(), s.dir + "/script/baseline.json",
                                   s.dir + "/evidence/logs/script.log", s.baseline_binary);
    b["script"] = g.to_json();
    if (!g.passed) loom::fail("the baseline fails the workload script's gate: {}", g.detail);
  }
  s.save_manifest();
  // The current program is the worktree's HEAD (the baseline, or the last kept change).
  s.current_binary = s.baseline_binary;
  if (const std::string head = git(s.worktree, {"rev-parse", "HEAD"}); s.from_source() && head != s.base_commit) {
    const auto b = s.build_tree(head, "current");  // a resumed session's kept changes, built again
    if (!b.ok) loom::fail("the session's current commit does not build: {}", b.detail);
    s.current_build_dir = b.dir;
    s.current_binary = b.binary;
  }
  s.current = s.open(s.program_in(s.worktree), s.current_binary, "current");
  s.current_quality = s.selection_tokens.empty() ? std::nullopt : std::optional(score_quality(*s.current, s.selection_tokens));
  for (const auto& e : s.entries()) s.kept += e["decision"] == "keep";
  const int budget = s.manifest["options"]["budget"].get<int>();
  if (s.manifest["options"]["search"].get<bool>() && budget > 0) run_search(s, budget);
  const std::string agent = s.manifest["options"]["agent"].get<std::string>();
  if (!agent.empty()) {
    auto producer = make_agent(agent, s.dir + "/evidence/logs/agent.log");
    for (auto& cand : producer->propose(s.c, s.worktree))
      if (!decided(s, cand)) judge_entry(s, cand, new_entry(s, cand));
  }
  s.manifest["state"] = "closing";
  s.save_manifest();
  const bool ok = close_session(s);
  // The arms' child processes end before their checkouts go.
  s.current.reset();
  s.baseline.reset();
  for (const auto* d : {&s.current_build_dir, &s.baseline_build_dir})
    remove_checkout(s.manifest["workload"].get<std::string>(), *d);
  s.manifest["state"] = "closed";
  s.manifest["close_gates_passed"] = ok;
  s.save_manifest();
}

std::string make_id() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  std::random_device rd;
  return fmt::format("{:x}-{:04x}", std::chrono::duration_cast<std::chrono::seconds>(now).count(), rd() & 0xffff);
}

void open_log(SessionState& s) {
  fs::create_directories(s.dir + "/evidence/logs");
  s.log.open(s.dir + "/evidence/logs/session.log", std::ios::app);
}

}  // namespace

std::string run_session(const SessionOptions& o) {
  SessionState s;
  s.opts = o;
  const std::string workload = fs::canonical(o.workload).string();
  s.c = load_contract(workload);
  const std::string top = git(workload, {"rev-parse", "--show-toplevel"});
  if (fs::canonical(top) != fs::path(workload)) loom::fail("{}: the workload must be the top of a git repository", workload);
  if (!git(workload, {"status", "--porcelain", "--untracked-files=no"}).empty())
    loom::fail("{}: the checkout has uncommitted changes; commit them so the session starts from a commit", workload);
  if (!fs::exists(s.c.path_of(s.c.program))) loom::fail("{}: the contract's program {} does not exist", workload, s.c.program);
  const std::string gguf_sha = sha256_file(s.c.path_of(s.c.gguf));
  if (gguf_sha != s.c.gguf_sha256)
    loom::fail("{}: sha256 {} but the contract pins {}", s.c.path_of(s.c.gguf), gguf_sha, s.c.gguf_sha256);
  s.id = make_id();
  s.dir = o.session_dir.empty() ? workload + ".tune/" + s.id : fs::absolute(o.session_dir).string();
  if (fs::exists(s.dir) && !fs::is_empty(s.dir)) loom::fail("{}: the session directory exists and is not empty", s.dir);
  fs::create_directories(s.dir + "/baseline");
  open_log(s);
  s.base_commit = git(workload, {"rev-parse", "HEAD"});
  s.branch = "loom-tune/" + s.id;
  s.worktree = s.dir + "/worktree";
  git(workload, {"worktree", "add", "-q", "-b", s.branch, s.worktree, s.base_commit});
  fs::copy_file(s.program_in(s.worktree), s.baseline_program());
  s.manifest = {{"schema_version", "loom.tune_manifest.v1"},
                {"session", s.id},
                {"workload", workload},
                {"base_commit", s.base_commit},
                {"branch", s.branch},
                {"worktree", s.worktree},
                {"state", "running"},
                {"options", {{"agent", o.agent}, {"search", o.search}, {"budget", o.budget.value_or(s.c.budget_candidates)}}},
                {"pins", pin_ledger(s.c, o.build, s.baseline_program(), s.base_commit, s.c.threads)},
                {"baseline", json::object()},
                {"entries", json::array()},
                {"screen", json::object()}};
  s.save_manifest();
  s.say(fmt::format("session {} on {} at {} (worktree {})", s.id, workload, s.base_commit.substr(0, 12), s.worktree));
  try {
    drive(s);
  } catch (const loom::Error& e) {
    loom::fail("{}\n(the session stopped; its decisions so far are in {}/manifest.json: `loom tune resume {}` continues)",
               e.what(), s.dir, s.dir);
  }
  return s.dir;
}

std::string resume_session(const std::string& session_dir, const BuildIdentity& build) {
  SessionState s;
  s.dir = fs::absolute(session_dir).string();
  try {
    s.manifest = json::parse(read_text(s.dir + "/manifest.json"));
  } catch (const json::exception& e) {
    loom::fail("{}/manifest.json: not a session manifest ({})", s.dir, e.what());
  }
  if (s.manifest.value("state", "") == "closed") loom::fail("{}: the session is closed; nothing to resume", s.dir);
  s.id = s.manifest["session"];
  s.worktree = s.manifest["worktree"];
  s.branch = s.manifest["branch"];
  s.base_commit = s.manifest["base_commit"];
  s.c = load_contract(s.manifest["workload"].get<std::string>());
  s.opts.build = build;
  if (s.manifest["pins"]["loom"]["git_revision"] != build.commit)
    loom::fail("{}: started by loom {} but this is loom {}; resume with the same build", s.dir,
               s.manifest["pins"]["loom"]["git_revision"].get<std::string>(), build.commit);
  open_log(s);
  s.say("resuming session " + s.id + fmt::format(" ({} candidates decided)", s.entries().size()));
  revert(s);  // whatever an interrupted candidate left is not a decision
  if (fs::is_directory(s.dir + "/builds"))  // nor the checkouts its builds were in
    for (const auto& d : fs::directory_iterator(s.dir + "/builds"))
      if (d.is_directory()) remove_checkout(s.manifest["workload"].get<std::string>(), d.path().string());
  s.manifest["state"] = "running";
  drive(s);
  return s.dir;
}

std::string accept_session(const std::string& session_dir) {
  const std::string dir = fs::absolute(session_dir).string();
  json m;
  try {
    m = json::parse(read_text(dir + "/manifest.json"));
  } catch (const json::exception& e) {
    loom::fail("{}/manifest.json: not a session manifest ({})", dir, e.what());
  }
  if (m.value("state", "") != "closed") loom::fail("{}: the session has not closed", dir);
  if (!m.value("close_gates_passed", false)) loom::fail("{}: a close gate failed; nothing is accepted", dir);
  const auto problems = verify_bundle(dir + "/evidence");
  if (!problems.empty()) loom::fail("{}: the evidence bundle does not verify: {}", dir, problems.front());
  const std::string workload = m["workload"], branch = m["branch"];
  if (git(workload, {"rev-parse", "HEAD"}) != m["base_commit"].get<std::string>())
    loom::fail("{}: HEAD moved since the session started from {}", workload, m["base_commit"].get<std::string>());
  if (!git(workload, {"status", "--porcelain", "--untracked-files=no"}).empty())
    loom::fail("{}: the checkout has uncommitted changes", workload);
  if (git(workload, {"rev-parse", branch}) == m["base_commit"].get<std::string>())
    return "nothing kept: the checkout stays at the baseline";
  git(workload, {"merge", "-q", "--ff-only", branch});
  return "fast-forwarded " + workload + " to " + git(workload, {"rev-parse", "HEAD"});
}

}  // namespace loom::tune
