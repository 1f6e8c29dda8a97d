// SHA-256 digests for pins, evidence manifests and provenance subjects.
#pragma once
#include <string>
#include <string_view>

namespace loom::tune {

std::string sha256_hex(std::string_view bytes);
std::string sha256_file(const std::string& path);  // throws loom::Error when unreadable
std::string read_text(const std::string& path);    // throws loom::Error when unreadable
void write_text(const std::string& path, std::string_view text);

}  // namespace loom::tune
