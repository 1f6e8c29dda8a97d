// Writer → reader round trips: all 13 value types, nested arrays, tensors, alignment, streaming.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "gguf/file.h"
#include "gguf/writer.h"

using namespace gguf;

namespace {

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(start + i);
  return v;
}

TEST(GgufWriter, RoundTripsEveryValueType) {
  Writer w;
  w.set("u8", {ValueType::U8, uint64_t(200)});
  w.set("i8", {ValueType::I8, int64_t(-100)});
  w.set("u16", {ValueType::U16, uint64_t(60000)});
  w.set("i16", {ValueType::I16, int64_t(-30000)});
  w.set("u32", Value::u32(4000000000u));
  w.set("i32", Value::i32(-2000000000));
  w.set("f32", Value::f32(0.15625f));
  w.set("bool", Value::boolean(true));
  w.set("string", Value::str("héllo\nworld"));
  w.set("u64", Value::u64(uint64_t(1) << 63));
  w.set("i64", {ValueType::I64, int64_t(-(int64_t(1) << 62))});
  w.set("f64", {ValueType::F64, 3.141592653589793});
  w.set("arr", Value::array(ValueType::I32, {Value::i32(1), Value::i32(-2), Value::i32(3)}));
  w.set("nested",
        Value::array(ValueType::ARRAY,
                     {Value::array(ValueType::STRING, {Value::str("a"), Value::str("")}),
                      Value::array(ValueType::ARRAY, {Value::array(ValueType::F64, {{ValueType::F64, 2.5}})})}));
  w.set("empty", Value::array(ValueType::U8, {}));
  w.set("u8", {ValueType::U8, uint64_t(201)});  // replaces, keeps position
  auto bytes = w.to_bytes();
  File f = File::from_bytes(bytes);
  ASSERT_EQ(f.metadata().size(), 15u);
  EXPECT_EQ(f.metadata()[0].first, "u8");
  EXPECT_EQ(f.at("u8").as_uint(), 201u);
  EXPECT_EQ(f.at("i8").as_int(), -100);
  EXPECT_EQ(f.at("u16").as_uint(), 60000u);
  EXPECT_EQ(f.at("i16").as_int(), -30000);
  EXPECT_EQ(f.at("u32").as_uint(), 4000000000u);
  EXPECT_EQ(f.at("i32").as_int(), -2000000000);
  EXPECT_EQ(f.get_float("f32", 0), 0.15625);
  EXPECT_TRUE(f.get_bool("bool", false));
  EXPECT_EQ(f.get_string("string"), "héllo\nworld");
  EXPECT_EQ(f.at("u64").as_uint(), uint64_t(1) << 63);
  EXPECT_THROW(f.at("u64").as_int(), loom::Error);  // does not fit
  EXPECT_EQ(f.at("i64").as_int(), -(int64_t(1) << 62));
  EXPECT_EQ(f.at("f64").as_double(), 3.141592653589793);
  const auto& arr = f.at("arr").as_array();
  EXPECT_EQ(arr.elem, ValueType::I32);
  ASSERT_EQ(arr.items.size(), 3u);
  EXPECT_EQ(arr.items[1].as_int(), -2);
  const auto& n = f.at("nested").as_array();
  ASSERT_EQ(n.items.size(), 2u);
  EXPECT_EQ(n.items[0].as_array().items[0].as_string(), "a");
  EXPECT_EQ(n.items[1].as_array().items[0].as_array().items[0].as_double(), 2.5);
  EXPECT_TRUE(f.at("empty").as_array().items.empty());
  for (const auto& [k, v] : f.metadata()) EXPECT_EQ(f.find(k), &v);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_int("missing", 7), 7);
}

TEST(GgufWriter, TypedGettersNameTheKey) {
  Writer w;
  w.set("general.architecture", Value::u32(3));
  auto bytes = w.to_bytes();
  File f = File::from_bytes(bytes);
  try {
    f.architecture();
    FAIL();
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("general.architecture"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f.at("nope"), loom::Error);
  EXPECT_THROW(f.tensor("nope"), loom::Error);
}

TEST(GgufWriter, RoundTripsTensorsWithAlignment) {
  for (uint64_t align : {32u, 64u, 256u}) {
    Writer w(align);
    w.set("general.architecture", Value::str("llama"));
    w.add_tensor("a", {3}, TensorType::F32, iota_bytes(12));
    w.add_tensor("b", {32, 2}, TensorType::Q8_0, iota_bytes(68, 7));
    w.add_tensor("c", {5, 1, 1, 2}, TensorType::F16, iota_bytes(20, 9));
    auto bytes = w.to_bytes();
    File f = File::from_bytes(bytes);
    EXPECT_EQ(f.alignment(), align);
    EXPECT_EQ(f.data_offset() % align, 0u);
    ASSERT_EQ(f.tensors().size(), 3u);
    const auto& b = f.tensor("b");
    EXPECT_EQ(b.dims, (std::vector<uint64_t>{32, 2}));
    EXPECT_EQ(b.type, TensorType::Q8_0);
    EXPECT_EQ(b.nbytes, 68u);
    EXPECT_EQ(b.rows(), 2u);
    EXPECT_EQ(b.elements(), 64u);
    EXPECT_EQ(b.offset % align, 0u);
    EXPECT_EQ(std::vector<uint8_t>(b.data, b.data + b.nbytes), iota_bytes(68, 7));
    EXPECT_EQ(f.tensor("c").elements(), 10u);
    EXPECT_EQ(std::vector<uint8_t>(f.tensor("c").data, f.tensor("c").data + 20), iota_bytes(20, 9));
  }
}

TEST(GgufWriter, RejectsBadTensors) {
  Writer w;
  EXPECT_THROW(w.add_tensor("x", {33}, TensorType::Q8_0, std::vector<uint8_t>(34)), loom::Error);
  EXPECT_THROW(w.add_tensor("x", {4}, TensorType::F32, std::vector<uint8_t>(15)), loom::Error);
  EXPECT_THROW(w.add_tensor("x", {0}, TensorType::F32, {}), loom::Error);
  EXPECT_THROW(w.add_tensor("x", {1, 1, 1, 1, 1}, TensorType::F32, std::vector<uint8_t>(4)), loom::Error);
  w.add_tensor("x", {1}, TensorType::F32, std::vector<uint8_t>(4));
  EXPECT_THROW(w.add_tensor("x", {1}, TensorType::F32, std::vector<uint8_t>(4)), loom::Error);
  Writer bad(24);
  EXPECT_THROW(bad.to_bytes(), loom::Error);
}

TEST(GgufWriter, StreamsDeclaredTensorsToDisk) {
  auto path = (std::filesystem::temp_directory_path() / "loom_gguf_stream_test.gguf").string();
  Writer w;
  w.set("general.architecture", Value::str("llama"));
  w.declare_tensor("t0", {8, 3}, TensorType::F32);
  w.add_tensor("t1", {2}, TensorType::F16, iota_bytes(4, 50));
  w.declare_tensor("t2", {64}, TensorType::Q8_0);
  EXPECT_THROW(w.to_bytes(), loom::Error);  // declared tensors need a source
  std::vector<size_t> called;
  w.write(path, [&](size_t i, const Writer::TensorDecl& d, std::span<uint8_t> out) {
    called.push_back(i);
    ASSERT_EQ(out.size(), d.nbytes);
    for (size_t k = 0; k < out.size(); ++k) out[k] = uint8_t(i * 10 + k);
  });
  EXPECT_EQ(called, (std::vector<size_t>{0, 2}));
  File f = File::open(path);
  EXPECT_EQ(f.tensor("t0").nbytes, 96u);
  EXPECT_EQ(f.tensor("t0").data[5], 5);
  EXPECT_EQ(f.tensor("t1").data[1], 51);
  EXPECT_EQ(f.tensor("t2").nbytes, 68u);
  EXPECT_EQ(f.tensor("t2").data[3], 23);
  EXPECT_EQ(f.sha256().size(), 64u);
  std::filesystem::remove(path);
}

TEST(GgufFile, Sha256OfKnownBytes) {
  Writer w;
  auto bytes = w.to_bytes();  // header only: "GGUF", v3, 0 tensors, 0 kv
  ASSERT_EQ(bytes.size(), 32u);  // padded to alignment
  File f = File::from_bytes(bytes);
  EXPECT_EQ(f.sha256().size(), 64u);
  EXPECT_EQ(f.sha256(), File::from_bytes(bytes).sha256());
}

}  // namespace
