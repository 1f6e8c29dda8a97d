// Reading a schedule against a backend's declared keys (backend/schedule.h), and the reference
// backend's own keys: each changes the compiled plan and leaves the logits as they were (the
// reference's contract is bit-identity with llama.cpp, so these may not move a bit).
#include <gtest/gtest.h>

#include <filesystem>

#include <unistd.h>

#include "backend/cpu/reference.h"
#include "backend/registry.h"
#include "common/error.h"
#include "ir/text.h"
#include "kv_fixture.h"
#include "tiny_model.h"

using namespace loom;
using Key = backend::ScheduleKey;

namespace {

const std::vector<Key> kKeys = {
    {"", "threads", Key::Type::integer, 0, 8, {}, int64_t(0), "threads"},
    {"", "mode", Key::Type::choice, 0, 0, {"a", "b"}, std::string("a"), "a mode"},
    {"matmul", "layout", Key::Type::choice, 0, 0, {"packed", "rows"}, std::string("packed"), "layout"},
};

ir::Module with_schedule(const std::string& schedule) {
  return ir::parse("module @m\n" + schedule + "\n", "s.loom");
}

std::string error_of(const std::string& schedule) {
  try {
    backend::check_schedule(with_schedule(schedule), kKeys, "test");
  } catch (const loom::Error& e) {
    return e.what();
  }
  return {};
}

std::vector<float> logits(backend::Plan& p) {
  loom::testing::TestKv kv(p, backend::KvElem::f16, 64, 1, 16);
  std::vector<float> out(size_t(7 * p.vocab_size()));
  kv.run(p, backend::StepBatch::sequence({1, 5, 9, 2, 30, 7, 3}, 0, true), out.data());
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST(Schedule, ChecksKeysTypesAndRangesWithLocation) {
  EXPECT_EQ(error_of("schedule { threads = 2, matmul(@blk*) = {layout = \"rows\"} }"), "");
  EXPECT_NE(error_of("schedule {\n  thread = 2 }").find("s.loom:3:3: schedule: backend test has no key 'thread'"),
            std::string::npos);
  EXPECT_NE(error_of("schedule { threads = 9 }").find("s.loom:2:12: schedule: threads must be an integer in [0, 8], found 9"),
            std::string::npos);
  EXPECT_NE(error_of("schedule { threads = true }").find("found true"), std::string::npos);
  EXPECT_NE(error_of("schedule { mode = \"c\" }").find("mode must be one of \"a\", \"b\", found \"c\""), std::string::npos);
  EXPECT_NE(error_of("schedule { matmul = {layout = \"rows\", tile = 4} }").find("s.loom:2:39: schedule: backend test "
                                                                                  "has no key 'matmul setting tile'"),
            std::string::npos);
  EXPECT_NE(error_of("schedule { layout = \"rows\" }").find("has no key 'layout'"), std::string::npos);  // per-op only
}

TEST(Schedule, ReaderDefaultsAndLastMatchWins) {
  const ir::Module m = with_schedule(
      "schedule { matmul = {layout = \"rows\"}, matmul(@blk1.*) = {layout = \"packed\"}, mode = \"b\" }");
  const backend::ScheduleReader r(m, kKeys);
  EXPECT_EQ(r.integer("threads"), 0);
  EXPECT_EQ(r.text("mode"), "b");
  EXPECT_EQ(std::get<std::string>(r.for_op("matmul", "layout", "blk0.wq")), "rows");
  EXPECT_EQ(std::get<std::string>(r.for_op("matmul", "layout", "blk1.wq")), "packed");
}

TEST(Schedule, EveryBackendDeclaresItsKeys) {
  for (const auto& name : backend::backend_names()) {
    const auto be = backend::make_backend(name);
    ASSERT_FALSE(be->schedule_keys().empty()) << name;
    for (const auto& k : be->schedule_keys()) EXPECT_FALSE(k.effect.empty()) << name << " " << k.name;
  }
}

TEST(ReferenceScheduleKeys, ThreadsAndDumpDir) {
  auto tm = loom::testing::make_tiny_model();
  auto ws = backend::WeightSource::bind(tm.module, *tm.file);
  auto ref = backend::cpu::make_reference_backend();
  auto base = ref->compile(tm.module, ws, {2});
  const auto want = logits(*base);

  ir::Module one = tm.module;
  one.schedule.push_back({"", "", {{"threads", int64_t(1)}}, {}});
  auto p1 = ref->compile(one, ws, {0});
  EXPECT_NE(joined(p1->explain()).find("threads 1,"), std::string::npos) << joined(p1->explain());
  EXPECT_NE(joined(base->explain()).find("threads 2,"), std::string::npos);
  EXPECT_EQ(logits(*p1), want);

  const auto dir = std::filesystem::temp_directory_path() / ("loom_ref_dump_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ir::Module dumped = tm.module;
  dumped.schedule.push_back({"", "", {{"dump_dir", dir.string()}}, {}});
  auto pd = ref->compile(dumped, ws, {2});
  EXPECT_NE(joined(pd->explain()).find("dump_dir " + dir.string()), std::string::npos);
  EXPECT_EQ(logits(*pd), want);
  EXPECT_TRUE(std::filesystem::exists(dir / "logits.f32"));
  EXPECT_EQ(std::filesystem::file_size(dir / "logits.f32"), size_t(7 * base->vocab_size()) * sizeof(float));
  std::filesystem::remove_all(dir);

  ir::Module unknown = tm.module;
  unknown.schedule.push_back({"", "", {{"huge_pages", false}}, {}});  // a fast-backend key
  EXPECT_THROW(ref->compile(unknown, ws, {2}), loom::Error);
}
