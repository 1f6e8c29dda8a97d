// libFuzzer target for the .loom text form: any input either parses or throws loom::Error;
// a parsed module must print, re-parse to an equal module and re-print to the same bytes;
// verify() and schedule_warnings() must throw only loom::Error.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "ir/text.h"
#include "ir/verify.h"

namespace {

[[noreturn]] void broken(const char* what, const std::string& a, const std::string& b) {
  std::fprintf(stderr, "round trip broken: %s\n--- first print ---\n%s\n--- second ---\n%s\n", what, a.c_str(), b.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ir::Module m;
  try {
    m = ir::parse(text, "fuzz.loom");
  } catch (const loom::Error&) {
    return 0;
  }
  try {
    ir::verify(m);
    (void)ir::schedule_warnings(m);
  } catch (const loom::Error&) {
    // Meaningless programs still print and read back: the round trip is a property of syntax.
  }
  const std::string once = ir::print(m);
  ir::Module back;
  try {
    back = ir::parse(once, "printed.loom");
  } catch (const loom::Error& e) {
    broken(e.what(), once, "");
  }
  const std::string twice = ir::print(back);
  if (twice != once) broken("print(parse(print(m))) != print(m)", once, twice);
  if (!(back == m)) broken("parse(print(m)) != m", once, twice);
  return 0;
}
