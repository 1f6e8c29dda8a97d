// A scriptable workload's result gate fails closed: a failed command, no result, a result that
// is not JSON, lacks output_throughput or a quality_gate with a boolean passed, or marks its
// gate skipped; only a well-formed result whose gate passed passes.
#include <gtest/gtest.h>

#include "tune/script_result.h"

namespace loom::tune {
namespace {

TEST(ScriptResult, FailsClosed) {
  const std::string good = R"({"output_throughput": 123.5, "quality_gate": {"passed": true, "accuracy": 0.91}})";
  const auto ok = script_result_gate(0, good);
  EXPECT_TRUE(ok.passed) << ok.detail;
  EXPECT_EQ(ok.metrics["output_throughput"].get<double>(), 123.5);
  EXPECT_EQ(ok.metrics["quality_gate"]["accuracy"].get<double>(), 0.91);
  EXPECT_FALSE(script_result_gate(1, good).passed);  // the command failed
  EXPECT_FALSE(script_result_gate(0, "").passed);    // no result written
  EXPECT_FALSE(script_result_gate(0, "{not json").passed);
  EXPECT_FALSE(script_result_gate(0, R"({"quality_gate": {"passed": true}})").passed);
  EXPECT_FALSE(script_result_gate(0, R"({"output_throughput": "fast", "quality_gate": {"passed": true}})").passed);
  EXPECT_FALSE(script_result_gate(0, R"({"output_throughput": 0, "quality_gate": {"passed": true}})").passed);
  EXPECT_FALSE(script_result_gate(0, R"({"output_throughput": 5})").passed);
  EXPECT_FALSE(script_result_gate(0, R"({"output_throughput": 5, "quality_gate": {"passed": "yes"}})").passed);
  EXPECT_FALSE(script_result_gate(0, R"({"output_throughput": 5, "quality_gate": {"passed": true, "skipped": true}})").passed);
  EXPECT_FALSE(script_result_gate(0, R"({"output_throughput": 5, "quality_gate": {"passed": false}})").passed);
  EXPECT_FALSE(script_result_gate(0, "[1, 2]").passed);
}

}  // namespace
}  // namespace loom::tune
