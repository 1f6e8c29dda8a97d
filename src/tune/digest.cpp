#include "tune/digest.h"

#include <openssl/evp.h>

#include <fstream>
#include <sstream>

#include "common/error.h"

namespace loom::tune {

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) != 1) loom::fail("sha256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 15]);
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) loom::fail("cannot read {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string sha256_file(const std::string& path) { return sha256_hex(read_text(path)); }

void write_text(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) loom::fail("cannot write {}", path);
  out.write(text.data(), std::streamsize(text.size()));
  if (!out) loom::fail("short write to {}", path);
}

}  // namespace loom::tune
