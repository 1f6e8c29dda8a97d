#include "tune/evidence.h"

#include <filesystem>

#include "common/error.h"
#include "tune/digest.h"

namespace loom::tune {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<std::string> bundle_files(const std::string& bundle) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(bundle))
    if (e.is_regular_file()) {
      const auto rel = fs::relative(e.path(), bundle).generic_string();
      if (rel != "digests.json") out.push_back(rel);
    }
  std::sort(out.begin(), out.end());
  return out;
}

json load_json(const std::string& path, std::vector<std::string>& problems) {
  try {
    return json::parse(read_text(path));
  } catch (const std::exception& e) {
    problems.push_back(fmt::format("{}: unreadable ({})", path, e.what()));
    return nullptr;
  }
}

}  // namespace

void seal_bundle(const std::string& bundle) {
  json files = json::object();
  for (const auto& rel : bundle_files(bundle)) files[rel] = sha256_file(bundle + "/" + rel);
  write_text(bundle + "/digests.json", json{{"algorithm", "sha256"}, {"files", files}}.dump(2) + "\n");
}

std::vector<std::string> verify_bundle(const std::string& bundle) {
  std::vector<std::string> p;
  if (!fs::is_directory(bundle)) return {bundle + ": not a directory"};
  const json d = load_json(bundle + "/digests.json", p);
  if (!d.is_object() || !d.contains("files")) return {bundle + "/digests.json: missing or without files"};
  for (const auto& rel : bundle_files(bundle))
    if (!d["files"].contains(rel)) p.push_back(rel + ": in the bundle but not in digests.json");
  for (const auto& [rel, sha] : d["files"].items()) {
    const std::string path = bundle + "/" + rel;
    if (!fs::exists(path)) p.push_back(rel + ": listed in digests.json but missing");
    else if (sha256_file(path) != sha.get<std::string>()) p.push_back(rel + ": digest differs from digests.json");
  }
  const json b = load_json(bundle + "/session_breakdown.json", p);
  if (!b.is_object()) return p;
  const std::string version = b.value("schema_version", "");
  if (version.rfind("loom.session_breakdown.v1", 0) != 0) p.push_back("session_breakdown.json: schema_version '" + version + "' is not major v1");
  for (const char* k : {"session", "workload", "baseline", "final", "optimizations", "validation"})
    if (!b.contains(k)) p.push_back(std::string("session_breakdown.json: no '") + k + "'");
  if (!p.empty()) return p;
  int unscored = 0;
  for (const auto& e : b["optimizations"]["entries"]) {
    const std::string id = e.value("id", "?"), decision = e.value("decision", "");
    bool all = !e["gates"].empty();
    for (const auto& g : e["gates"]) all = all && g.value("passed", false);
    if (decision == "keep" && !all) p.push_back(id + ": kept with a gate that did not pass");
    if (decision == "keep" && e.value("unscored", false)) ++unscored;
    if (decision == "keep") {
      const std::string diff = e.value("diff", "");
      if (diff.empty() || !fs::exists(bundle + "/" + diff)) p.push_back(id + ": kept without its diff in the bundle");
      else if (sha256_file(bundle + "/" + diff) != e.value("diff_sha256", "")) p.push_back(id + ": diff digest differs");
    }
  }
  if (b["validation"].value("unscored_keep_count", -1) != unscored)
    p.push_back(fmt::format("validation.unscored_keep_count is {} but {} kept entries are unscored",
                            b["validation"].value("unscored_keep_count", -1), unscored));
  const json prov = load_json(bundle + "/provenance.json", p);
  if (prov.is_object()) {
    const auto& subj = prov["subject"];
    const json final_sha = b["final"].value("program_sha256", json(nullptr));
    if (subj.empty() || !final_sha.is_string() || subj[0]["digest"].value("sha256", "") != final_sha.get<std::string>())
      p.push_back("provenance.json: subject digest is not the final program's");
  }
  const json ledger = load_json(bundle + "/acceptance_ledger.json", p);
  if (ledger.is_object() && b["validation"].contains("close_gates_passed")) {
    bool all = true;
    for (const auto& g : ledger["close"]) all = all && g.value("passed", false);
    if (all != b["validation"]["close_gates_passed"].get<bool>())
      p.push_back("acceptance_ledger.json: close gates disagree with validation.close_gates_passed");
  }
  return p;
}

json provenance_statement(const std::string& program_name, const std::string& program_sha256, const json& pins,
                          const json& invocation) {
  return {
      {"_type", "https://in-toto.io/Statement/v1"},
      {"subject", {{{"name", program_name}, {"digest", {{"sha256", program_sha256}}}}}},
      {"predicateType", "https://slsa.dev/provenance/v1"},
      {"predicate",
       {{"buildDefinition",
         {{"buildType", "https://loom.dev/tune/session/v1"},
          {"externalParameters", invocation},
          {"resolvedDependencies",
           {{{"uri", pins["model"]["gguf"]}, {"digest", {{"sha256", pins["model"]["sha256"]}}}},
            {{"uri", "git+" + pins["workload"]["dir"].get<std::string>()},
             {"digest", {{"gitCommit", pins["workload"]["git_commit"]}}}},
            {{"uri", "loom"}, {"digest", {{"gitCommit", pins["loom"]["git_revision"]}}},
             {"annotations", {{"version", pins["loom"]["version"]}}}}}}}},
        {"runDetails",
         {{"builder", {{"id", "loom tune " + pins["loom"]["version"].get<std::string>()}}},
          {"metadata", {{"invocationId", invocation.value("session", "")}}}}}}},
  };
}

}  // namespace loom::tune
