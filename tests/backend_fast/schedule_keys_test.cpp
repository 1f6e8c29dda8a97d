// Every schedule key of the fast CPU backend: setting it changes the compiled plan (seen in
// Plan::explain, which `loom check --explain` prints) and keeps the logits within the fast
// backend's contract against the reference (the quantized-weight bounds of
// fast_vs_reference_test.cpp: max |Δlogit| / std ≤ 10%, argmax agreement ≥ 90%). Keys that
// only change where bytes live (huge pages, grouping, threads, diagnosis) must leave the
// logits bit for bit as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>

#include <unistd.h>

#include "backend/cpu/fast/fast_backend.h"
#include "backend/cpu/reference.h"
#include "common/error.h"
#include "ir/text.h"
#include "../backend/kv_fixture.h"
#include "synthetic_program.h"

using namespace loom;

namespace {

constexpr double kMaxRel = 0.10, kMinArgmax = 0.90;

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// Logits of a 9-token prefill (every row) and 4 decode steps.
std::vector<float> logits(backend::Plan& p, int vocab) {
  loom::testing::TestKv kv(p, backend::KvElem::f16, 64, 1, 16);
  std::vector<int32_t> toks(13);
  for (int i = 0; i < 13; ++i) toks[i] = int32_t((i * 37 + 5) % vocab);
  const int64_t V = p.vocab_size();
  std::vector<float> out(size_t(13 * V));
  kv.run(p, backend::StepBatch::sequence({toks.begin(), toks.begin() + 9}, 0, true), out.data());
  for (int i = 9; i < 13; ++i) kv.run(p, backend::StepBatch::sequence({toks[i]}, i), out.data() + size_t(i) * V);
  return out;
}

void expect_within_contract(const std::vector<float>& ref, const std::vector<float>& got, int64_t V, const std::string& what) {
  double worst = 0;
  int64_t rows = int64_t(ref.size()) / V, same = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = ref.data() + r * V;
    const float* y = got.data() + r * V;
    double mean = 0, var = 0, md = 0;
    for (int64_t i = 0; i < V; ++i) mean += x[i];
    mean /= double(V);
    for (int64_t i = 0; i < V; ++i) var += (x[i] - mean) * (x[i] - mean), md = std::max(md, double(std::fabs(x[i] - y[i])));
    worst = std::max(worst, md / std::sqrt(var / double(V)));
    same += std::max_element(x, x + V) - x == std::max_element(y, y + V) - y;
  }
  std::printf("[ figures  ] %-44s max|dlogit|/std %.5f  argmax agreement %.3f\n", what.c_str(), worst, double(same) / double(rows));
  EXPECT_LE(worst, kMaxRel) << what;
  EXPECT_GE(double(same) / double(rows), kMinArgmax) << what;
}

struct Fixture {
  loom::testing::SyntheticModel sm;
  std::vector<float> ref;
  std::vector<float> base;  // fast, default schedule
  std::string base_plan;
  explicit Fixture(gguf::TensorType wt = gguf::TensorType::Q4_K)
      : sm(loom::testing::make_synthetic([&] {
          loom::testing::SyntheticSpec s;
          s.wtype = wt;
          return s;
        }())) {
    auto ws = backend::WeightSource::bind(sm.module, *sm.file);
    ref = logits(*backend::cpu::make_reference_backend()->compile(sm.module, ws, {2}), sm.spec.V);
    auto fast = backend::cpu::make_fast_backend()->compile(sm.module, ws, {2});
    base = logits(*fast, sm.spec.V);
    base_plan = joined(fast->explain());
  }
  // Compiles with `entries` added to the schedule; returns the plan's explain text.
  std::string run_with(std::vector<ir::ScheduleEntry> entries, std::vector<float>* out = nullptr, int threads = 2) {
    ir::Module m = sm.module;
    for (auto& e : entries) m.schedule.push_back(std::move(e));
    auto ws = backend::WeightSource::bind(m, *sm.file);
    auto plan = backend::cpu::make_fast_backend()->compile(m, ws, {threads});
    if (out) *out = logits(*plan, sm.spec.V);
    return joined(plan->explain());
  }
};

ir::ScheduleEntry global(std::string key, ir::AttrValue v) { return {"", "", {{std::move(key), std::move(v)}}, {}}; }
ir::ScheduleEntry per_op(std::string opcode, std::string glob, std::string key, ir::AttrValue v) {
  return {std::move(opcode), std::move(glob), {{std::move(key), std::move(v)}}, {}};
}

}  // namespace

TEST(FastScheduleKeys, DefaultPlanIsWithinContract) {
  Fixture fx;
  std::printf("%s", fx.base_plan.c_str());
  expect_within_contract(fx.ref, fx.base, fx.sm.spec.V, "default schedule");
}

TEST(FastScheduleKeys, Threads) {
  Fixture fx;
  std::vector<float> got;
  // The command line's thread count (CompileOptions) wins over the schedule; 0 defers to it.
  const std::string plan = fx.run_with({global("threads", int64_t(1))}, &got, 0);
  EXPECT_NE(plan.find("threads 1,"), std::string::npos) << plan;
  EXPECT_NE(fx.base_plan.find("threads 2,"), std::string::npos) << fx.base_plan;
  expect_within_contract(fx.ref, got, fx.sm.spec.V, "threads = 1");
}

TEST(FastScheduleKeys, IsaCap) {
  Fixture fx;
  std::vector<float> got;
  const std::string plan = fx.run_with({global("isa", std::string("scalar"))}, &got);
  EXPECT_NE(plan.find("isa scalar (cap scalar)"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("packed x8"), std::string::npos) << plan;  // the x8 kernels need avx2 or avx512
  EXPECT_NE(plan, fx.base_plan);
  expect_within_contract(fx.ref, got, fx.sm.spec.V, "isa = scalar");
}

TEST(FastScheduleKeys, HugePages) {
  Fixture fx;
  std::vector<float> got;
  const std::string plan = fx.run_with({global("huge_pages", false)}, &got);
  EXPECT_NE(plan.find("huge_pages false"), std::string::npos) << plan;
  EXPECT_NE(fx.base_plan.find("huge_pages true"), std::string::npos) << fx.base_plan;
  EXPECT_EQ(got, fx.base);  // where the bytes live, not what they are
}

TEST(FastScheduleKeys, MatmulGrouping) {
  Fixture fx;
  EXPECT_NE(fx.base_plan.find("grouped with"), std::string::npos) << fx.base_plan;  // q/k/v, gate/up
  std::vector<float> got;
  const std::string off = fx.run_with({global("matmul_group_lookback", int64_t(0))}, &got);
  EXPECT_EQ(off.find("grouped with"), std::string::npos) << off;
  expect_within_contract(fx.ref, got, fx.sm.spec.V, "matmul_group_lookback = 0");
  EXPECT_EQ(got, fx.base);  // each matmul converts its activation the same way alone
  const std::string pairs = fx.run_with({global("matmul_group_parts", int64_t(2))}, &got);
  // q/k/v become a pair and a single: more steps than the default plan.
  auto steps = [](const std::string& p) {
    std::smatch mt;
    return std::regex_search(p, mt, std::regex("(\\d+) steps from")) ? std::stoi(mt[1]) : -1;
  };
  EXPECT_GT(steps(pairs), steps(fx.base_plan)) << pairs;
  EXPECT_EQ(got, fx.base);
}

TEST(FastScheduleKeys, MatmulStreamRows) {
  Fixture fx;
  EXPECT_NE(fx.base_plan.find("weight-streaming tiles up to 64 rows"), std::string::npos) << fx.base_plan;
  // 1: the fixture's 9-row prefill takes the prefill tiles; 4096: every step streams. Only the
  // cut of the work changes, never a row's arithmetic, so the logits keep their bits.
  for (int64_t rows : {int64_t(1), int64_t(4096)}) {
    std::vector<float> got;
    const std::string plan = fx.run_with({global("matmul_stream_rows", rows)}, &got);
    EXPECT_NE(plan.find(fmt::format("weight-streaming tiles up to {} rows", rows)), std::string::npos) << plan;
    EXPECT_NE(plan, fx.base_plan);
    expect_within_contract(fx.ref, got, fx.sm.spec.V, fmt::format("matmul_stream_rows = {}", rows));
    EXPECT_EQ(got, fx.base);
  }
}

TEST(FastScheduleKeys, MatmulLayoutPerGlob) {
  Fixture fx;
  std::vector<float> got;
  const std::string plan = fx.run_with({per_op("matmul", "b0.*", "layout", std::string("rows"))}, &got);
  // Layer 0's matmuls keep their stored rows; where the host has the x8 kernels the others
  // stay packed, elsewhere every matmul reads rows, and the plan says why.
  std::istringstream lines(plan);
  int blk0 = 0;
  for (std::string l; std::getline(lines, l);)
    if (l.find("x @b0.") != std::string::npos) {
      ++blk0;
      EXPECT_NE(l.find("layout rows,"), std::string::npos) << l;
    }
  EXPECT_GT(blk0, 0) << plan;
  EXPECT_NE(plan, fx.base_plan);
  expect_within_contract(fx.ref, got, fx.sm.spec.V, "matmul(@b0.*) = {layout = rows}");
}

TEST(FastScheduleKeys, PrefillRepack) {
  Fixture fx(gguf::TensorType::Q5_0);
  std::vector<float> rows, norepack;
  // Stored rows everywhere, so the Q5_0 -> Q8_0 prefill copy is what prefill reads.
  const std::string with = fx.run_with({per_op("matmul", "", "layout", std::string("rows"))}, &rows);
  EXPECT_NE(with.find("prefill repacked q8_0"), std::string::npos) << with;
  const std::string without = fx.run_with(
      {per_op("matmul", "", "layout", std::string("rows")), per_op("matmul", "", "prefill_repack", false)}, &norepack);
  EXPECT_EQ(without.find("repacked"), std::string::npos) << without;
  expect_within_contract(fx.ref, rows, fx.sm.spec.V, "q5_0 rows, prefill repacked");
  expect_within_contract(fx.ref, norepack, fx.sm.spec.V, "q5_0 rows, no prefill repack");
  // The integer block sums agree (Q5_0 values are int8s), but the Q8_0 and Q5_0 GEMMs add the
  // per-block products in different orders, so the floats need not: the contract bounds both.
}

TEST(FastScheduleKeys, AttentionChunk) {
  Fixture fx;
  EXPECT_NE(fx.base_plan.find("kv chunk 256 (default)"), std::string::npos) << fx.base_plan;
  std::vector<float> got;
  // 4 positions per chunk: the 13 positions of the fixture's rows span up to 4 chunks, whose
  // partial softmax sums and outputs are merged.
  const std::string plan = fx.run_with({per_op("attention", "", "chunk", int64_t(4))}, &got);
  EXPECT_NE(plan.find("kv chunk 4"), std::string::npos) << plan;
  expect_within_contract(fx.ref, got, fx.sm.spec.V, "attention = {chunk = 4}");
}

// Rows per attention block only changes how many heads share each key tile: every row's
// arithmetic is its own (batch invariance), so the logits stay bit for bit. 3 rows: the 9-row
// prefill splits into three blocks, none with the default's 16.
TEST(FastScheduleKeys, AttentionRows) {
  Fixture fx;
  EXPECT_NE(fx.base_plan.find("block rows 16 (default)"), std::string::npos) << fx.base_plan;
  std::vector<float> got;
  const std::string plan = fx.run_with({per_op("attention", "", "rows", int64_t(3))}, &got);
  EXPECT_NE(plan.find("block rows 3"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("block rows 3 (default)"), std::string::npos) << plan;
  expect_within_contract(fx.ref, got, fx.sm.spec.V, "attention = {rows = 3}");
  ASSERT_EQ(got.size(), fx.base.size());
  EXPECT_EQ(0, std::memcmp(got.data(), fx.base.data(), got.size() * sizeof(float)));
}

TEST(FastScheduleKeys, DumpDirAndProfile) {
  Fixture fx;
  const auto dir = std::filesystem::temp_directory_path() / ("loom_dump_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<float> got;
  const std::string plan = fx.run_with({global("dump_dir", dir.string()), global("profile", true)}, &got);
  EXPECT_NE(plan.find("dump_dir " + dir.string()), std::string::npos) << plan;
  EXPECT_NE(plan.find("profile true"), std::string::npos) << plan;
  EXPECT_FALSE(std::filesystem::is_empty(dir));
  EXPECT_EQ(got, fx.base);
  std::filesystem::remove_all(dir);
}

TEST(FastScheduleKeys, UnknownKeyAndOutOfRangeAreRejectedWithLocation) {
  Fixture fx;
  auto fails = [&](const std::string& schedule, const std::string& want) {
    // Locations come from the parser: print the program with the schedule and read it back.
    ir::Module m = fx.sm.module;
    const std::string text = ir::print(m) + schedule + "\n";
    const ir::Module parsed = ir::parse(text, "p.loom");
    auto ws = backend::WeightSource::bind(parsed, *fx.sm.file);
    try {
      backend::cpu::make_fast_backend()->compile(parsed, ws, {1});
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted " << schedule;
  };
  const std::string program = ir::print(fx.sm.module);
  const int line = int(std::count(program.begin(), program.end(), '\n')) + 1;
  fails("schedule { kernel = \"q4k_gemv_v2\" }", fmt::format("p.loom:{}:12: schedule: backend cpu has no key 'kernel'", line));
  fails("schedule { matmul(@blk*) = {split_k = 2} }", "has no key 'matmul setting split_k'");
  fails("schedule { threads = -1 }", fmt::format("p.loom:{}:12: schedule: threads must be an integer in [0, 1024], found -1", line));
  fails("schedule { attention = {chunk = 2000000} }", "attention setting chunk must be an integer in [0, 1048576]");
  fails("schedule { attention = {rows = 257} }", "attention setting rows must be an integer in [0, 256]");
  fails("schedule { matmul = {layout = \"tiled\"} }", "must be one of \"packed\", \"rows\", found \"tiled\"");
  fails("schedule { isa = \"avx1024\" }", "isa must be one of");
}
