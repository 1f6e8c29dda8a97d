// The SHA-256 cache (gguf/hash_cache.h): an entry is used only for the exact version of the
// file it was made from; any change to the file, even one that keeps size and mtime, rehashes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gguf/file.h"
#include "gguf/hash_cache.h"
#include "gguf/writer.h"

namespace fs = std::filesystem;
using namespace gguf;

namespace {

fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("loom_hash_cache_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<uint8_t> small_gguf(uint8_t fill) {
  Writer w;
  w.set("general.architecture", Value::str("llama"));
  w.add_tensor("t", {64}, TensorType::F32, std::vector<uint8_t>(256, fill));
  return w.to_bytes();
}

void write_file(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::string uncached_sha256(const std::vector<uint8_t>& bytes) { return File::from_bytes(bytes).sha256(); }

const std::string kFake(64, 'a');

}  // namespace

TEST(HashCache, FindsOnlyAnEntryOfTheSameIdentity) {
  const fs::path dir = temp_dir("unit");
  HashCache cache(dir / "sha256");
  FileIdentity id{"/models/x.gguf", 2049, 77, 1000, 1700000000123456789, 1700000000223456789};
  EXPECT_FALSE(cache.find(id));
  cache.store(id, kFake);
  ASSERT_TRUE(cache.find(id));
  EXPECT_EQ(*cache.find(id), kFake);
  // Every field is part of the identity.
  auto changed = [&](auto edit) {
    FileIdentity o = id;
    edit(o);
    return cache.find(o).has_value();
  };
  EXPECT_FALSE(changed([](FileIdentity& o) { o.canonical_path = "/models/y.gguf"; }));
  EXPECT_FALSE(changed([](FileIdentity& o) { o.device += 1; }));
  EXPECT_FALSE(changed([](FileIdentity& o) { o.inode += 1; }));
  EXPECT_FALSE(changed([](FileIdentity& o) { o.size += 1; }));
  EXPECT_FALSE(changed([](FileIdentity& o) { o.mtime_ns += 1; }));
  EXPECT_FALSE(changed([](FileIdentity& o) { o.ctime_ns += 1; }));
  // A damaged entry is ignored, never trusted.
  for (const auto& e : fs::directory_iterator(dir / "sha256")) {
    std::ofstream(e.path(), std::ios::trunc) << "loom-gguf-sha256 v1\n/models/x.gguf\n2049 77 1000\n";
  }
  EXPECT_FALSE(cache.find(id));
  // Not a hash: refused at store time.
  cache.store(id, "not-a-hash");
  EXPECT_FALSE(cache.find(id));
  fs::remove_all(dir);
}

TEST(HashCache, DropsEntriesOfVanishedFilesPastItsSize) {
  const fs::path dir = temp_dir("prune");
  HashCache cache(dir / "sha256");
  const fs::path real = dir / "kept.gguf";
  write_file(real, small_gguf(3));
  const File f = File::open(real.string());
  cache.store(*f.identity(), kFake);
  for (uint64_t i = 0; i < 300; ++i) cache.store({(dir / ("gone" + std::to_string(i))).string(), 1, 1000 + i, 1, 1, 1}, kFake);
  size_t left = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / "sha256")) ++left;
  EXPECT_LE(left, 257u);
  EXPECT_TRUE(cache.find(*f.identity())) << "the entry of a file that still exists unchanged is kept";
  fs::remove_all(dir);
}

TEST(HashCache, FileUsesTheCacheAndRehashesAChangedFile) {
  const fs::path dir = temp_dir("file");
  // HashCache::standard() reads LOOM_CACHE once per process; CTest runs each test in its own.
  ::setenv("LOOM_CACHE", dir.c_str(), 1);
  const fs::path p = dir / "m.gguf";
  const auto v1 = small_gguf(1);
  write_file(p, v1);
  const File f = File::open(p.string());
  ASSERT_TRUE(f.identity());
  EXPECT_EQ(f.sha256(), uncached_sha256(v1));
  // Just written, so its timestamps are not yet trusted: hashed, not recorded.
  EXPECT_FALSE(HashCache::settled(*f.identity(), f.opened_ns()));
  EXPECT_FALSE(HashCache::standard().find(*f.identity()));
  const int64_t last_change = std::max(f.identity()->ctime_ns, f.identity()->mtime_ns);
  EXPECT_TRUE(HashCache::settled(*f.identity(), last_change + HashCache::kSettleSeconds * 1000000000));

  // An entry for this version of the file is used: planting a different value shows it is read.
  HashCache::standard().store(*f.identity(), kFake);
  EXPECT_EQ(File::open(p.string()).sha256(), kFake);

  // Same size, same mtime (set back by hand), different bytes: ctime moved, so it is rehashed.
  // (The pause outlasts the coarse clock's tick, which file times are taken from.)
  ::usleep(30000);
  struct stat before {};
  ASSERT_EQ(::stat(p.c_str(), &before), 0);
  const auto v2 = small_gguf(2);
  ASSERT_EQ(v2.size(), v1.size());
  write_file(p, v2);
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, 0), 0);
  const File g = File::open(p.string());
  EXPECT_EQ(g.identity()->mtime_ns, f.identity()->mtime_ns);
  EXPECT_EQ(g.identity()->size, f.identity()->size);
  EXPECT_NE(g.identity()->ctime_ns, f.identity()->ctime_ns);
  EXPECT_EQ(g.sha256(), uncached_sha256(v2));

  // An in-memory image has no identity and never touches the cache.
  EXPECT_FALSE(File::from_bytes(v1).identity());
  fs::remove_all(dir);
}
