// engine/core/neusight_predictor.cpp — batches a graph's kernels per family into one MLP evaluation each,
// deduplicated by shape (a 96-layer model has only tens of distinct kernels).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>

#include "core/roofline.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "core/weights.h"

namespace ns {

namespace {

// The envelope: more work cannot take less time, but the utilisation MLP is not monotone in size, off its training
// GPUs and on them. A kernel of an envelope family is priced no slower than its larger copies — the same kernel with
// 1.125 to 16 times (envelope_factors) one of its scaled axes, evaluated in the same batch — and, within one forecast,
// no slower than any kernel of its class (envelope_key) at least as large on every ordered axis (dominance_minimum).
// Each family names its axes (envelope_axes_of):
// - vector kernels (element-wise, softmax, layer norm): rows, scaled and ordered. On an H100 a 768-wide mul of 49–66
//   rows (blocks just under one wave of 132 SMs, per-SM bandwidth beyond the training range) came back up to 13× its
//   neighbours (333 µs for 50 k fp32 elements against 25 µs at 77 rows).
// - decode attention: the KV length scaled and ordered, the batch ordered. Llama-3.2-1B decode on the B200 (batch 8,
//   32 / 8 heads, head dim 64) was priced 16.56 µs at 1024 cached tokens and 13.42 µs at 2048 (measured 10.81 /
//   13.21): both launch the same split-KV grid and the MLP priced the smaller slice higher. A KV-length copy is that
//   same launch (blocks kept, each block's slice longer), its FLOPs and bytes grown by what each key adds as the op
//   rule's kernels.lua attention() gives it (kv_flops, kv_bytes: no second copy of the cost formula here). No ⌈f · b⌉ batch copies: across many waves they change the grid (more blocks, other
//   wave quantisation) and lowered the leave-one-GPU-out forecasts most; no head-dim order: the kernels are compiled
//   per head dim and a head dim of 64 is measured > 5 % slower than 128 at the same shape in 6–10 % of the L40S and
//   RTX PRO 6000 pairs (weights/MONOTONE_ATTENTION_RULE.md).
//   And the split scaled (weights/DECODE_SPLIT_RULE.md, D2): a split-KV kernel (blocks = b · KV heads · split) no
//   slower than its copies with more splits of the same slice, at most one wave of the SMs (the blocks of one wave
//   run at once: a cache of more such slices cannot finish sooner). Below the context where the tile rule's split
//   reaches one wave (scripts/tiling/attention.lua), each block reads its least slice and the grid grows with the
//   cache; the MLP was not monotone along that fill (Llama-3-8B batch 1 on an H100: 0.365 ms at 16 blocks, 0.528 at
//   88, 0.379 at 112, for the 32 layers). Those copies are the rule's own launches at the longer caches.
//   And a split-KV kernel's batch scaled within its one wave (B2): copies with more sequences at the kernel's split
//   and slice while the grid fits the SMs once. Along the batch the MLP priced the same split-KV kernel cheaper with
//   more blocks (Llama-3-8B, context 2048, H100: batch 6 → 7, split 2, 96 → 112 blocks, 0.93 → 0.75 ms for the 32
//   layers; A100 context 1024, batch 5 → 6, ×0.71). Not covered: split switches (the rule's ⌊SMs / pairs⌋ drops
//   with the batch) and unsplit kernels (more pairs than half the SMs), whose copies (B1) failed the keep rule.
// - prefill attention (forward and backward, each op its own class): the query length, KV length and batch ordered,
//   no copies. A partial last query tile was priced above the full one (L40S, head dim 128: 128 tokens 24.9 µs,
//   256 tokens 18.9 µs); a copy of more queries would change the causal tiles, which are the tile rule's (Lua's).
// - GEMMs (Linear, BMM, tensor-core, fp8): M ordered (a BMM's per batch; b, N, K kept), no copies. A GEMM of M rows
//   is the one of M' > M rows with its extra rows padded, so it can run in the larger one's time; the MLP priced a
//   bf16 B200 GEMM up to 1.83× one of more rows, an fp8 H200 one 1.89×, an fp32 L4 BMM 3.8×
//   (tests/core/test_forecast_physics.cpp). The order compares real kernels, each with the tile rule's tile for its
//   M (tiles are not in the class). Copies of more rows (the vector kernels' ladder) were tried and harmed gemm_tc16:
//   they keep the small GEMM's tile and split-K at up to 16× its rows, pairs the data never holds, which the MLP
//   priced near the launch floor (weights/MONOTONE_GEMM_RULE.md).
// Not across GPUs: a GPU beyond its training GPUs' per-SM bandwidth or memory is only warned about
// (scripts/neusight/uncertainty.lua range_warnings; below); the GPU envelopes tried were not adopted
// (weights/MONOTONE_GPU_RULE.md).
constexpr std::array<double, 8> envelope_factors = {1.125, 1.25, 1.5, 2, 3, 4, 8, 16};

// The sub-additivity envelope (weights/SUBADDITIVE_RULE.md, candidate S1): a library can run a batched GEMM as its b
// single GEMMs one after another, so its best kernel is no slower than those back to back. A BMM (b > 1) of the
// tensor-core GEMM families is priced no slower than b × its piece (1, m, n, k) — the batch split only, a fixed
// piece set, not a knob; no halving of the rows or output columns (S's pieces on M / N halvings took the least of up
// to 31 noisy forecasts and priced small GEMMs low: the gemm_tc16 m ≤ 16 cell 12.29 → 13.72 %). The piece is a real
// kernel: the tile rule's tile for its shape and the kernel's own FLOPs and bytes times what
// scripts/neusight/kernels.lua gives the piece over the kernel's dims (one source of the cost formula; an op's own
// conventions kept: ops/grouped_linear.lua's real rows, quantised weights), both from the session
// (predictor::gemm_pieces_set). Why: with the one-wave view (partial_wave = 'sm_persist') the H100's grouped expert
// BMM of W 6 waves was priced above its 8 single GEMMs (Mixtral-8x7B bf16 decode batch 8: grouped 38.58 ms, the
// per-expert loop 37.37). A bound, not a fit. Cost: one more MLP row and tile selection per distinct BMM of the two
// families.
bool subadditive(family f) { return f == family::gemm_tc16 || f == family::gemm_fp8; }

enum class size_axis { rows, q_len, kv_len, batch, m, split };

struct envelope_axes {
  std::vector<size_axis> scaled;   // the axes with larger copies
  std::vector<size_axis> ordered;  // the axes of the within-forecast order (the scaled ones among them)
};

const envelope_axes* envelope_axes_of(family f) {
  static const envelope_axes vector{{size_axis::rows}, {size_axis::rows}};
  static const envelope_axes decode{{size_axis::kv_len, size_axis::split, size_axis::batch},
                                    {size_axis::kv_len, size_axis::batch}};
  static const envelope_axes prefill{{}, {size_axis::q_len, size_axis::kv_len, size_axis::batch}};
  static const envelope_axes gemm{{}, {size_axis::m}};
  switch (f) {
    case family::elementwise:
    case family::softmax:
    case family::layernorm: return &vector;
    case family::attention_decode: return &decode;
    case family::attention_prefill: return &prefill;
    case family::bmm:
    case family::linear:
    case family::gemm_tc16:
    case family::gemm_fp8: return &gemm;
    default: return nullptr;
  }
}

// A decode kernel's split: its blocks over its (sequence, KV head) pairs; 0 when the blocks are not a whole number of
// splits of them (a rule of another shape: no split copies).
int64_t split_of(const kernel& k) {
  const double pairs = double(k.b) * double(k.hidden);
  if (!(pairs >= 1) || !(k.tile_blocks >= pairs)) return 0;
  const double s = k.tile_blocks / pairs;
  return s == std::floor(s) && s < 0x1p58 ? int64_t(s) : 0;
}

int64_t axis_value(const kernel& k, size_axis a) {
  switch (a) {
    case size_axis::rows: return k.rows;
    case size_axis::q_len: return k.m;
    case size_axis::kv_len: return k.k;
    case size_axis::batch: return k.b;
    case size_axis::m: return k.m;
    case size_axis::split: return split_of(k);
  }
  return 0;
}

// Whether every ordered axis is positive (the dominance minimum), and every scaled one small enough for 16 × it too
// (the larger copies).
bool envelope_ordered(const kernel& k, const envelope_axes& ax) {
  for (size_axis a : ax.ordered)
    if (axis_value(k, a) <= 0) return false;
  return true;
}
bool envelope_scalable(const kernel& k, const envelope_axes& ax) {
  for (size_axis a : ax.scaled) {
    if (axis_value(k, a) >= (int64_t(1) << 58)) return false;
    // an attention kernel from a rule that does not say what a key costs (kv_flops, kv_bytes) gets no longer copies
    if ((a == size_axis::kv_len || a == size_axis::split) && !(k.kv_flops > 0 && k.kv_bytes > 0)) return false;
  }
  return envelope_ordered(k, ax);
}

// A decode kernel with `more` splits of its slice (the pairs kept: blocks and cache grow together; tile_flops and
// tile_bytes, the slice's, unchanged), its FLOPs and bytes grown by what each further key adds.
kernel split_scaled(const kernel& k, int64_t more) {
  kernel s = k;
  const int64_t split = split_of(k), pairs = k.b * k.hidden;
  const int64_t kv = int64_t(std::ceil(double(k.k) * double(more) / double(split)));
  s.k = kv;
  s.flops = k.flops + double(kv - k.k) * k.kv_flops;
  s.bytes = k.bytes + double(kv - k.k) * k.kv_bytes;
  s.tile_blocks = double(pairs * more);
  return s;
}

// A decode kernel of `more` sequences at its own split and slice: the blocks, FLOPs, bytes and what each key adds
// (kv_flops, kv_bytes: over every sequence) × more / b; each block's tile unchanged.
kernel batch_scaled(const kernel& k, int64_t more) {
  kernel s = k;
  const double r = double(more) / double(k.b);
  s.b = more;
  s.flops = k.flops * r, s.bytes = k.bytes * r, s.kv_flops = k.kv_flops * r, s.kv_bytes = k.kv_bytes * r;
  s.tile_blocks = double(more * k.hidden * split_of(k));
  return s;
}

// `k` with ⌈factor · axis⌉, and its FLOPs and bytes with it.
kernel axis_scaled(const kernel& k, size_axis a, double factor) {
  kernel s = k;
  const int64_t v = axis_value(k, a), more = int64_t(std::ceil(double(v) * factor));
  const double r = double(more) / double(v);
  switch (a) {
    case size_axis::rows:
      s.rows = more, s.flops = k.flops * r, s.bytes = k.bytes * r;
      break;
    case size_axis::q_len:
    case size_axis::batch:
    case size_axis::m:
    case size_axis::split: throw error("the envelope copies rows and KV lengths only (envelope_axes_of; splits: split_scaled, batches: batch_scaled)");
    case size_axis::kv_len: {  // the same launch, each block's share of the cache longer
      // what each further key adds, as kernels.lua attention() gives it (kv_flops, kv_bytes)
      s.k = more;
      s.flops = k.flops + double(more - v) * k.kv_flops;
      s.bytes = k.bytes + double(more - v) * k.kv_bytes;
      s.tile_flops = k.tile_flops + (s.flops - k.flops) / k.tile_blocks;
      s.tile_bytes = k.tile_bytes + (s.bytes - k.bytes) / k.tile_blocks;
      break;
    }
  }
  return s;
}

// The larger copies of an envelope kernel on a GPU of `sms` SMs: each scaled axis × envelope_factors, but a split:
// every split from one more up to one wave of the SMs (at most 16 × its own; none when the pairs alone fill a wave),
// so that the minimum over them is a suffix minimum along the fill of one wave; and a split-KV decode kernel's batch
// (split ≥ 2, one wave): every batch from one more sequence while the grid at the kernel's own split still fits the
// SMs once (weights/DECODE_SPLIT_RULE.md, B2): that launch holds the kernel's block for block in the same one wave,
// so it cannot finish sooner. None for an unsplit kernel (B1's copies into the next wave and across the unsplit
// kernels' waves failed the keep rule), nor ⌈f · b⌉ across many waves (weights/MONOTONE_ATTENTION_RULE.md, A).
std::vector<kernel> envelope_copies(const kernel& k, const envelope_axes& ax, int64_t sms) {
  std::vector<kernel> out;
  for (size_axis a : ax.scaled) {
    if (a == size_axis::batch) {
      const int64_t split = split_of(k);
      if (split < 2) continue;  // unsplit: no batch copies (B1's across the waves failed its keep rule)
      for (int64_t more = k.b + 1; more * k.hidden * split <= sms; ++more) out.push_back(batch_scaled(k, more));
      continue;
    }
    if (a != size_axis::split) {
      for (double f : envelope_factors) out.push_back(axis_scaled(k, a, f));
      continue;
    }
    const int64_t split = split_of(k), pairs = k.b * k.hidden;
    if (split < 1 || pairs > sms) continue;
    for (int64_t more = split + 1; more <= std::min(sms / pairs, 16 * split); ++more) out.push_back(split_scaled(k, more));
  }
  return out;
}

// The class of kernels the dominance minimum compares: everything but the ordered axes. A vector kernel's row (bytes
// and FLOPs per row) and tile; an attention kernel's dtypes, op, heads, KV heads, head dim and (decode) query length;
// a GEMM's dtype, b, N, K, weight bytes, activation quantisation and FLOPs per row (not its bytes, not linear in M;
// not its tile, the tile rule's choice for each M).
std::string envelope_key(const kernel& k, family f) {
  if (f == family::bmm || f == family::linear || f == family::gemm_tc16 || f == family::gemm_fp8) {
    char per[96];
    std::snprintf(per, sizeof per, "|%a|%a", k.flops / double(k.m), k.weight_bytes);
    return k.name + "|" + k.dtype + "|" + std::to_string(k.b) + "," + std::to_string(k.n) + "," +
           std::to_string(k.k) + "|" + k.act_quant + per;
  }
  if (f == family::attention_decode || f == family::attention_prefill)  // a prefill's query length is ordered
    return k.name + "|" + k.dtype + "|" + k.kv_dtype + "|" + k.op + "|" +
           (f == family::attention_decode ? std::to_string(k.m) : "") + "," + std::to_string(k.n) + "," +
           std::to_string(k.rows) + "," + std::to_string(k.hidden);
  char per[64];
  std::snprintf(per, sizeof per, "|%a|%a", k.bytes / double(k.rows), k.flops / double(k.rows));
  return k.name + "|" + k.dtype + "|" + k.op + "|" + std::to_string(k.hidden) + "|" + std::to_string(k.tile_elems) +
         per;
}

// out[i] = the least of out[j] over the kernels j of i's class at least as large as i on every ordered axis. One
// axis: a suffix minimum over the sizes; more: pairwise over the class's distinct size points.
void dominance_minimum(const std::vector<kernel_instance>& kernels, const std::vector<std::pair<family, size_t>>& slot,
                       std::vector<double>& out) {
  std::map<std::string, std::vector<size_t>> classes;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (slot[i].second == SIZE_MAX) continue;
    const envelope_axes* ax = envelope_axes_of(slot[i].first);
    if (!ax || !envelope_ordered(kernels[i].k, *ax)) continue;
    classes[std::string(family_name(slot[i].first)) + "|" + envelope_key(kernels[i].k, slot[i].first)].push_back(i);
  }
  for (const auto& [key, idx] : classes) {
    const envelope_axes& ax = *envelope_axes_of(slot[idx.front()].first);
    const auto point = [&](size_t i) {
      std::vector<int64_t> p;
      for (size_axis a : ax.ordered) p.push_back(axis_value(kernels[i].k, a));
      return p;
    };
    std::map<std::vector<int64_t>, double> points;  // size point → least forecast at it
    for (size_t i : idx) {
      auto [it, fresh] = points.try_emplace(point(i), out[i]);
      if (!fresh) it->second = std::min(it->second, out[i]);
    }
    std::map<std::vector<int64_t>, double> least;
    if (ax.ordered.size() == 1) {
      double m = points.rbegin()->second;
      for (auto it = points.rbegin(); it != points.rend(); ++it) least[it->first] = m = std::min(m, it->second);
    } else {
      for (const auto& [p, t] : points) {
        double m = t;
        for (auto q = points.lower_bound(p); q != points.end(); ++q) {  // from the first axis at p's on
          bool above = true;
          for (size_t a = 1; a < p.size() && above; ++a) above = q->first[a] >= p[a];
          if (above) m = std::min(m, q->second);
        }
        least[p] = m;
      }
    }
    for (size_t i : idx) out[i] = least.at(point(i));
  }
}

// Split element-wise tensors. PyTorch's TensorIterator runs a tensor whose last byte offset does not fit in an int32
// as several launches of at most 2^31 bytes each, every launch with the ordinary 512-element blocks (NVIDIA).
// The profiler records one launch's grid, so the tile rule (scripts/tiling/vec.lua) reproduces the measured
// convention: 2^s × the block for a tensor cut in 2^s pieces, with 1/2^s the blocks — a tile no launch runs. The
// MLP was fit to such kernels only where they were measured: fp32 tensors of 8–12 bytes per element on its
// training GPUs (dataset/test/elem.csv: 28–158 split rows per GPU, up to 4.3·10⁹ elements on the A100-PCIE-40GB;
// weights/<vendor>/elementwise/model.toml's `gpus`). Elsewhere the split tile is an extrapolation, and the MLP's
// answer to it is not monotone: on an H100 a bf16 add of 4000 × 2^20 elements (tile 2048) was priced 10.34 ms
// and one of 4200 × 2^20 (tile 4096) 9.44 ms; a fused fp32 AdamW step 24.45 ms at 2^31 parameters, 36.09 ms at
// 2.2·10⁹ and 43.00 ms at 4.3·10⁹ (weights/ACCURACY.md, "split element-wise tensors"). There a split kernel is
// priced as the largest launch it holds (tile_piece elements with the block tile_piece_elems, same row width
// where a row fits: a kernel the data's sizes and tiles cover) scaled by its elements — the pieces run one after
// another at the rate of one launch (NeuSight's tile model: time = waves × time per wave) — so the forecast is
// continuous at 2^31 bytes and linear in size above it. The piece takes the kernel's place in the forecast, its
// envelope included (the envelope's copies of the split tile are the same extrapolation).
// `gpu_trained`: the GPU is one of the element-wise family's training GPUs (looked up once per forecast).
bool split_by_piece(const kernel& k, bool gpu_trained, const train_convention& conv) {
  if (k.tile_piece <= 0 || k.tile_piece_elems <= 0) return false;
  const double numel = double(k.rows) * double(k.hidden), per = k.bytes / numel;
  const vector_convention& c = conv.of(family::elementwise);
  const bool measured = k.dtype == "fp32" && per >= c.bytes_min && per <= c.bytes_max && gpu_trained;
  return !measured && numel > double(k.tile_piece);
}

// The largest launch of a split kernel: rows of the kernel's width while one fits in a launch, else one row of a
// launch's elements; its FLOPs and bytes in proportion. `launches`: the kernel's elements over the piece's, what the
// piece's forecast is scaled by.
struct split_launch {
  kernel piece;
  double launches = 0;
};
split_launch split_piece(const kernel& k) {
  split_launch s{k, 0};
  kernel& p = s.piece;
  if (k.hidden <= k.tile_piece) p.rows = k.tile_piece / k.hidden;
  else p.rows = 1, p.hidden = k.tile_piece;
  const double piece_numel = double(p.rows) * double(p.hidden), numel = double(k.rows) * double(k.hidden);
  const double r = piece_numel / numel;
  p.flops = k.flops * r, p.bytes = k.bytes * r;
  p.tile_elems = k.tile_piece_elems, p.tile_piece = 0, p.tile_piece_elems = 0;
  s.launches = numel / piece_numel;
  return s;
}

// The training range of per-SM resources. A GPU with more memory bandwidth or DRAM capacity cannot run a kernel
// slower, but the fp32 families' MLPs read both per SM (log2(tile MB / per-SM GB/s), log2(W · tile MB / per-SM
// memory MB); tile_model.cpp) and extrapolate beyond their training GPUs' range: the H100 with its bandwidth doubled
// (25 → 51 GB/s per SM against at most 14.4 on the training GPUs) priced an fp32 GPT-2 Large inference (batch 4 ×
// 1024) 221 → 640 ms. Two envelopes were tried and not adopted (weights/MONOTONE_GPU_RULE.md): copies of every GPU
// at ÷1.25 / 1.5 / 2 of both (leave-one-GPU-out end to end 12.80 → 17.01 %: the T4's and P4's copies fell below the
// range), and one copy of an out-of-range GPU at the top of the range (variant 2: leave-one-GPU-out better, 12.80
// → 12.71 %, but not monotone across GPU files: the copy did not reach the size envelope's larger copies, and the
// batched MLP rounds a row differently in another batch). What is kept: a forecast on a GPU beyond the range of a
// family's training GPUs (the weights' training.gpus, which uncertainty() hands on) says so, and that its forecasts
// there may not be monotone in bandwidth or memory: scripts/neusight/uncertainty.lua range_warnings, the one rule of
// the training GPUs' range (its out-of-distribution check is the other use).

class neusight_predictor final : public predictor {
 public:
  explicit neusight_predictor(std::filesystem::path root) : root_(std::move(root)) {}
  neusight_predictor(const std::string& vendor, const tile_model& model, std::vector<std::string> trained_gpus) {
    cache_[vendor].emplace(model.fam, model);
    trained_gpus_[vendor][model.fam] = std::move(trained_gpus);
  }
  std::string name() const override { return "neusight"; }

  void memo_enable(bool on) override {
    memo_ = on;
    if (!on) features_memo_.clear(), outputs_memo_.clear();
  }
  void roofline_floor_set(std::function<double(const gpu_spec&)> floor_s) override { floor_ = std::move(floor_s); }
  void gemm_pieces_set(std::function<void(std::vector<kernel*>&, const gpu_spec&)> complete) override {
    pieces_ = std::move(complete);
  }
  void train_convention_set(const train_convention& conv) override {
    conv_ = conv;
    features_memo_.clear(), outputs_memo_.clear();  // features of another convention
  }
  void roofline_efficiency_set(std::map<std::string, double> by_family) override {
    efficiency_.clear();  // by family once, not a family-name string per fallback kernel
    for (const auto& [name, e] : by_family)
      if (const auto f = family_parse(name)) efficiency_[*f] = e;
  }

  // One MLP row per distinct feature input. The row key leaves the FLOPs out: they are not a feature (vector
  // kernels are seen with their family's training FLOPs, GEMMs by their dims; tile_model.h), so kernels that
  // differ only in FLOPs share one MLP evaluation and differ only by their own compute bound.
  std::vector<double> predict(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu) const override {
    std::vector<std::pair<size_t, double>> split;  // split element-wise tensors priced by their largest launch
                                                   // (split_by_piece): the kernel, its launches
    std::vector<kernel_instance> pieces;
    std::optional<bool> gpu_trained;  // the GPU among the element-wise family's training GPUs, asked once
    for (size_t i = 0; i < kernels.size(); ++i) {
      const kernel& k = kernels[i].k;
      if (k.kind != kernel_kind::elementwise || k.tile_piece <= 0 || k.seconds) continue;
      if (!gpu_trained) {
        const auto& trained = trained_gpus(gpu.vendor, family::elementwise);
        gpu_trained = std::find(trained.begin(), trained.end(), gpu.name) != trained.end();
      }
      if (!split_by_piece(k, *gpu_trained, conv_)) continue;
      if (pieces.empty()) pieces = kernels;
      split_launch s = split_piece(k);
      pieces[i].k = std::move(s.piece);
      split.emplace_back(i, s.launches);
    }
    if (split.empty()) return predict_tiles(kernels, gpu);
    std::vector<double> out = predict_tiles(pieces, gpu);
    for (const auto& [i, launches] : split) out[i] *= launches;
    return out;
  }

  // The kernels' forecasts, each no slower than its sub-additivity pieces (gemm_pieces) or its alternative tile
  // (tile_alternatives) and, within the forecast, than
  // the kernels of its class larger on every ordered axis (dominance_minimum), and never below its roofline floor.
  std::vector<double> predict_tiles(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu) const {
    std::vector<kernel_instance> all;
    std::vector<piece_use> uses;
    if (pieces_) gemm_pieces(kernels, gpu, all, uses);
    const size_t alternatives = uses.size();  // uses from here on: alternative tiles
    tile_alternatives(kernels, all, uses);
    std::vector<std::pair<family, size_t>> slot;
    std::vector<double> out = price(uses.empty() ? kernels : all, gpu, slot);
    switched_.assign(alternatives < uses.size() ? kernels.size() : 0, false);
    for (size_t j = 0; j < uses.size(); ++j) {
      const piece_use& u = uses[j];
      const double v = u.count * out[u.piece];
      if (v >= out[u.kernel]) continue;
      out[u.kernel] = v;
      if (j >= alternatives) switched_[u.kernel] = true;  // the alternative tile priced it (tiles_switched)
    }
    out.resize(kernels.size()), slot.resize(kernels.size());
    // and within the forecast: no slower than a kernel of the same class at least as large on every axis (the
    // factors' windows are not nested: 1 row looks at 2–16, 2 rows at 3–32)
    dominance_minimum(kernels, slot, out);
    // and never below the kernel's own roofline floor, max(FLOPs / peak, bytes / bandwidth) (roofline.h
    // roofline_floor_seconds, the floor figures.lua holds forecasts to). The tile model's base is min(peak, AI · bw)
    // with AI in FLOPs per GiB against bw in GB/s (the NeuSight convention its weights were trained in), 7.4 % above
    // the GPU's bandwidth, and the MLP's utilisation saturates near 1 on the largest streams; the envelope and the
    // dominance minimum carry a larger kernel's time to a smaller one but not its floor. Llama-3-8B bf16 decode on an
    // H100, batch 64 over 32768 cached tokens: each decode attention read its 8.59 GB at 3433 GB/s of the 3350.
    for (size_t i = 0; i < kernels.size(); ++i)
      if (slot[i].second != SIZE_MAX) out[i] = std::max(out[i], roofline_floor_seconds(kernels[i].k, gpu));
    return out;
  }

  struct piece_use {
    size_t kernel = 0, piece = 0;  // indices in the priced list (the kernels, then the pieces)
    double count = 0;              // how many such pieces the kernel is: its b
  };

  // The tile switch (weights/TILE_SWITCH_RULE.md): a GEMM whose tile rule names an alternative tile (an NVIDIA fp32
  // GEMM: the rule's tile for twice its rows in whole row bands, where it differs; scripts/tiling/gemm.lua) is also
  // priced as itself with that tile, appended to `all` (`kernels` first when it is empty), and takes the lesser (a use
  // of count 1).
  static void tile_alternatives(const std::vector<kernel_instance>& kernels, std::vector<kernel_instance>& all,
                                std::vector<piece_use>& uses) {
    for (size_t i = 0; i < kernels.size(); ++i) {
      const kernel& k = kernels[i].k;
      if (k.seconds || k.tile_alt_m < 1 || k.tile_alt_k < 1) continue;
      if (all.empty()) all = kernels;
      kernel_instance a = kernels[i];
      a.k.tile_m = k.tile_alt_m, a.k.tile_k = k.tile_alt_k, a.k.tile_split = k.tile_alt_split;
      a.k.tile_alt_m = a.k.tile_alt_k = 0, a.k.tile_alt_split = 1;
      uses.push_back({i, all.size(), 1.0});
      all.push_back(std::move(a));
    }
  }

  // `all`: `kernels`, then the one piece (1, m, n, k) of each distinct BMM of a sub-additive family; `uses`: which
  // kernel is how many of which.
  void gemm_pieces(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu, std::vector<kernel_instance>& all,
                   std::vector<piece_use>& uses) const {
    const auto dims = [](const kernel& k) {
      char wb[48];
      std::snprintf(wb, sizeof wb, "|%a", k.weight_bytes);
      return std::string(kernel_kind_name(k.kind)) + "|" + k.dtype + "|" + k.act_quant + "|" + std::to_string(k.b) +
             "," + std::to_string(k.m) + "," + std::to_string(k.n) + "," + std::to_string(k.k) + wb;
    };
    const auto untiled = [](kernel k) {
      k.tile_m = k.tile_k = k.tile_elems = 0, k.tile_split = 1, k.tile_kernel.clear();
      return k;
    };
    // the kernels.lua costs of each distinct shape (a kernel's own and its pieces'), asked of the session once
    std::map<std::string, size_t> costed_at;
    std::vector<kernel> costed;
    const auto shape = [&](const kernel& k) {
      auto [it, fresh] = costed_at.try_emplace(dims(k), costed.size());
      if (fresh) costed.push_back(untiled(k));
      return it->second;
    };
    struct pending {
      size_t kernel, whole, piece;
    };
    std::vector<pending> pend;
    std::map<std::string, size_t> first;  // a kernel's shape and costs → the first such kernel (its piece is theirs)
    std::vector<std::pair<size_t, size_t>> same;  // a kernel, the earlier one of its shape and costs
    for (size_t i = 0; i < kernels.size(); ++i) {
      const kernel& k = kernels[i].k;
      if (k.seconds || (k.kind != kernel_kind::gemm && k.kind != kernel_kind::bmm) || k.b < 2 || k.m < 1 || k.k < 1)
        continue;  // a single GEMM (b 1) has no piece
      const auto fam = family_of(k);
      if (!fam || !subadditive(*fam)) continue;
      char costs[64];
      std::snprintf(costs, sizeof costs, "|%a|%a", k.flops, k.bytes);
      if (auto [it, fresh] = first.try_emplace(dims(k) + costs, i); !fresh) {
        same.emplace_back(i, it->second);
        continue;
      }
      const size_t whole = shape(k);
      kernel p = k;  // the batch split: b single GEMMs
      p.b = 1;
      pend.push_back({i, whole, shape(p)});
    }
    if (pend.empty()) return;
    std::vector<kernel*> ks;
    for (kernel& c : costed) ks.push_back(&c);
    pieces_(ks, gpu);
    all = kernels;
    std::map<size_t, size_t> piece_of;  // a first kernel → its piece in `all`
    for (const pending& q : pend) {
      const kernel& k = kernels[q.kernel].k;
      const kernel &w = costed[q.whole], &c = costed[q.piece];
      kernel_instance p = kernels[q.kernel];
      p.k = c;
      p.k.flops = k.flops * (c.flops / w.flops), p.k.bytes = k.bytes * (c.bytes / w.bytes);
      p.k.weight_bytes = k.weight_bytes, p.k.act_quant = k.act_quant;
      piece_of[q.kernel] = all.size();
      uses.push_back({q.kernel, all.size(), double(k.b)});
      all.push_back(std::move(p));
    }
    for (const auto& [i, earlier] : same) uses.push_back({i, piece_of.at(earlier), double(kernels[i].k.b)});
  }

  std::vector<double> price(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu,
                            std::vector<std::pair<family, size_t>>& slot) const {
    std::vector<double> out(kernels.size(), 0.0);
    std::map<family, std::vector<tile_features>> batch;
    std::map<family, std::map<std::string, size_t>> index;  // shape key → row in batch
    slot.assign(kernels.size(), {family::bmm, SIZE_MAX});
    // an envelope kernel's row → the rows of its larger copies (each scaled axis × envelope_factors), evaluated in
    // the same batch
    std::map<family, std::map<size_t, std::vector<std::pair<size_t, double>>>> larger;  // (row, its compute seconds)
    // memo_: a row's features by GPU and row key; a family's MLP outputs by GPU and the whole batch (its row keys
    // in order) — not row by row: Eigen's product of one column may round differently in another batch.
    const std::string gpu_key = memo_ ? gpu_spec_key(gpu) + "|" : std::string();
    std::map<family, std::string> batch_key;
    const auto& models = models_for(gpu.vendor);
    // the features as the family's weights were trained on them: how they price a partial wave (tile_model.h)
    const auto share_of = [&](family f) {
      const auto m = models.find(f);
      return m == models.end() ? wave_share::fair_share : m->second.partial_wave;
    };
    for (size_t i = 0; i < kernels.size(); ++i) {
      const kernel& k = kernels[i].k;
      const auto fam = family_of(k);
      if (k.seconds || !fam) {
        out[i] = roofline_seconds(k, gpu);
        continue;
      }
      const std::string key = k.name + "|" + k.dtype + "|" + std::to_string(k.b) + "," + std::to_string(k.m) + "," +
                              std::to_string(k.n) + "," + std::to_string(k.k) + "," + std::to_string(k.rows) + "," +
                              std::to_string(k.hidden) + "|" + std::to_string(k.bytes) + "|" +
                              std::to_string(k.tile_m) + "x" + std::to_string(k.tile_k) + "x" +
                              std::to_string(k.tile_elems) + "/" + std::to_string(k.tile_split) + "|" + k.op + "|" +
                              std::to_string(k.tile_blocks) + "," + std::to_string(k.tile_flops) + "," +
                              std::to_string(k.tile_bytes) + "|" + k.act_quant;  // act_quant: the stage's features
      auto [it, fresh] = index[*fam].try_emplace(key, batch[*fam].size());
      if (fresh && memo_) {
        char flops[40];
        std::snprintf(flops, sizeof flops, "|%a", k.flops);  // the row's first kernel gives its features
        const std::string rkey = key + flops;
        auto f = features_memo_.find(gpu_key + rkey);
        if (f == features_memo_.end()) f = features_memo_.emplace(gpu_key + rkey, tile_features_compute(k, gpu, conv_, share_of(*fam))).first;
        batch[*fam].push_back(f->second);
        batch_key[*fam] += std::to_string(rkey.size()) + ":" + rkey;
      } else if (fresh) {
        batch[*fam].push_back(tile_features_compute(k, gpu, conv_, share_of(*fam)));
      }
      if (const envelope_axes* ax = envelope_axes_of(*fam);
          fresh && ax && !ax->scaled.empty() && envelope_scalable(k, *ax)) {  // GEMMs, prefill: no copies
        auto& rows = larger[*fam][it->second];
        const std::vector<kernel> copies = envelope_copies(k, *ax, gpu.num_sm);
        for (size_t c = 0; c < copies.size(); ++c) {
          rows.emplace_back(batch[*fam].size(), tile_compute_seconds(copies[c], gpu));
          batch[*fam].push_back(tile_features_compute(copies[c], gpu, conv_, share_of(*fam)));
          if (memo_) batch_key[*fam] += "|x" + std::to_string(c);  // the batch's rows, in order (outputs_memo_)
        }
      }
      slot[i] = {*fam, it->second};
    }
    std::map<family, Eigen::MatrixXf> outputs;
    std::optional<double> floor_s;  // the GPU's per-kernel floor, asked once a family falls back to the roofline
    warnings_.clear();
    for (const auto& [fam, rows] : batch) {
      auto m = models.find(fam);
      if (m == models.end() && family_transfer_features(fam)) {
        // No tensor-core or fused-attention measurements for this vendor (AMD's data has none): say so and use
        // the roofline over the fraction of it the family reaches on the GPUs that have data (no GPU reaches the
        // bare roofline: on its own it made an MI300X look 1.56x an H100 on GPT-3 for a 1.32x higher bf16 peak),
        // and never below the per-kernel floor (launch.lua floor_s: the tile model has learnt one, the roofline has
        // none, and a decode attention kernel at batch 1 came out at a fraction of a microsecond).
        const double e = fallback_efficiency(fam);
        if (!floor_s) floor_s = floor_ ? floor_(gpu) : 0.0;
        char eff[32], floor[32];
        std::snprintf(eff, sizeof eff, "%.3g", e);
        std::snprintf(floor, sizeof floor, "%.3g", *floor_s * 1e6);
        warnings_.push_back("no " + std::string(family_name(fam)) + " weights for " + gpu.vendor + " GPUs in " +
                            (root_ / gpu.vendor).generic_string() +
                            (e < 1 ? ": these kernels are priced by the roofline (peak of their dtype) over " +
                                         std::string(eff) + ", the fraction of it the family reaches on the GPUs "
                                         "measured (scripts/neusight/efficiency.lua), not the tile model"
                                   : ": these kernels are priced by the roofline (peak of their dtype), not the tile "
                                     "model") +
                            (*floor_s > 0 ? ", and at least " + std::string(floor) +
                                                " µs each (floor_s, scripts/neusight/launch.lua)"
                                          : std::string()));
        continue;
      }
      if (m == models.end())
        throw error("no " + std::string(family_name(fam)) + " weights for " + gpu.vendor + " GPUs in " +
                    (root_ / gpu.vendor).generic_string() + " (train them with `neusight train`)");
      if (!memo_) {
        outputs[fam] = m->second.outputs(rows);
        continue;
      }
      const std::string okey = gpu_key + std::string(family_name(fam)) + "|" + batch_key[fam];
      auto o = outputs_memo_.find(okey);
      if (o == outputs_memo_.end()) o = outputs_memo_.emplace(okey, m->second.outputs(rows)).first;
      outputs[fam] = o->second;
    }
    for (size_t i = 0; i < kernels.size(); ++i) {
      const auto [fam, row] = slot[i];
      if (row == SIZE_MAX) continue;
      const auto o = outputs.find(fam);
      if (o == outputs.end()) {  // no weights for this vendor (warned above)
        out[i] = std::max(roofline_seconds(kernels[i].k, gpu) / fallback_efficiency(fam), *floor_s);
        continue;
      }
      const tile_model& m = models.at(fam);
      const auto seconds = [&](size_t r, double compute_seconds) {
        tile_features f = batch[fam][r];
        f.compute_seconds = compute_seconds;
        return tile_seconds(f, o->second(0, int(r)), o->second(1, int(r)), o->second(2, int(r)), m.util_floor,
                            m.quant, m.min_seconds);
      };
      out[i] = seconds(row, tile_compute_seconds(kernels[i].k, gpu));  // this kernel's own FLOPs
      if (auto l = larger.find(fam); l != larger.end())
        if (auto r = l->second.find(row); r != l->second.end())
          for (const auto& [copy, compute_seconds] : r->second) out[i] = std::min(out[i], seconds(copy, compute_seconds));
    }
    return out;
  }
  std::vector<std::string> warnings() const override { return warnings_; }
  std::vector<bool> tiles_switched() const override { return switched_; }
  bool models_family(const std::string& vendor, const std::string& name) const override {
    const auto f = family_parse(name);
    return f && models_for(vendor).count(*f) > 0;
  }
  uncertainty_source uncertainty(const std::string& vendor) const override {
    auto it = uncertainty_.find(vendor);  // asked once per forecast: look on disk once per vendor
    if (it != uncertainty_.end()) return it->second;
    uncertainty_source found;
    for (const auto& v : {vendor, std::string("nvidia")})
      if (auto p = root_ / v / "uncertainty.toml"; found.table.empty() && std::filesystem::exists(p)) found.table = p;
    models_for(vendor);  // reads the manifests: their training GPUs
    if (const auto v = trained_gpus_.find(vendor); v != trained_gpus_.end())
      for (const auto& [f, gpus] : v->second)
        if (!gpus.empty()) found.trained_gpus.emplace(std::string(family_name(f)), gpus);
    if (const auto v = trained_range_.find(vendor); v != trained_range_.end())
      for (const auto& [f, range] : v->second)
        if (!range.empty()) found.trained_range.emplace(std::string(family_name(f)), range);
    return uncertainty_[vendor] = std::move(found);
  }

 private:
  // Loads every family folder present under <root>/<vendor>/ once.
  const std::map<family, tile_model>& models_for(const std::string& vendor) const {
    auto it = cache_.find(vendor);
    if (it != cache_.end()) return it->second;
    std::map<family, tile_model> models;
    for (family f : families) {
      const auto dir = root_ / vendor / std::string(family_name(f));
      if (!std::filesystem::exists(dir / "model.toml")) continue;
      weights_provenance prov;
      tile_model m = weights_load(dir, &prov);
      if (m.fam != f)
        throw error((dir / "model.toml").generic_string() + ": weights of family '" + std::string(family_name(m.fam)) +
                    "' in the '" + std::string(family_name(f)) + "' folder");
      if (m.vendor != vendor)  // the features differ by vendor (tile_model.h)
        throw error((dir / "model.toml").generic_string() + ": weights trained on " + m.vendor + " GPUs in the " +
                    vendor + " folder");
      trained_gpus_[vendor][f] = std::move(prov.gpus);
      trained_range_[vendor][f] = std::move(prov.range);
      models.emplace(f, std::move(m));
    }
    return cache_[vendor] = std::move(models);
  }

  // The GPUs a family's weights were trained on (model.toml's `gpus`; none for a model given directly).
  const std::vector<std::string>& trained_gpus(const std::string& vendor, family f) const {
    static const std::vector<std::string> none;
    models_for(vendor);
    const auto v = trained_gpus_.find(vendor);
    if (v == trained_gpus_.end()) return none;
    const auto g = v->second.find(f);
    return g == v->second.end() ? none : g->second;
  }

  std::filesystem::path root_;
  std::function<void(std::vector<kernel*>&, const gpu_spec&)> pieces_;  // gemm_pieces_set
  bool memo_ = true;
  std::map<family, double> efficiency_;  // fraction of the roofline by family (roofline_efficiency_set)
  std::function<double(const gpu_spec&)> floor_;  // a roofline-priced kernel's least seconds (roofline_floor_set)
  train_convention conv_;  // the vector families' training convention (train_convention_set)
  double fallback_efficiency(family f) const {
    const auto it = efficiency_.find(f);
    return it == efficiency_.end() ? 1.0 : it->second;
  }
  mutable std::map<std::string, tile_features> features_memo_;
  mutable std::map<std::string, Eigen::MatrixXf> outputs_memo_;
  mutable std::map<std::string, std::map<family, tile_model>> cache_;
  mutable std::map<std::string, std::map<family, std::vector<std::string>>> trained_gpus_;
  mutable std::map<std::string, std::map<family, std::map<std::string, double>>> trained_range_;  // [training.range]
  mutable std::vector<std::string> warnings_;
  mutable std::vector<bool> switched_;  // the last predict()'s kernels its alternative tile priced (tiles_switched)
  mutable std::map<std::string, uncertainty_source> uncertainty_;
};

}  // namespace

std::unique_ptr<predictor> neusight_predictor_make(const std::filesystem::path& weights_root) {
  return std::make_unique<neusight_predictor>(weights_root);
}

std::unique_ptr<predictor> neusight_predictor_make(const std::string& vendor, const tile_model& model,
                                                   std::vector<std::string> trained_gpus) {
  return std::make_unique<neusight_predictor>(vendor, model, std::move(trained_gpus));
}

}  // namespace ns
