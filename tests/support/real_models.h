// The provisioned real models for the C++ tests that read them, and what a missing one means.
//
// scripts/test exports LOOM_REQUIRE_ALL=1: there a missing model fails the test, so the suite
// cannot pass without having run its real-model checks. A developer running one test binary by
// hand (no LOOM_REQUIRE_ALL) gets a skip instead. Either way the message names the file and how
// to get it. tests/python/conftest.py applies the same rule to the Python oracle tests.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace loom::testing {

// $LOOM_MODELS (scripts/test sets it to $LOOM_CACHE/models), else ~/.cache/loom/models.
inline std::filesystem::path models_dir() {
  if (const char* m = std::getenv("LOOM_MODELS"); m && *m) return m;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/root") / ".cache" / "loom" / "models";
}

inline std::string real_model(std::string_view file_name) { return (models_dir() / file_name).string(); }

inline bool require_all() {
  const char* v = std::getenv("LOOM_REQUIRE_ALL");
  return v && std::string_view(v) == "1";
}

inline std::string missing_model_message(const std::string& path) {
  return path + " is missing: run scripts/provision-models (or scripts/setup) to fetch the real models, "
                "or point LOOM_MODELS at the folder that holds them";
}

}  // namespace loom::testing

// In a test body: fails (under scripts/test) or skips (by hand) when the model file is absent.
#define LOOM_REQUIRE_MODEL(path)                                                        \
  do {                                                                                  \
    if (!std::filesystem::exists(path)) {                                               \
      if (::loom::testing::require_all()) {                                             \
        FAIL() << ::loom::testing::missing_model_message(path) << " (LOOM_REQUIRE_ALL=1)"; \
      } else {                                                                          \
        GTEST_SKIP() << ::loom::testing::missing_model_message(path);                   \
      }                                                                                 \
    }                                                                                   \
  } while (0)
