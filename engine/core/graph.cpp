// engine/core/graph.cpp — names and small helpers of the graph types.
#include "core/graph.h"

#include "core/text.h"

namespace ns {

std::string_view phase_name(phase p) {
  switch (p) {
    case phase::forward: return "forward";
    case phase::backward: return "backward";
    case phase::accumulate: return "accumulate";
    case phase::optimizer: return "optimizer";
  }
  return "?";
}

namespace {
constexpr std::pair<kernel_kind, std::string_view> kind_names[] = {
    {kernel_kind::gemm, "gemm"},       {kernel_kind::bmm, "bmm"},
    {kernel_kind::elementwise, "elementwise"}, {kernel_kind::softmax, "softmax"},
    {kernel_kind::layernorm, "layernorm"}, {kernel_kind::memory, "memory"}, {kernel_kind::attention, "attention"},
    {kernel_kind::collective, "collective"},
};
}  // namespace

std::string_view kernel_kind_name(kernel_kind k) {
  for (const auto& [kind, name] : kind_names)
    if (kind == k) return name;
  return "?";
}

std::vector<std::string> kernel_kind_names() {
  std::vector<std::string> out;
  for (const auto& [kind, name] : kind_names) out.emplace_back(name);
  return out;
}

std::optional<kernel_kind> kernel_kind_parse(std::string_view s) {
  for (const auto& [kind, name] : kind_names)
    if (name == s) return kind;
  return std::nullopt;
}

const std::vector<std::pair<std::string, int>>& dtype_sizes() {
  static const std::vector<std::pair<std::string, int>> sizes = {{"fp32", 4}, {"tf32", 4}, {"fp16", 2},
                                                                 {"bf16", 2}, {"fp8", 1},  {"fp64", 8}};
  return sizes;
}

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& d : dtype_sizes()) out.push_back(d.first);
    return out;
  }();
  return names;
}

int dtype_bytes(std::string_view dtype) {
  for (const auto& [name, bytes] : dtype_sizes())
    if (dtype == name) return bytes;
  throw error("unknown dtype '" + std::string(dtype) + "'" + text_did_you_mean(dtype, dtype_names()));
}

int64_t shape_numel(const shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

}  // namespace ns
