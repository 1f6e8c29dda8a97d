// The built-in producer: points of the schedule space the backend declares.
#include <algorithm>
#include <set>

#include "backend/registry.h"
#include "common/error.h"
#include "ir/text.h"
#include "ir/verify.h"
#include "tune/candidate.h"
#include "tune/digest.h"

namespace loom::tune {

namespace {

using nlohmann::json;

json value_json(const ir::AttrValue& v) {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  if (auto* d = std::get_if<double>(&v)) return *d;
  return nullptr;
}

// The value the program holds now for a key set without a selector (the last entry wins).
ir::AttrValue current_value(const ir::Module& m, const backend::ScheduleKey& k) {
  ir::AttrValue v = k.default_value;
  for (const auto& e : m.schedule)
    if (e.opcode == k.opcode && e.selector.empty())
      for (const auto& s : e.settings)
        if (s.name == k.name) v = s.value;
  return v;
}

std::vector<ir::AttrValue> alternatives(const backend::ScheduleKey& k, const ir::AttrValue& now) {
  std::vector<ir::AttrValue> out;
  using T = backend::ScheduleKey::Type;
  if (k.type == T::boolean) out.push_back(!std::get<bool>(now));
  if (k.type == T::choice)
    for (const auto& c : k.choices) out.push_back(c);
  if (k.type == T::integer) {
    const int64_t x = std::get<int64_t>(now);
    std::set<int64_t> vals{k.lo, x / 2, x * 2, std::min<int64_t>(k.hi, std::max<int64_t>(x, 1) * 4)};
    for (int64_t v : vals)
      if (v >= k.lo && v <= k.hi) out.push_back(v);
  }
  std::erase_if(out, [&](const ir::AttrValue& v) { return v == now; });
  return out;
}

class ScheduleSearch final : public CandidateProducer {
 public:
  explicit ScheduleSearch(int budget) : budget_(budget) {}
  std::string name() const override { return "search"; }

  std::vector<Candidate> propose(const Contract& c, const std::string& worktree) override {
    const std::string path = worktree + "/" + c.program;
    const ir::Module m = ir::parse(read_text(path), path);
    const auto be = backend::make_backend(c.backend);
    std::vector<Candidate> out;
    for (const auto& k : be->schedule_keys()) {
      if (k.type == backend::ScheduleKey::Type::text || k.name == "threads" || k.name == "profile") continue;
      for (const auto& v : alternatives(k, current_value(m, k))) {
        if (int(out.size()) >= budget_) return out;
        Candidate cand;
        cand.producer = "search";
        const std::string setting = k.name + " = " + ir::print_attr_value(v);
        cand.description = k.opcode.empty() ? setting : k.opcode + " = {" + setting + "}";
        cand.point = {{"opcode", k.opcode.empty() ? json(nullptr) : json(k.opcode)}, {"key", k.name}, {"value", value_json(v)}};
        cand.apply = [program = c.program, k, v](const std::string& wt) {
          const std::string p = wt + "/" + program;
          ir::Module mod = ir::parse(read_text(p), p);
          // One entry per key without a selector: replace it, so kept points do not pile up.
          for (auto& e : mod.schedule)
            if (e.opcode == k.opcode && e.selector.empty())
              std::erase_if(e.settings, [&](const ir::Attr& s) { return s.name == k.name; });
          std::erase_if(mod.schedule, [](const ir::ScheduleEntry& e) { return e.settings.empty(); });
          mod.schedule.push_back({k.opcode, "", {{k.name, v}}, {}});
          ir::verify(mod);
          write_text(p, ir::print(mod));
        };
        out.push_back(std::move(cand));
      }
    }
    return out;
  }

 private:
  int budget_;
};

}  // namespace

std::unique_ptr<CandidateProducer> make_schedule_search(int budget) { return std::make_unique<ScheduleSearch>(budget); }

}  // namespace loom::tune
