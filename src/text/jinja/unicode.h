// UTF-8 helpers: Jinja strings are Python str, so length, indexing and slicing count code
// points, not bytes. Strings are stored as UTF-8 and decoded only where positions matter.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::text::jinja {

std::vector<uint32_t> utf8_decode(std::string_view s);  // invalid bytes map to U+FFFD
void utf8_append(std::string& out, uint32_t cp);
std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end);
size_t utf8_length(std::string_view s);

// Python's str.isspace() for the code points that occur in practice.
bool is_py_space(uint32_t cp);
// Case mapping: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic basic ranges.
uint32_t to_upper_cp(uint32_t cp);
uint32_t to_lower_cp(uint32_t cp);
bool is_cased_upper(uint32_t cp);
bool is_cased_lower(uint32_t cp);
bool is_alpha_cp(uint32_t cp);
std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);

}  // namespace loom::text::jinja
