// engine/core/neusight_predictor.cpp — batches a graph's kernels per family into one MLP evaluation each,
// deduplicated by shape (a 96-layer model has only tens of distinct kernels).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/roofline.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "core/weights.h"

namespace ns {

namespace {

// Vector kernels (element-wise, softmax, layer norm) are priced no slower than the same kernel with 1.125 to 16
// times its rows (envelope_factors): more work cannot take less time. The utilisation MLP is not monotone in size off its training GPUs:
// on an H100 a 768-wide mul of 49–66 rows (blocks just under one wave of 132 SMs, per-SM bandwidth beyond the training
// range) came back up to 13× its neighbours (333 µs for 50 k fp32 elements against 25 µs at 77 rows).
constexpr std::array<double, 8> envelope_factors = {1.125, 1.25, 1.5, 2, 3, 4, 8, 16};

bool envelope_family(family f) {
  return f == family::elementwise || f == family::softmax || f == family::layernorm;
}

// `k` with ⌈factor · rows⌉ rows, and its FLOPs and bytes with them.
kernel rows_scaled(const kernel& k, double factor) {
  kernel s = k;
  s.rows = int64_t(std::ceil(double(k.rows) * factor));
  const double r = double(s.rows) / double(k.rows);
  s.flops = k.flops * r;
  s.bytes = k.bytes * r;
  return s;
}

class neusight_predictor final : public predictor {
 public:
  explicit neusight_predictor(std::filesystem::path root) : root_(std::move(root)) {}
  neusight_predictor(const std::string& vendor, const tile_model& model) { cache_[vendor].emplace(model.fam, model); }
  std::string name() const override { return "neusight"; }

  void memo_enable(bool on) override {
    memo_ = on;
    if (!on) features_memo_.clear(), outputs_memo_.clear();
  }

  // One MLP row per distinct feature input. The row key leaves the FLOPs out: they are not a feature (vector
  // kernels are seen with their family's training FLOPs, GEMMs by their dims; tile_model.h), so kernels that
  // differ only in FLOPs share one MLP evaluation and differ only by their own compute bound.
  std::vector<double> predict(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu) const override {
    std::vector<double> out(kernels.size(), 0.0);
    std::map<family, std::vector<tile_features>> batch;
    std::map<family, std::map<std::string, size_t>> index;  // shape key → row in batch
    std::vector<std::pair<family, size_t>> slot(kernels.size(), {family::bmm, SIZE_MAX});
    // a vector kernel's row → the rows of its larger copies (envelope_factors), evaluated in the same batch
    std::map<family, std::map<size_t, std::vector<size_t>>> larger;
    // memo_: a row's features by GPU and row key; a family's MLP outputs by GPU and the whole batch (its row keys
    // in order) — not row by row: Eigen's product of one column may round differently in another batch.
    const std::string gpu_key = memo_ ? gpu_spec_key(gpu) + "|" : std::string();
    std::map<family, std::string> batch_key;
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
        if (f == features_memo_.end()) f = features_memo_.emplace(gpu_key + rkey, tile_features_compute(k, gpu)).first;
        batch[*fam].push_back(f->second);
        batch_key[*fam] += std::to_string(rkey.size()) + ":" + rkey;
      } else if (fresh) {
        batch[*fam].push_back(tile_features_compute(k, gpu));
      }
      if (fresh && envelope_family(*fam) && k.rows > 0 && k.rows < (int64_t(1) << 58)) {  // 16 · rows fits
        auto& rows = larger[*fam][it->second];
        for (size_t d = 0; d < envelope_factors.size(); ++d) {
          rows.push_back(batch[*fam].size());
          batch[*fam].push_back(tile_features_compute(rows_scaled(k, envelope_factors[d]), gpu));
          if (memo_) batch_key[*fam] += "|x" + std::to_string(d);  // the batch's rows, in order (outputs_memo_)
        }
      }
      slot[i] = {*fam, it->second};
    }
    const auto& models = models_for(gpu.vendor);
    std::map<family, Eigen::MatrixXf> outputs;
    warnings_.clear();
    for (const auto& [fam, rows] : batch) {
      auto m = models.find(fam);
      if (m == models.end() && family_transfer_features(fam)) {
        // No tensor-core or fused-attention measurements for this vendor (AMD's data has none): say so and use
        // the roofline.
        warnings_.push_back("no " + std::string(family_name(fam)) + " weights for " + gpu.vendor + " GPUs in " +
                            (root_ / gpu.vendor).generic_string() +
                            ": these kernels are priced by the roofline (peak of their dtype), not the tile model");
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
        out[i] = roofline_seconds(kernels[i].k, gpu);
        continue;
      }
      const tile_model& m = models.at(fam);
      const auto seconds = [&](size_t r, double compute_seconds) {
        tile_features f = batch[fam][r];
        f.compute_seconds = compute_seconds;
        return tile_seconds(f, o->second(0, int(r)), o->second(1, int(r)), o->second(2, int(r)), m.util_floor,
                            m.quant);
      };
      out[i] = seconds(row, tile_compute_seconds(kernels[i].k, gpu));  // this kernel's own FLOPs
      if (auto l = larger.find(fam); l != larger.end())
        if (auto r = l->second.find(row); r != l->second.end())
          for (size_t d = 0; d < r->second.size(); ++d)
            out[i] = std::min(out[i], seconds(r->second[d], tile_compute_seconds(
                                                               rows_scaled(kernels[i].k, envelope_factors[d]), gpu)));
    }
    // and within the graph: a vector kernel is no slower than one with more rows and the same row (the factors'
    // windows are not nested: 1 row looks at 2–16, 2 rows at 3–32)
    std::map<std::string, std::vector<size_t>> same_row;
    for (size_t i = 0; i < kernels.size(); ++i) {
      const kernel& k = kernels[i].k;
      if (slot[i].second == SIZE_MAX || !envelope_family(slot[i].first) || k.rows <= 0) continue;
      char per[64];
      std::snprintf(per, sizeof per, "|%a|%a", k.bytes / double(k.rows), k.flops / double(k.rows));
      same_row[k.name + "|" + k.dtype + "|" + k.op + "|" + std::to_string(k.hidden) + "|" +
               std::to_string(k.tile_elems) + per].push_back(i);
    }
    for (auto& [key, idx] : same_row) {
      std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return kernels[a].k.rows > kernels[b].k.rows; });
      double least = out[idx.front()];
      for (size_t i : idx) least = out[i] = std::min(out[i], least);
    }
    return out;
  }
  std::vector<std::string> warnings() const override { return warnings_; }
  bool models_family(const std::string& vendor, const std::string& name) const override {
    const auto f = family_parse(name);
    return f && models_for(vendor).count(*f) > 0;
  }
  std::filesystem::path uncertainty_file(const std::string& vendor) const override {
    auto it = uncertainty_files_.find(vendor);  // asked once per forecast: look on disk once per vendor
    if (it != uncertainty_files_.end()) return it->second;
    std::filesystem::path found;
    for (const auto& v : {vendor, std::string("nvidia")})
      if (auto p = root_ / v / "uncertainty.toml"; found.empty() && std::filesystem::exists(p)) found = p;
    return uncertainty_files_[vendor] = found;
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
      tile_model m = weights_load(dir);
      if (m.fam != f)
        throw error((dir / "model.toml").generic_string() + ": weights of family '" + std::string(family_name(m.fam)) +
                    "' in the '" + std::string(family_name(f)) + "' folder");
      if (m.vendor != vendor)  // the features differ by vendor (tile_model.h)
        throw error((dir / "model.toml").generic_string() + ": weights trained on " + m.vendor + " GPUs in the " +
                    vendor + " folder");
      models.emplace(f, std::move(m));
    }
    return cache_[vendor] = std::move(models);
  }

  std::filesystem::path root_;
  bool memo_ = true;
  mutable std::map<std::string, tile_features> features_memo_;
  mutable std::map<std::string, Eigen::MatrixXf> outputs_memo_;
  mutable std::map<std::string, std::map<family, tile_model>> cache_;
  mutable std::vector<std::string> warnings_;
  mutable std::map<std::string, std::filesystem::path> uncertainty_files_;
};

}  // namespace

std::unique_ptr<predictor> neusight_predictor_make(const std::filesystem::path& weights_root) {
  return std::make_unique<neusight_predictor>(weights_root);
}

std::unique_ptr<predictor> neusight_predictor_make(const std::string& vendor, const tile_model& model) {
  return std::make_unique<neusight_predictor>(vendor, model);
}

}  // namespace ns
