// Hostile and damaged GGUF images: each must give a loom::Error naming the field (never a crash,
// never an unbounded allocation).
#include <gtest/gtest.h>

#include <initializer_list>

#include "common/error.h"
#include "gguf/file.h"
#include "gguf/writer.h"
#include "raw.h"

using gguf_test::Raw;

namespace {

// Parses `b` and requires a loom::Error containing every one of `needles`.
void expect_error(const std::vector<uint8_t>& b, std::initializer_list<std::string> needles) {
  try {
    gguf::File::from_bytes(b, "hostile.gguf");
    ADD_FAILURE() << "parsed without error; wanted: " << *needles.begin();
  } catch (const loom::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("hostile.gguf"), std::string::npos) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

std::vector<uint8_t> small_valid_file() {
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::str("llama"));
  w.set("llama.block_count", gguf::Value::u32(1));
  w.set("tokens", gguf::Value::array(gguf::ValueType::STRING, {gguf::Value::str("a"), gguf::Value::str("bc")}));
  w.set("nested", gguf::Value::array(gguf::ValueType::ARRAY,
                                     {gguf::Value::array(gguf::ValueType::U32, {gguf::Value::u32(5)})}));
  w.add_tensor("blk.0.attn_q.weight", {32, 2}, gguf::TensorType::Q8_0, std::vector<uint8_t>(68, 1));
  w.add_tensor("output_norm.weight", {4}, gguf::TensorType::F32, std::vector<uint8_t>(16, 2));
  return w.to_bytes();
}

TEST(GgufHostile, EveryTruncationIsAnError) {
  auto full = small_valid_file();
  gguf::File f = gguf::File::from_bytes(full);
  uint64_t data_end = 0;
  for (const auto& t : f.tensors()) data_end = std::max(data_end, f.data_offset() + t.offset + t.nbytes);
  ASSERT_LE(data_end, full.size());
  for (size_t n = 0; n < data_end; ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    try {
      gguf::File::from_bytes(cut, "cut");
      ADD_FAILURE() << "prefix of " << n << " bytes parsed";
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find("at offset"), std::string::npos) << e.what();
    }
  }
  // Cutting only trailing padding leaves every tensor whole: still valid.
  for (size_t n = data_end; n <= full.size(); ++n)
    EXPECT_NO_THROW(gguf::File::from_bytes(std::span(full.data(), n)));
}

TEST(GgufHostile, Magic) {
  expect_error(Raw().put<uint32_t>(0x12345678).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(0).b,
               {"magic", "not a GGUF file"});
  std::vector<uint8_t> fugg = {'F', 'U', 'G', 'G', 0, 0, 0, 3};
  expect_error(fugg, {"magic", "big-endian"});
  expect_error({'G', 'G'}, {"magic"});
}

TEST(GgufHostile, Version) {
  expect_error(Raw().header(0, 0, 1).b, {"version", "unsupported GGUF version 1"});
  expect_error(Raw().header(0, 0, 0x03000000).b, {"version", "big-endian"});
  expect_error(Raw().header(0, 0, 7).b, {"version", "unsupported GGUF version 7"});
  EXPECT_NO_THROW(gguf::File::from_bytes(Raw().header(0, 0, 2).b));
}

TEST(GgufHostile, HugeCounts) {
  expect_error(Raw().header(0, uint64_t(1) << 60).b, {"metadata count", "at offset 16"});
  expect_error(Raw().header(uint64_t(1) << 60, 0).b, {"tensor count"});
  expect_error(Raw().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>(uint64_t(1) << 50).b,
               {"metadata 'k'", "array length"});
  // An array of arrays claiming 2^40 elements of at least 12 bytes each.
  expect_error(Raw().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(uint64_t(1) << 40).b,
               {"array length"});
}

TEST(GgufHostile, HugeStringLengths) {
  Raw key;
  key.header(0, 1).put<uint64_t>(uint64_t(1) << 62).zeros(64);
  expect_error(key.b, {"metadata key #0", "string length"});
  expect_error(Raw().header(0, 1).str("s").put<uint32_t>(8).put<uint64_t>(~uint64_t(0)).zeros(8).b,
               {"metadata 's'", "string length"});
  expect_error(Raw().header(1, 0).put<uint64_t>(uint64_t(1) << 63).zeros(64).b, {"tensor #0 name"});
}

TEST(GgufHostile, ValueTypes) {
  expect_error(Raw().header(0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0).b, {"metadata 'k'", "value type id 13"});
  expect_error(Raw().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0).b,
               {"metadata 'k'", "array element type id 77"});
  Raw deep;
  deep.header(0, 1).str("deep").put<uint32_t>(9);
  for (int i = 0; i < 100; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.zeros(64);
  expect_error(deep.b, {"metadata 'deep'", "nested deeper"});
}

TEST(GgufHostile, DuplicateKeysAndTensors) {
  expect_error(Raw().header(0, 2).kv_u32("a", 1).kv_u32("a", 2).b, {"metadata key 'a'", "duplicate key"});
  Raw r;
  r.header(2, 0).tensor("t", {4}, 0, 0).tensor("t", {4}, 0, 32).pad().zeros(64);
  expect_error(r.b, {"tensor 't'", "duplicate tensor name"});
}

TEST(GgufHostile, Alignment) {
  expect_error(Raw().header(0, 1).kv_u32("general.alignment", 24).b, {"general.alignment", "power of two"});
  expect_error(Raw().header(0, 1).kv_u32("general.alignment", 0).b, {"general.alignment"});
  expect_error(Raw().header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(64).b,
               {"general.alignment", "must be u32"});
  Raw mis;
  mis.header(1, 0).tensor("w", {4}, 0, 8).pad().zeros(64);
  expect_error(mis.b, {"tensor 'w'", "offset 8 is not a multiple of the alignment 32"});
  Raw ok;
  ok.header(1, 1).kv_u32("general.alignment", 8).tensor("w", {4}, 0, 8).pad(8).zeros(32);
  EXPECT_EQ(gguf::File::from_bytes(ok.b).alignment(), 8u);
}

TEST(GgufHostile, TensorsOutOfRangeOrOverlapping) {
  Raw past;
  past.header(1, 0).tensor("blk.0.attn_q.weight", {8}, 0, 0).pad().zeros(16);
  expect_error(past.b, {"tensor 'blk.0.attn_q.weight'", "runs past end of file"});
  Raw far;
  far.header(1, 0).tensor("w", {4}, 0, ~uint64_t(0) - 31).pad().zeros(16);
  expect_error(far.b, {"tensor 'w'", "runs past end of file"});
  Raw over;
  over.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad().zeros(128);
  expect_error(over.b, {"tensor 'b'", "overlaps tensor 'a'"});
  Raw header_past;
  header_past.header(1, 0).tensor("w", {4}, 0, 0);  // infos end, no room for the aligned data start
  expect_error(header_past.b, {"data section"});
}

TEST(GgufHostile, TensorShapesAndTypes) {
  auto one = [](std::vector<uint64_t> dims, uint32_t type) {
    Raw r;
    r.header(1, 0).tensor("blk.3.ffn_up.weight", std::move(dims), type, 0).pad().zeros(256);
    return r.b;
  };
  expect_error(one({4}, 99), {"tensor 'blk.3.ffn_up.weight'", "unknown tensor type id 99"});
  expect_error(one({4}, 4), {"unknown tensor type id 4"});  // Q4_2, removed from ggml
  expect_error(one({4, 0}, 0), {"tensor 'blk.3.ffn_up.weight'", "dims[1] is zero"});
  expect_error(one({1, 1, 1, 1, 1}, 0), {"n_dims 5"});
  expect_error(one({}, 0), {"n_dims 0"});
  expect_error(one({uint64_t(1) << 40, uint64_t(1) << 40}, 0), {"element count overflows"});
  expect_error(one({33}, 8), {"not a multiple of the q8_0 block size 32"});
  expect_error(one({uint64_t(1) << 61, 1}, 0), {"byte size overflows"});          // 2^63 bytes
  expect_error(one({uint64_t(1) << 62, 1}, 28), {"byte size overflows"});         // f64 row wraps u64
  expect_error(one({uint64_t(1) << 40, 1 << 20, 1 << 2}, 0), {"overflows"});
}

}  // namespace
