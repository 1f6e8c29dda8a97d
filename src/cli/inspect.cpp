// `loom inspect FILE`: what a GGUF file holds — header, metadata, tensor table, summary.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/verb.h"
#include "common/error.h"
#include "gguf/file.h"

namespace {

using ojson = nlohmann::ordered_json;

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = double(n);
  int u = 0;
  while (x >= 1024 && u < 4) x /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", x, units[u]);
}

std::string human_count(uint64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f} B", double(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f} M", double(n) / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f} K", double(n) / 1e3);
  return fmt::format("{}", n);
}

std::string grouped(uint64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string shape(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "]";
}

ojson to_json(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::STRING: return v.as_string();
    case ValueType::BOOL: return v.as_bool();
    case ValueType::F32: case ValueType::F64: return v.as_double();
    case ValueType::ARRAY: {
      ojson a = ojson::array();
      for (const auto& x : v.as_array().items) a.push_back(to_json(x));
      return a;
    }
    default:
      if (const auto* u = std::get_if<uint64_t>(&v.v)) return *u;
      return std::get<int64_t>(v.v);
  }
}

struct Summary {
  std::vector<std::pair<std::string, size_t>> per_type;  // most common first
  uint64_t bytes = 0, params = 0;
};

Summary summarize(const gguf::File& f) {
  Summary s;
  std::map<std::string, size_t> counts;
  for (const auto& t : f.tensors()) {
    ++counts[std::string(gguf::type_name(t.type))];
    s.bytes += t.nbytes;
    s.params += t.elements();
  }
  s.per_type.assign(counts.begin(), counts.end());
  std::stable_sort(s.per_type.begin(), s.per_type.end(), [](auto& a, auto& b) { return a.second > b.second; });
  return s;
}

void print_json(const gguf::File& f, bool with_sha) {
  ojson j;
  j["path"] = f.path();
  j["size"] = f.size();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  if (with_sha) j["sha256"] = f.sha256();
  ojson md = ojson::object();
  for (const auto& [k, v] : f.metadata()) {
    ojson e;
    e["type"] = std::string(gguf::value_type_name(v.type));
    if (v.type == gguf::ValueType::ARRAY) e["elem"] = std::string(gguf::value_type_name(v.as_array().elem));
    e["value"] = to_json(v);
    md[k] = std::move(e);
  }
  j["metadata"] = std::move(md);
  ojson ts = ojson::array();
  for (const auto& t : f.tensors())
    ts.push_back({{"name", t.name}, {"shape", t.dims}, {"type", std::string(gguf::type_name(t.type))},
                  {"type_id", uint32_t(t.type)}, {"nbytes", t.nbytes}, {"offset", t.offset},
                  {"file_offset", f.data_offset() + t.offset}});
  j["tensors"] = std::move(ts);
  Summary s = summarize(f);
  ojson per = ojson::object();
  for (const auto& [ty, n] : s.per_type) per[ty] = n;
  j["summary"] = {{"tensors", f.tensors().size()}, {"per_type", per}, {"bytes", s.bytes}, {"params", s.params}};
  // Token strings need not be valid UTF-8; replace rather than fail.
  std::puts(j.dump(1, ' ', false, ojson::error_handler_t::replace).c_str());
}

void print_text(const gguf::File& f, bool all_metadata, bool with_sha) {
  fmt::print("file       {}\n", f.path());
  fmt::print("size       {} ({} bytes)\n", human_bytes(f.size()), grouped(f.size()));
  fmt::print("format     GGUF v{}, alignment {}, tensor data at offset {}\n", f.version(), f.alignment(),
             f.data_offset());
  if (with_sha) fmt::print("sha256     {}\n", f.sha256());

  fmt::print("\nmetadata ({} keys)\n", f.metadata().size());
  size_t kw = 0;
  for (const auto& [k, v] : f.metadata()) kw = std::max(kw, k.size());
  kw = std::min<size_t>(kw, 48);
  const size_t items = all_metadata ? std::numeric_limits<size_t>::max() : 6;
  for (const auto& [k, v] : f.metadata()) {
    std::string shown = v.to_display(items);
    fmt::print("  {:<{}}  {}\n", k, kw, shown);
  }

  const auto& ts = f.tensors();
  fmt::print("\ntensors ({})\n", ts.size());
  size_t nw = 4, sw = 5, tw = 4;
  for (const auto& t : ts) {
    nw = std::max(nw, t.name.size());
    sw = std::max(sw, shape(t).size());
    tw = std::max(tw, gguf::type_name(t.type).size());
  }
  fmt::print("  {:<{}}  {:<{}}  {:<{}}  {:>12}  {:>12}\n", "name", nw, "shape", sw, "type", tw, "bytes", "offset");
  for (const auto& t : ts)
    fmt::print("  {:<{}}  {:<{}}  {:<{}}  {:>12}  {:>12}\n", t.name, nw, shape(t), sw, gguf::type_name(t.type), tw,
               grouped(t.nbytes), grouped(f.data_offset() + t.offset));

  Summary s = summarize(f);
  std::string per;
  for (const auto& [ty, n] : s.per_type) per += fmt::format("{}{} {}", per.empty() ? "" : ", ", n, ty);
  fmt::print("\nsummary    {} tensors ({}); {} of tensor data; {} params\n", ts.size(), per.empty() ? "none" : per,
             human_bytes(s.bytes), human_count(s.params));
}

loom::cli::RegisterVerb reg("inspect", [](CLI::App& root) {
  struct Opts {
    std::string path;
    bool json = false, all = false, sha = false;
  };
  auto o = std::make_shared<Opts>();
  auto* c = root.add_subcommand("inspect", "Show a GGUF file's header, metadata and tensor table");
  c->add_option("FILE", o->path, "GGUF file")->required();
  c->add_flag("--json", o->json, "machine-readable output (full metadata values)");
  c->add_flag("--all-metadata", o->all, "show long arrays and strings in full");
  c->add_flag("--sha256", o->sha, "also hash the whole file");
  c->callback([o] {
    gguf::File f = gguf::File::open(o->path);
    if (o->json) print_json(f, o->sha);
    else print_text(f, o->all, o->sha);
  });
});

}  // namespace
