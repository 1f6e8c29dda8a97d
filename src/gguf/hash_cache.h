// The SHA-256 of a GGUF file, remembered across processes so that opening a program or porting
// a file does not re-read hundreds of megabytes each time (issue 10, A.4: hashing dominated a
// cold `loom run`).
//
// An entry is trusted only while the file is provably the one that was hashed: same canonical
// path, device, inode, size, modification time and status-change time (nanoseconds). Any write
// to the file changes mtime and ctime, and ctime cannot be set back by an ordinary user (touch
// -d resets mtime but moves ctime), so a stale entry is detected and the file hashed again.
// File timestamps tick coarsely (a few milliseconds), so a file changed again within the same
// tick as it was hashed keeps its times; as git does with "racily clean" entries, a file changed
// less than kSettleSeconds before it was opened is hashed but not recorded.
// Writing the cache is best effort: a read-only or full disk only costs the next run a rehash.
// Beyond 256 entries, a write drops the entries of files that are gone or have changed.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace gguf {

// What identifies one version of a file on disk (from fstat of the descriptor that was mapped).
struct FileIdentity {
  std::string canonical_path;
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

class HashCache {
 public:
  static constexpr int64_t kSettleSeconds = 2;
  // Whether an entry may be recorded for `id`, opened at `opened_ns` (CLOCK_REALTIME).
  static bool settled(const FileIdentity& id, int64_t opened_ns) {
    return opened_ns - id.ctime_ns >= kSettleSeconds * 1000000000 && opened_ns - id.mtime_ns >= kSettleSeconds * 1000000000;
  }

  explicit HashCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  // $LOOM_CACHE/sha256 (LOOM_CACHE defaults to ~/.cache/loom, as in scripts/setup). Where the
  // cache lives changes only how long hashing takes, never a result.
  static const HashCache& standard();

  // The recorded hash when the entry's identity equals `id` in every field; nullopt otherwise.
  std::optional<std::string> find(const FileIdentity& id) const;
  void store(const FileIdentity& id, const std::string& sha256_hex) const;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path entry(const FileIdentity& id) const;
  void prune() const;
  std::filesystem::path dir_;
};

}  // namespace gguf
