// The schedule keys a backend honours, and reading a module's schedule against them.
//
// A backend declares every key it reads (Backend::schedule_keys): its name, type, allowed
// values, default and what it changes. `loom check --backend NAME` and the backend's compile
// both reject a schedule that sets a key the backend does not declare, or a value outside the
// key's type or range, naming the setting's file:line:col; so a tuner's candidate can never
// silently do nothing. A key is global (`threads = 2`) or per-op (`matmul(@blk*.w?) = {...}`,
// `attention = {chunk = 128}`); per-op settings apply to ops of that opcode whose weight operand
// matches the glob (every op of the opcode without a glob), the last matching entry winning.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/module.h"

namespace loom::backend {

struct ScheduleKey {
  enum class Type { integer, boolean, choice, text };
  std::string opcode;  // empty: a global key; else a per-op setting of ops of this opcode
  std::string name;
  Type type = Type::integer;
  int64_t lo = 0, hi = 0;            // integer: the inclusive range
  std::vector<std::string> choices;  // choice: the allowed strings, the first is the default
  ir::AttrValue default_value;
  std::string effect;                // what it changes, one line

  std::string describe() const;  // "matmul(@glob) = {layout = \"packed\"|\"rows\"} (default ...): effect"
};

// Throws loom::Error "file:line:col: schedule: ..." at the first setting `keys` does not
// declare or whose value is out of its type or range; `backend` names the backend in messages.
void check_schedule(const ir::Module& m, const std::vector<ScheduleKey>& keys, const std::string& backend);

// Typed reads of a checked schedule; a key that is not set reads as its default.
class ScheduleReader {
 public:
  ScheduleReader(const ir::Module& m, const std::vector<ScheduleKey>& keys) : m_(m), keys_(keys) {}
  int64_t integer(const std::string& key) const { return std::get<int64_t>(global(key)); }
  bool boolean(const std::string& key) const { return std::get<bool>(global(key)); }
  std::string text(const std::string& key) const { return std::get<std::string>(global(key)); }
  // A per-op setting for an op of `opcode` whose weight operand (if any) is `weight`.
  ir::AttrValue for_op(const std::string& opcode, const std::string& key, const std::string& weight) const;

 private:
  const ScheduleKey& find(const std::string& opcode, const std::string& key) const;
  ir::AttrValue global(const std::string& key) const;
  const ir::Module& m_;
  const std::vector<ScheduleKey>& keys_;
};

}  // namespace loom::backend
