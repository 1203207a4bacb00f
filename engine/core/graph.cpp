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

int dtype_bytes(std::string_view dtype) {
  if (dtype == "fp32" || dtype == "tf32") return 4;
  if (dtype == "fp16" || dtype == "bf16") return 2;
  if (dtype == "fp8") return 1;
  if (dtype == "fp64") return 8;
  throw error("unknown dtype '" + std::string(dtype) + "'" +
              text_did_you_mean(dtype, {"fp32", "tf32", "fp16", "bf16", "fp8", "fp64"}));
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
