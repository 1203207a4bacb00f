// engine/ingest/dataset.cpp — reading the micro-benchmark CSVs. FLOPs and bytes per row follow the data
// collector's own accounting (count_ops_mem: binary 12 B, unary/ln/softmax 8 B per element in fp32).
#include "ingest/dataset.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "ingest/csv.h"
#include "core/roofline.h"
#include "core/text.h"

namespace ns {
namespace fs = std::filesystem;

namespace {
const std::set<std::string> binary_ops = {"add", "sub", "mul", "div", "pow"};
const std::set<std::string> unary_ops = {"addu", "subu", "mulu", "divu", "powu", "tanh", "gelu", "relu"};

// The dtype (fp32, tf32, fp16, bf16, fp8) a spelling names in any convention a CSV may have taken it from (PyTorch's
// torch.bfloat16, AIConfigurator's bfloat16, scripts/collect's bf16, any case), "" for none. The files' own
// spellings are fixed: scripts/collect writes Dtype as fp32|tf32|fp16|bf16|fp8 (its --dtypes, scripts/collect/README.md)
// and AIConfigurator its dtype columns as float16|bfloat16|fp8 (../shared/data/aiconfigurator); a value that names
// one of these dtypes in another spelling is an error at its row (dtype_spelling_check), never a row read or skipped
// as something else.
std::string dtype_named(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (v.rfind("torch.", 0) == 0) v = v.substr(6);
  if (v == "fp32" || v == "float32" || v == "float") return "fp32";
  if (v == "tf32" || v == "tensorfloat32") return "tf32";
  if (v == "fp16" || v == "float16" || v == "half") return "fp16";
  if (v == "bf16" || v == "bfloat16") return "bf16";
  if (v == "fp8" || v == "float8" || v == "float8_e4m3fn" || v == "e4m3") return "fp8";
  return "";
}

// AIConfigurator's spelling of each dtype its files hold (fp32 and tf32: none of its files has them).
const char* aiconfigurator_spelling(const std::string& dtype) {
  return dtype == "fp16" ? "float16" : dtype == "bf16" ? "bfloat16" : dtype == "fp8" ? "fp8" : nullptr;
}

// Refuses a value of dtype column `col` at `where` that names a dtype in a spelling other than the file's (`aic`:
// an AIConfigurator file, else one of scripts/collect's); a value naming none (fp8_block, nvfp4) is the caller's.
void dtype_spelling_check(const std::string& v, const std::string& where, const char* col, bool aic) {
  const std::string dtype = dtype_named(v);
  if (dtype.empty()) return;
  const char* own = aic ? aiconfigurator_spelling(dtype) : dtype.c_str();
  if (!own || v == own) return;  // own: none for an AIConfigurator fp32 or tf32, which the caller skips as not modelled
  throw error(where + ": column '" + col + "' spells " + dtype + " as '" + v + "'; " +
              (aic ? "AIConfigurator's files write '" + std::string(own) + "' (float16, bfloat16 or fp8)"
                   : "scripts/collect writes '" + dtype + "' (fp32, tf32, fp16, bf16 or fp8)"));
}

// Decimal numbers only (std::stod also reads hex such as 0x100 and "inf"); a dimension is at most 2^31, so that
// products of two (B * M) stay inside an int64.
bool decimal_number(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789+-.eE") == std::string::npos;
}

int64_t to_int(const std::string& s, const std::string& where, const char* col) {
  try {
    size_t used = 0;
    const double v = decimal_number(s) ? std::stod(s, &used) : NAN;
    if (used == s.size() && v == std::floor(v) && std::fabs(v) <= double(int64_t(1) << 31)) return int64_t(v);
  } catch (const std::exception&) {
  }
  throw error(where + ": column '" + col + "' must be an integer of at most 2^31 (got '" + s + "')");
}

// A latency above 1e7 ms (close to three hours) for one kernel is a unit slip or an overflow, not a measurement.
double to_double(const std::string& s, const std::string& where, const char* col) {
  try {
    size_t used = 0;
    const double v = decimal_number(s) ? std::stod(s, &used) : NAN;
    if (used == s.size() && std::isfinite(v) && std::fabs(v) <= 1e7) return v;
  } catch (const std::exception&) {
  }
  throw error(where + ": column '" + col + "' must be a number of at most 1e7 (got '" + s + "')");
}

std::vector<std::string> csv_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  text_inputs_once once;  // a file read twice would count its rows twice (and land in train and validation splits)
  for (const auto& p : paths) {
    if (fs::is_directory(p)) {
      std::vector<std::string> found;
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.path().extension() == ".csv") found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      for (const auto& f : found) once.add(f, p);
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(p)) {
      once.add(p, p);
      files.push_back(p);  // csv_load refuses what is not a regular file (a FIFO, a device) without reading it
    } else {
      throw error(p + ": no such file or directory");
    }
  }
  return files;
}
// Counts a skipped row under `why`, keeping where the first one was.
void skip_row(bench_data& d, const std::string& why, const std::string& where) {
  if (d.skipped[why]++ == 0 && !where.empty()) d.skipped_first[why] = where;
}

// The filters every reader applies once it knows a row's family: the requested family, a known device, no
// excluded GPU. The GPU's index in d.gpus, or nullopt with the skip reason counted.
template <class Resolve>
auto row_admit(bench_data& d, const std::string& where, Resolve& resolve, const std::set<std::string>& excluded,
               std::optional<family> only, family fam, const std::string& device) -> decltype(resolve(device)) {
  if (only && fam != *only) {
    skip_row(d, "family " + std::string(family_name(fam)) + " not requested", where);
    return std::nullopt;
  }
  const auto gi = resolve(device);
  if (!gi) {
    if (std::find(d.unknown_devices.begin(), d.unknown_devices.end(), device) == d.unknown_devices.end())
      d.unknown_devices.push_back(device);
    skip_row(d, "unknown device '" + device + "'", where);
    return std::nullopt;
  }
  if (excluded.count(d.gpus[*gi].name)) {
    skip_row(d, "excluded GPU " + d.gpus[*gi].name, where);
    return std::nullopt;
  }
  return gi;
}

// The rows of AIConfigurator's CSVs (../shared/data/aiconfigurator/README.md) share the device, latency
// (ms per call) and kernel_source columns. `make` reads one row into the kernel (kind, dtype, dims, op) and
// returns a skip reason for rows we do not model ("" to keep it); family filter, device resolution and GPU
// exclusion then apply as for the NeuSight rows, and after them `admit`'s reason for a modelled row this reading
// does not take ("" to keep it), so that a row of a family not requested is counted under that family whatever else
// is said of it. FLOPs and bytes come from neusight.kernels (bench_load's `cost`).
template <class Resolve, class Make, class Admit>
void aiconfigurator_load(const csv_table& t, bench_data& d, Resolve& resolve, const std::set<std::string>& excluded,
                         std::optional<family> only, Make make, Admit admit) {
  const size_t c_dev = t.column("device"), c_lat = t.column("latency");
  const size_t c_src = t.has_column("kernel_source") ? t.column("kernel_source") : SIZE_MAX;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& row = t.rows[i];
    bench_row r;
    r.where = t.where(i);
    if (const std::string why = make(row, r); !why.empty()) {
      skip_row(d, why, r.where);
      continue;
    }
    const auto fam = family_of(r.k);
    const auto gi = row_admit(d, r.where, resolve, excluded, only, *fam, row[c_dev]);
    if (!gi) continue;
    if (const std::string why = admit(r); !why.empty()) {
      skip_row(d, why, r.where);
      continue;
    }
    r.device = row[c_dev];
    r.fam = *fam;
    r.latency_ms = to_double(row[c_lat], r.where, "latency");
    if (c_src != SIZE_MAX) r.kernel_name = row[c_src];
    if (!(r.latency_ms > 0)) {
      skip_row(d, "non-positive latency or empty shape", r.where);
      continue;
    }
    r.gpu_index = *gi;
    d.rows.push_back(std::move(r));
  }
}

// gemm.csv: Y[m,n] = X[m,k]·W[n,k]ᵀ. In our convention (Linear T, I, O) that is m = T tokens, n = k
// in-features (the reduction), k = n out-features. Bytes count every operand and the output once at the
// operand's element size, as neusight.kernels' linear() does. fp8_block and nvfp4 are not modelled yet.
template <class Resolve>
void aiconfigurator_gemm_load(const csv_table& t, bench_data& d, Resolve& resolve, const std::set<std::string>& excluded,
                              std::optional<family> only) {
  const size_t c_dt = t.column("gemm_dtype"), c_m = t.column("m"), c_n = t.column("n"), c_k = t.column("k");
  aiconfigurator_load(t, d, resolve, excluded, only, [&](const std::vector<std::string>& row, bench_row& r) {
    const std::string& dt = row[c_dt];
    dtype_spelling_check(dt, r.where, "gemm_dtype", true);
    // the file's own spelling (checked above) of one of our dtypes, named as ours; fp32 and tf32, which no
    // AIConfigurator file holds, and fp8_block or nvfp4 (no dtype of ours) are not modelled
    const std::string dtype = dtype_named(dt);
    if (dtype.empty() || dtype == "fp32" || dtype == "tf32") return "gemm_dtype '" + dt + "' is not modelled";
    kernel& k = r.k;
    k.kind = kernel_kind::gemm, k.name = "Linear", k.dtype = dtype, k.b = 1;
    k.m = to_int(row[c_m], r.where, "m");
    k.n = to_int(row[c_k], r.where, "k");
    k.k = to_int(row[c_n], r.where, "n");
    if (k.m < 1 || k.n < 1 || k.k < 1) throw error(r.where + ": m, n and k must be >= 1");
    // fp8 rows: vLLM's CutlassFP8ScaledMMLinearKernel after its dynamic per-tensor activation quantisation, timed
    // with it (scripts/collect/bench.py does the same)
    if (k.dtype == "fp8") k.act_quant = "dynamic_tensor";
    r.op = "gemm";
    return std::string();
  }, [](const bench_row&) { return std::string(); });
}

// context_attention.csv (prefill: causal attention over isl tokens) and generation_attention.csv (decode: isl = 1
// new token over a cache of step tokens, key length isl + step). Compute in bfloat16 or float16 with the KV cache in
// the same dtype, or with a KV cache in fp8 (1 byte per K/V element), read only for `use` evaluate (the shipped
// weights never trained on it; eval kernels scores it in a cell of its own, bench_row::kv_cache) as the kernel a
// forecast with --kv-dtype fp8 builds: decode reads K and V from the cache at 1 byte (neusight.kernels attention(…,
// kv_dtype), Q, O and the FLOPs at the compute dtype: decode_attention's attrs.kv_dtype), prefill attends over the
// prompt's K and V at the compute dtype whatever the cache (ops/sdpa.lua takes no kv_dtype; the cache write is a
// kernel of its own), so its kernel is the 16-bit cache's (the measured kernels read the prompt's K/V from the fp8
// paged cache, and on the L40S and RTX PRO 6000 are another library's: FlashInfer, where the bf16 rows are
// FlashAttention-2). Not modelled yet, counted: fp8 compute, a sliding window, beams.
template <class Resolve>
void aiconfigurator_attention_load(const csv_table& t, bench_data& d, Resolve& resolve,
                                   const std::set<std::string>& excluded, std::optional<family> only, bench_use use) {
  const size_t c_op = t.column("op_name"), c_b = t.column("batch_size"), c_isl = t.column("isl");
  const size_t c_h = t.column("num_heads"), c_kvh = t.column("num_key_value_heads"), c_d = t.column("head_dim");
  const size_t c_step = t.column("step"), c_adt = t.column("attn_dtype"), c_kvdt = t.column("kv_cache_dtype");
  const size_t c_beam = t.has_column("beam_width") ? t.column("beam_width") : SIZE_MAX;
  const size_t c_win = t.has_column("window_size") ? t.column("window_size") : SIZE_MAX;
  aiconfigurator_load(t, d, resolve, excluded, only, [&](const std::vector<std::string>& row, bench_row& r) {
    const std::string& op = row[c_op];
    if (op != "context_attention" && op != "generation_attention") return "op_name '" + op + "' is not an attention kernel";
    // bfloat16 (the aiconfigurator data) or float16 (scripts/collect's fp16 rows: the same tensor-core rate and
    // element size, costed at the GPU's fp16 peak as a forecast of an fp16 model is), compute and KV cache alike.
    const std::string& adt = row[c_adt];
    const std::string& kvdt = row[c_kvdt];
    dtype_spelling_check(adt, r.where, "attn_dtype", true);
    dtype_spelling_check(kvdt, r.where, "kv_cache_dtype", true);
    // each the file's own spelling (checked above) named as ours; fp32 and tf32 compute (no AIConfigurator file
    // holds them) are not modelled below, as a value that names none of our dtypes
    const std::string a = dtype_named(adt), kv = dtype_named(kvdt);
    const bool half = a == "bf16" || a == "fp16";
    const bool prefill = op == "context_attention", fp8_cache = half && kv == "fp8";
    // the family is the op's: a row of a family not requested is counted as that, whatever below is not modelled
    // in it, as every reading counts it (row_admit)
    if (const family fam = prefill ? family::attention_prefill : family::attention_decode; only && fam != *only)
      return "family " + std::string(family_name(fam)) + " not requested";
    if (a == "fp8") return std::string("attention with fp8 compute (attn_dtype fp8) is not modelled");
    if (!half || (kv != a && kv != "fp8"))
      return "attention in attn_dtype '" + adt + "' with kv_cache_dtype '" + kvdt +
             "' is not modelled (bfloat16 or float16 for both, or an fp8 cache in decode)";
    // a training read skips every fp8-cache row under that one reason, window or not (the `admit` below, after the
    // family filter)
    const bool train_skips = fp8_cache && use == bench_use::train;
    if (!train_skips && c_win != SIZE_MAX && to_int(row[c_win], r.where, "window_size") != 0)
      return std::string("sliding-window attention is not modelled");
    if (!train_skips && c_beam != SIZE_MAX && to_int(row[c_beam], r.where, "beam_width") != 1)
      return std::string("beam search attention is not modelled");
    kernel& k = r.k;
    k.kind = kernel_kind::attention, k.dtype = a;
    if (fp8_cache) {
      r.kv_cache = "fp8";
      if (!prefill) k.kv_dtype = "fp8";  // K and V read at 1 byte (bench_load's `cost`: attention(…, kv_dtype))
    }
    k.op = prefill ? "causal" : "decode";
    k.b = to_int(row[c_b], r.where, "batch_size");
    k.m = to_int(row[c_isl], r.where, "isl");
    k.k = k.m + to_int(row[c_step], r.where, "step");
    k.n = to_int(row[c_d], r.where, "head_dim");
    k.rows = to_int(row[c_h], r.where, "num_heads");
    k.hidden = to_int(row[c_kvh], r.where, "num_key_value_heads");
    if (k.b < 1 || k.m < 1 || k.n < 1 || k.rows < 1 || k.hidden < 1 || k.rows % k.hidden != 0)
      throw error(r.where + ": batch, isl, head_dim and heads must be >= 1 and heads a multiple of kv heads");
    r.op = op;
    return std::string();
  }, [&](const bench_row& r) {
    // after the family filter: a row of a family not requested is counted as that, not as this
    if (r.kv_cache == "fp8" && use == bench_use::train)
      return std::string(r.k.op == "causal" ? "prefill" : "decode") +
             " attention over an fp8 KV cache is never trained on (the shipped weights saw 16-bit caches only; eval "
             "kernels scores these rows)";
    return std::string();
  });
}
}  // namespace

std::optional<family> bench_family(const std::string& op) {
  if (op == "bmm") return family::bmm;
  if (op == "linear") return family::linear;
  if (op == "softmax") return family::softmax;
  if (op == "ln") return family::layernorm;
  if (binary_ops.count(op) || unary_ops.count(op)) return family::elementwise;
  return std::nullopt;
}

namespace {
// The dtypes a vector (element-wise, softmax, layer-norm) row may be in: those scripts/collect measures them in
// (scripts/collect/README.md --dtypes: element-wise, softmax, layer norm fp32/fp16/bf16; tf32 and fp8 are GEMM
// dtypes). The one list: the row check and its message read it.
const std::vector<std::string>& vector_row_dtypes() {
  static const std::vector<std::string> names = {"fp32", "fp16", "bf16"};
  return names;
}

// What bench_load does per CSV file and bench_parse for one text: the three row formats, device resolution
// (memoised per reader), filters and skip counts. Rows hold their GPU's index while d.gpus grows; finish() points
// them into d.gpus.
struct bench_reader {
  bench_data& d;
  const bench_device_resolver& lookup;
  std::optional<family> only;
  bench_use use;  // no default: every reader says what its rows are read for
  std::set<std::string> excluded;
  std::map<std::string, std::optional<size_t>> device_index;  // CSV device → index in d.gpus

  std::optional<size_t> operator()(const std::string& device) {
    auto it = device_index.find(device);
    if (it != device_index.end()) return it->second;
    std::optional<size_t> idx;
    if (const std::optional<gpu_spec> g = lookup(device)) {
      for (size_t i = 0; i < d.gpus.size() && !idx; ++i)
        if (d.gpus[i].name == g->name) idx = i;
      if (!idx) d.gpus.push_back(*g), idx = d.gpus.size() - 1;
    }
    return device_index[device] = idx;
  }

  void read(const csv_table& t);
  void read_rows(const csv_table& t);
  void finish() {
    for (auto& r : d.rows) r.gpu = &d.gpus[r.gpu_index];
  }
};

void bench_reader::read(const csv_table& t) {
  // a table marked synthetic (convert.py's Synthetic column, set on every row of such a run): its rows are counted
  const size_t rows_before = d.rows.size();
  read_rows(t);
  if (d.rows.size() == rows_before || !t.has_column("Synthetic")) return;  // only tables whose rows are read count
  const size_t c = t.column("Synthetic");
  for (size_t i = 0; i < t.rows.size(); ++i)
    if (!t.rows[i][c].empty() && t.rows[i][c] != "0" && t.rows[i][c] != "false") {
      if (d.synthetic_first.empty()) d.synthetic_note = t.rows[i][c], d.synthetic_first = t.where(i);
      d.synthetic_rows += d.rows.size() - rows_before;
      return;
    }
}

void bench_reader::read_rows(const csv_table& t) {
  auto& resolve = *this;
  if (t.has_column("gemm_dtype")) {
    aiconfigurator_gemm_load(t, d, resolve, excluded, only);
  } else if (t.has_column("isl") && t.has_column("step") && t.has_column("num_key_value_heads")) {
    aiconfigurator_attention_load(t, d, resolve, excluded, only, use);
  } else if (t.has_column("nccl_dtype") && t.has_column("message_size")) {
    // AIConfigurator's collective measurements (nccl.csv beside its gemm and attention files): no kernel family
    // (collectives are priced by scripts/neusight/collectives.lua). Counted as skipped, so that a device folder's
    // *.csv reads whole (it was "missing column 'OPName'").
    for (size_t i = 0; i < t.rows.size(); ++i)
      skip_row(d, "AIConfigurator NCCL collective rows (nccl.csv) have no kernel family: collectives are priced by "
                  "scripts/neusight/collectives.lua, not a kernel predictor", t.where(i));
  } else {
    const size_t c_op = t.column("OPName"), c_dev = t.column("Device"), c_name = t.column("Kernel Name");
    const size_t c_lat = t.has_column("Latency") ? t.column("Latency") : t.column("Latency (ms)");
    const size_t c_gx = t.column("Grid x"), c_gy = t.column("Grid y"), c_gz = t.column("Grid z");
    // Optional Dtype column (scripts/collect writes it for rows not in fp32); absent, the rows are fp32 as in
    // the shared data. A GEMM in a tensor-core dtype belongs to the tensor-core families, as in family_of.
    const size_t c_dtype = t.has_column("Dtype") ? t.column("Dtype") : SIZE_MAX;
    for (size_t i = 0; i < t.rows.size(); ++i) {
      const auto& row = t.rows[i];
      const std::string& op = row[c_op];
      auto fam = bench_family(op);
      if (!fam) {
        skip_row(d, "OPName '" + op + "' has no kernel family", t.where(i));
        continue;
      }
      const bool gemm = *fam == family::bmm || *fam == family::linear;
      const std::string dtype = c_dtype == SIZE_MAX ? "fp32" : row[c_dtype];
      if (c_dtype != SIZE_MAX) dtype_spelling_check(dtype, t.where(i), "Dtype", false);
      // a GEMM row's dtypes: those a GEMM is priced in (core/roofline.h); a vector row's: vector_row_dtypes
      const auto& allowed = gemm ? matrix_dtypes() : vector_row_dtypes();
      if (std::find(allowed.begin(), allowed.end(), dtype) == allowed.end())
        throw error(t.where(i) + ": column 'Dtype' of a " + op + " row must be " + text_or_list(allowed) + " (got '" +
                    dtype + "')");
      if (gemm && dtype == "fp8") fam = family::gemm_fp8;
      else if (gemm && dtype != "fp32") fam = family::gemm_tc16;
      const auto gi = row_admit(d, t.where(i), resolve, excluded, only, *fam, row[c_dev]);
      if (!gi) continue;
      bench_row r;
      r.where = t.where(i);
      r.device = row[c_dev];
      r.op = op;
      r.fam = *fam;
      r.latency_ms = to_double(row[c_lat], r.where, "Latency");
      r.kernel_name = row[c_name];
      r.grid_x = to_int(row[c_gx], r.where, "Grid x");
      r.grid_y = to_int(row[c_gy], r.where, "Grid y");
      r.grid_z = to_int(row[c_gz], r.where, "Grid z");
      kernel& k = r.k;
      k.dtype = dtype;
      if (gemm) {
        const int64_t B = to_int(row[t.column("B")], r.where, "B"), M = to_int(row[t.column("M")], r.where, "M");
        const int64_t N = to_int(row[t.column("N")], r.where, "N"), K = to_int(row[t.column("K")], r.where, "K");
        if (op == "bmm") {
          k.kind = kernel_kind::bmm, k.name = "BMM", k.b = B, k.m = M;
        } else {
          k.kind = kernel_kind::gemm, k.name = "Linear", k.b = 1, k.m = B * M;
          // scripts/collect/bench.py times an fp8 Linear with vLLM's dynamic per-tensor activation quantisation
          if (dtype == "fp8") k.act_quant = "dynamic_tensor";
        }
        k.n = N, k.k = K;
      } else {
        k.rows = to_int(row[t.column("B")], r.where, "B");
        k.hidden = to_int(row[t.column("H")], r.where, "H");
        // FLOPs and bytes from neusight.kernels (`cost` below): the collector's fp32 kernels, whose costs are the
        // convention the tile model shows vector kernels in (kernels.lua train_convention).
        if (*fam == family::elementwise) k.kind = kernel_kind::elementwise, k.name = "VEC" + op, k.op = op;
        else if (*fam == family::softmax) k.kind = kernel_kind::softmax, k.name = "VECsoftmax";
        else k.kind = kernel_kind::layernorm, k.name = "VECln";
      }
      const bool empty = k.kind == kernel_kind::gemm || k.kind == kernel_kind::bmm
                             ? !(k.b > 0 && k.m > 0 && k.n > 0 && k.k > 0)
                             : !(k.rows > 0 && k.hidden > 0);
      if (!(r.latency_ms > 0) || empty) {
        skip_row(d, "non-positive latency or empty shape", r.where);
        continue;
      }
      r.gpu_index = *gi;
      d.rows.push_back(std::move(r));
    }
  }
}
}  // namespace

bench_data bench_parse(std::string_view csv_text, const std::string& source, const bench_device_resolver& resolve,
                       bench_use use, std::optional<family> only) {
  bench_data d;
  d.files = {source};
  bench_reader reader{d, resolve, only, use, {}, {}};
  reader.read(csv_parse(csv_text, source));
  reader.finish();
  return d;
}

bench_data bench_load(const std::vector<std::string>& paths, const gpu_catalog& catalog, const kernel_costing& cost,
                      bench_use use, std::optional<family> only, const std::vector<std::string>& exclude_gpus) {
  gpu_data_resolver gpus(catalog, {});
  return bench_load(paths, gpus, cost, use, only, exclude_gpus);
}

bench_data bench_load(const std::vector<std::string>& paths, gpu_data_resolver& gpus, const kernel_costing& cost,
                      bench_use use, std::optional<family> only, const std::vector<std::string>& exclude_gpus) {
  bench_data d;
  d.files = csv_files(paths);
  const bench_device_resolver lookup = [&](const std::string& device) { return gpus.device(device); };
  gpus.catalog().load_all();  // a broken GPU file is an error, not an unknown device
  bench_reader reader{d, lookup, only, use, {}, {}};
  for (const auto& x : exclude_gpus) reader.excluded.insert(gpus.named(x).name);
  for (const auto& file : d.files) reader.read(csv_load(file));
  reader.finish();
  std::vector<kernel*> costed;
  costed.reserve(d.rows.size());
  for (auto& r : d.rows) costed.push_back(&r.k);
  cost(costed, [&](size_t i) { return d.rows[i].where; });  // a kernel neusight.kernels refuses: an error at its row
  return d;
}

}  // namespace ns
