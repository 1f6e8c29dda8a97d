#include "gguf/hash_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

namespace gguf {
namespace {

constexpr const char* kMagic = "loom-gguf-sha256 v1";

struct Entry {
  FileIdentity id;
  std::string sha256;
};

bool is_hex_sha256(const std::string& s);

std::optional<Entry> read_entry(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string magic;
  Entry e;
  if (!in || !std::getline(in, magic) || magic != kMagic || !std::getline(in, e.id.canonical_path)) return std::nullopt;
  if (!(in >> e.id.device >> e.id.inode >> e.id.size >> e.id.mtime_ns >> e.id.ctime_ns >> e.sha256)) return std::nullopt;
  if (!is_hex_sha256(e.sha256)) return std::nullopt;
  return e;
}

// The identity the file at `path` has now, if it exists.
std::optional<FileIdentity> identity_now(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{path, uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size),
                      int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                      int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

// Past this many entries, those of files that are gone or changed are dropped (tests port
// many short-lived files; the cache should not grow without bound).
constexpr size_t kPruneAbove = 256;

bool is_hex_sha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

const HashCache& HashCache::standard() {
  static const HashCache cache = [] {
    std::filesystem::path base;
    if (const char* c = std::getenv("LOOM_CACHE"); c && *c) base = c;
    else if (const char* h = std::getenv("HOME"); h && *h) base = std::filesystem::path(h) / ".cache" / "loom";
    else base = std::filesystem::temp_directory_path() / "loom-cache";
    return HashCache(base / "sha256");
  }();
  return cache;
}

// One entry per (device, inode); the entry itself repeats every field, so a reused inode or a
// renamed file does not match.
std::filesystem::path HashCache::entry(const FileIdentity& id) const {
  return dir_ / (std::to_string(id.device) + "-" + std::to_string(id.inode) + ".txt");
}

std::optional<std::string> HashCache::find(const FileIdentity& id) const {
  const auto e = read_entry(entry(id));
  if (!e || !(e->id == id)) return std::nullopt;
  return e->sha256;
}

void HashCache::prune() const {
  std::error_code ec;
  std::vector<std::filesystem::path> entries;
  for (auto it = std::filesystem::directory_iterator(dir_, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    if (it->path().extension() == ".txt") entries.push_back(it->path());
  if (entries.size() <= kPruneAbove) return;
  for (const auto& p : entries) {
    const auto e = read_entry(p);
    const auto now = e ? identity_now(e->id.canonical_path) : std::nullopt;
    if (!now || !(*now == e->id)) std::filesystem::remove(p, ec);
  }
}

void HashCache::store(const FileIdentity& id, const std::string& sha256_hex) const {
  if (id.canonical_path.find('\n') != std::string::npos || !is_hex_sha256(sha256_hex)) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return;
  std::ostringstream body;
  body << kMagic << '\n' << id.canonical_path << '\n' << id.device << ' ' << id.inode << ' ' << id.size << ' '
       << id.mtime_ns << ' ' << id.ctime_ns << '\n' << sha256_hex << '\n';
  // Written to a private name, then renamed: a concurrent reader sees the old entry or the new
  // one, never half of one.
  const std::filesystem::path final_path = entry(id);
  const std::filesystem::path tmp = final_path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << body.str();
    out.close();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, final_path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  prune();
}

}  // namespace gguf
