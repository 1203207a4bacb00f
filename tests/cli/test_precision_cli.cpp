// tests/cli/test_precision_cli.cpp — precision recipes (--precision pure|amp) and the AdamW step (--optimizer adamw,
// --optimizer-impl) end to end: state_gb by recipe, optimizer kernels' bytes, errors, parallel runs.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::temp_dir;

namespace {

// GPT-2 Large (HF gpt2-large): 36 × 12·1280² + 36 × 13·1280 + 1280·(50257 + 1024) + 2·1280 parameters.
constexpr double gpt2_large_params = 36.0 * 12 * 1280 * 1280 + 36.0 * 13 * 1280 + 1280.0 * (50257 + 1024) + 2 * 1280;

const std::string gpt2 = "predict --model gpt2_large --gpu h100 --batch 4 --seq 1024 --format json ";
const std::string gpt2_train = gpt2 + "--mode train ";

json run_json(const std::string& args) {
  const auto r = run_cli(args);
  INFO(args << "\n" << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

// The optimizer-phase kernels of a report.
std::vector<json> optimizer_ops(const json& j) {
  std::vector<json> out;
  for (const auto& o : j["ops"])
    if (o["phase"] == "optimizer") out.push_back(o);
  return out;
}

double sum(const std::vector<json>& ops, const char* field) {
  double s = 0;
  for (const auto& o : ops) s += o[field].get<double>();
  return s;
}

}  // namespace

TEST_CASE("adamw end to end: bf16 amp GPT-2 Large on an H100", "[cli][precision]") {
  const json j = run_json(gpt2_train + "--optimizer adamw --dtype bf16 --precision amp");
  CHECK(j["optimizer"] == "adamw");
  CHECK(j["optimizer_impl"] == "fused");
  CHECK(j["dtype"] == "bf16");
  CHECK(j["precision"] == "amp");
  CHECK(j["precision_convention"] == "autocast");
  REQUIRE(j["params"].get<double>() == gpt2_large_params);
  const double P = gpt2_large_params;
  CHECK(j["optimizer_ms"].get<double>() > 0);
  CHECK(j["latency_ms"].get<double>() ==
        Approx(j["forward_ms"].get<double>() + j["backward_ms"].get<double>() + j["optimizer_ms"].get<double>()));
  // autocast: fp32 parameters + fp32 gradients + two fp32 moments = 16 B per parameter
  CHECK(j["state_bytes_per_param"] == json({{"weights", 4.0}, {"gradients", 4.0}, {"master", 0.0}, {"optimizer_state", 8.0}}));
  CHECK(j["state_gb"].get<double>() == Approx(P * 16 / 1e9).epsilon(1e-12));
  // one fused kernel: read w, g, exp_avg, exp_avg_sq, write w, exp_avg, exp_avg_sq: 2·4 + 4 + 4·4 = 28 B, 14 FLOPs
  const auto ops = optimizer_ops(j);
  REQUIRE(ops.size() == 1);
  CHECK(ops[0]["kernel"] == "VECadamw");
  CHECK(ops[0]["op"] == "adamw");
  CHECK(ops[0]["bytes"].get<double>() == 28 * P);
  CHECK(ops[0]["flops"].get<double>() == 14 * P);
}

TEST_CASE("adamw: fused vs foreach under the roofline, by recipe", "[cli][precision]") {
  const auto step = [](const std::string& extra) {
    const json j = run_json(gpt2_train + "--predictor roofline --optimizer adamw " + extra);
    return std::make_pair(j["optimizer_ms"].get<double>(), sum(optimizer_ops(j), "bytes") / j["params"].get<double>());
  };
  const auto fused = step("--dtype bf16"), foreach = step("--dtype bf16 --optimizer-impl foreach");
  CHECK(fused.second == 28);    // 2w + g + 4m, all fp32 under autocast
  CHECK(foreach.second == 80);  // 4w + 2g + 14m: the decay pass and Adam's seven passes
  // memory-bound: the step time scales with the bytes (H100 SXM5: 3.35 TB/s)
  CHECK(fused.first == Approx(28 * gpt2_large_params / 3.35e12 * 1e3).epsilon(1e-3));
  CHECK(foreach.first / fused.first == Approx(80.0 / 28).epsilon(1e-9));
  const auto pure = step("--dtype bf16 --precision pure");
  CHECK(pure.second == 14);  // 7 element accesses of 2 B
  CHECK(pure.first == Approx(fused.first / 2).epsilon(1e-9));
}

TEST_CASE("state_gb per precision recipe equals the closed form for GPT-2 Large", "[cli][precision]") {
  const double P = gpt2_large_params;
  struct c { const char* flags; double bytes; };
  for (const c& k : {
           c{"--mode train --dtype fp32 --optimizer adam", 4 + 4 + 8},                        // fp32: pure, the only recipe
           c{"--mode train --dtype bf16 --precision pure --optimizer adamw", 2 + 2 + 2 * 2},  // model.to(bf16)
           c{"--mode train --dtype bf16 --optimizer adamw", 4 + 4 + 2 * 4},                   // default amp (autocast)
           c{"--mode train --dtype bf16 --optimizer adam", 4 + 4 + 2 * 4},                    // before: 2 + 2 + 8 = 12
           c{"--mode train --dtype fp16 --precision amp --optimizer sgd", 4 + 4},             // SGD: no moments
           c{"--mode train --dtype bf16 --precision pure --optimizer none", 2 + 2},           // weights + gradients
           c{"--mode inference --dtype bf16", 2},                                             // inference default: pure
       }) {
    INFO(k.flags);
    const json j = run_json(gpt2 + "--predictor roofline " + k.flags);
    CHECK(j["state_gb"].get<double>() == Approx(P * k.bytes / 1e9).epsilon(1e-12));
  }
  const auto table = run_cli("predict --model gpt2_large --gpu h100 --mode train --batch 4 --seq 1024 --predictor "
                             "roofline --optimizer adamw --dtype bf16");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("(train, batch 4, seq 1024, bf16 amp, sdpa attention, optimizer adamw (fused))") != std::string::npos);
  CHECK(table.out.find("(0.774 B parameters x 16 B = weights 4 + gradients 4 + master 0 + optimizer 8 per parameter, "
                       "amp recipe (autocast))") != std::string::npos);
  // the memory line: the parts, what dominates, whether it fits, the largest batch (scripts/neusight/memory.lua)
  CHECK(table.out.find("memory ") != std::string::npos);
  CHECK(table.out.find("largest batch that fits: ") != std::string::npos);
}

// The memory line leaves out the GPU runtime's context, named as scripts/neusight/launch.lua runtime_name names it (the
// one place, beside graph_name: CUDA, HIP on AMD), not spelt again in memory.lua; a --scripts launch.lua written before
// runtime_name still runs, the line vendor-neutral (scripts/neusight/report.lua runtime_name, the one fallback).
TEST_CASE("the memory line names the GPU runtime as launch.lua does and an older launch.lua still runs",
          "[cli][precision]") {
  const std::string mi = "predict --model gpt2_large --gpu mi300x --mode train --batch 2 --seq 512 --predictor roofline";
  const auto line = [](const ns_test::run_result& r) {
    INFO(r.err);
    REQUIRE(r.code == 0);
    const size_t at = r.out.find("\nmemory ");
    REQUIRE(at != std::string::npos);
    return r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  CHECK(line(run_cli(mi)).find("(saved tensors, no HIP context)") != std::string::npos);
  CHECK(line(run_cli("predict --model gpt2_large --gpu h100 --mode train --batch 2 --seq 512 --predictor roofline"))
            .find("(saved tensors, no CUDA context)") != std::string::npos);
  temp_dir t;
  const std::string rocm = ns_test::override_dir(
      t, "rocm", "launch", "function M.runtime_name(vendor) return vendor == 'amd' and 'ROCm' or 'CUDA' end");
  CHECK(line(run_cli(mi + rocm)).find("(saved tensors, no ROCm context)") != std::string::npos);
  const std::string older = ns_test::override_dir(t, "older", "launch", "",
                                                  {{"function M.runtime_name(vendor)", "local function unused(vendor)"}});
  CHECK(line(run_cli(mi + older)).find("(saved tensors, no GPU runtime context)") != std::string::npos);
}

TEST_CASE("precision errors: an unknown recipe names the field, amp with fp32 is refused", "[cli][precision]") {
  auto r = run_cli(gpt2_train + "--dtype bf16 --precision ampp");
  CHECK(r.code == 1);
  CHECK(r.err.find("--precision must be \"pure\" or \"amp\" (got \"ampp\") (did you mean 'amp'?)") !=
        std::string::npos);
  // --dtype is the compute type: amp with fp32 compute has nothing to mix, an error rather than a silent no-op
  r = run_cli(gpt2_train + "--dtype fp32 --precision amp");
  CHECK(r.code == 1);
  CHECK(r.err.find("--precision \"amp\" mixes a 16-bit or fp8 compute dtype with fp32 state; dtype \"fp32\" is "
                   "already 4 bytes per element") != std::string::npos);
  r = run_cli(gpt2_train + "--optimizer adamw --optimizer-impl fast");
  CHECK(r.code == 1);
  CHECK(r.err.find("--optimizer-impl must be \"fused\" or \"foreach\" (got \"fast\")") != std::string::npos);
  // the optimizer's name is the workload's to check (scripts/neusight/workload.lua optimizer_rule: an op rule with an
  // optimizer field, with did-you-mean), not a list in the flag table
  r = run_cli(gpt2_train + "--optimizer adamx");
  CHECK(r.code == 1);
  CHECK(r.err.find("command line: --optimizer must be \"none\" or an optimizer: \"sgd\", \"adam\", \"adamw\" or an "
                   "op rule of yours with an 'optimizer' field (README: Operator rules) (got \"adamx\": no op rule of "
                   "that name) (did you mean 'adam'?)") != std::string::npos);
  // a script's recipe meets the command line's dtype
  temp_dir t;
  const auto script = t.write("w.lua", "return { model = 'gpt2_large', gpu = 'h100', mode = 'train', batch = 4, seq = 1024,\n"
                                       "  dtype = 'bf16', precision = 'amp', optimizer = 'adamw' }\n");
  r = run_cli("run '" + script.string() + "' --dtype fp32 --predictor roofline");
  CHECK(r.code == 1);
  CHECK(r.err.find("field 'precision' \"amp\" mixes") != std::string::npos);
  r = run_cli("run '" + script.string() + "' --dtype fp32 --precision pure --predictor roofline --format json");
  INFO(r.err);
  CHECK(r.code == 0);
}

TEST_CASE("adamw in a parallel run: dp 2, Megatron amp, the distributed optimizer", "[cli][precision][parallel]") {
  const std::string base = gpt2_train + "--predictor roofline --optimizer adamw --dtype bf16 --dp 2";
  const json plain = run_json(base), zero = run_json(base + " --distributed-optimizer");
  CHECK(plain["precision"] == "amp");
  CHECK(plain["precision_convention"] == "megatron");  // Megatron-LM kernels (the parallel default)
  // bf16 parameters, fp32 gradients (Megatron accumulates bf16 gradients in fp32), fp32 master, two fp32 moments
  CHECK(plain["state_bytes_per_param"] ==
        json({{"weights", 2.0}, {"gradients", 4.0}, {"master", 4.0}, {"optimizer_state", 8.0}}));
  const json &a = plain["parallel"]["devices"][0], &b = zero["parallel"]["devices"][0];
  const double P = a["params"].get<double>();
  CHECK(P == gpt2_large_params);
  CHECK(a["state_gb"].get<double>() == Approx(P * (2 + 4 + 4 + 8) / 1e9).epsilon(1e-12));  // 18 B
  CHECK(b["state_gb"].get<double>() == Approx(P * (2 + 4 + (4 + 8) / 2.0) / 1e9).epsilon(1e-12));  // 6 + 12/dp
  CHECK(zero["state_gb"].get<double>() == b["state_gb"].get<double>());
  CHECK(b["memory_gb"].get<double>() == Approx(b["state_gb"].get<double>() + b["activation_gb"].get<double>() +
                                               b["temporary_gb"].get<double>() + b["workspace_gb"].get<double>()));
  // fused step over the fp32 master: 2·4 + 4 + 4·4 + the bf16 model copy 2 = 30 B per parameter
  const auto ops = optimizer_ops(plain);
  REQUIRE(ops.size() == 1);
  CHECK(ops[0]["bytes"].get<double>() == 30 * P);
  CHECK(a["optimizer_ms"].get<double>() > 0);
  CHECK(b["optimizer_ms"].get<double>() == Approx(a["optimizer_ms"].get<double>() / 2));
  CHECK(plain["parallel"]["grad_bytes_per_rank"].get<double>() == 4 * P);  // fp32 gradients reduced
  CHECK(zero["latency_ms"].get<double>() > 0);
}

TEST_CASE("search takes --precision and --optimizer adamw", "[cli][precision][search]") {
  const auto run = [](const std::string& extra) {
    return run_json("search --model gpt2_large --gpu h100 --gpus 2 --batch 4 --seq 1024 --dtype bf16 --optimizer adamw "
                    "--predictor roofline --format json --all --top 50" + extra);
  };
  const json amp = run(""), pure = run(" --precision pure");
  CHECK(amp["precision"] == "amp");
  CHECK(pure["precision"] == "pure");
  // the optimizer as the workloads resolved it, from their report table (scripts/neusight/search.lua json_fields)
  CHECK(amp["optimizer"] == "adamw");
  CHECK(amp["optimizer_impl"] == "fused");
  bool compared = false;
  for (const auto& a : amp["layouts"])
    for (const auto& p : pure["layouts"])
      if (a["dp"] == p["dp"] && a["tp"] == p["tp"] && a["pp"] == p["pp"] && a["microbatches"] == p["microbatches"] &&
          a["recompute"] == p["recompute"]) {
        CHECK(a["memory_gb"].get<double>() > p["memory_gb"].get<double>());  // 18 B vs 8 B of state per parameter
        compared = true;
      }
  CHECK(compared);
}

// state_gb against what the JSON says of it: on one GPU params x the sum of state_bytes_per_param; in a parallel run
// the fullest stage's params x (weights + gradients + (master + optimizer_state) / optimizer_shards).
TEST_CASE("state_gb reads from the report's own fields on one GPU and in parallel runs", "[cli][precision][parallel]") {
  const std::string base = "--model llama32_1b --gpu h100 --mode train --batch 4 --seq 1024 --dtype bf16 --format json "
                           "--optimizer adamw --predictor roofline ";
  const json one = run_json("predict " + base);
  CHECK_FALSE(one.contains("optimizer_shards"));  // one GPU: nothing sharded
  const auto& b1 = one["state_bytes_per_param"];
  CHECK(one["state_gb"].get<double>() ==
        Approx(one["params"].get<double>() *
               (b1["weights"].get<double>() + b1["gradients"].get<double>() + b1["master"].get<double>() +
                b1["optimizer_state"].get<double>()) / 1e9).epsilon(1e-12));
  for (const auto& [extra, shards] : std::vector<std::pair<std::string, int>>{
           {"--dp 2 --distributed-optimizer", 2}, {"--dp 2", 1}, {"--pp 2 --microbatches 2", 1},
           {"--dp 2 --tp 2 --distributed-optimizer", 2}}) {
    INFO(extra);
    const json j = run_json("predict " + base + extra);
    REQUIRE(j.contains("optimizer_shards"));
    CHECK(j["optimizer_shards"] == shards);
    const auto& b = j["state_bytes_per_param"];
    // the recipe's bytes, unsharded
    CHECK(b == json({{"weights", 2.0}, {"gradients", 4.0}, {"master", 4.0}, {"optimizer_state", 8.0}}));
    double fullest = 0;
    for (const auto& d : j["parallel"]["devices"])
      fullest = std::max(fullest, d["params"].get<double>() *
                                      (b["weights"].get<double>() + b["gradients"].get<double>() +
                                       (b["master"].get<double>() + b["optimizer_state"].get<double>()) / shards));
    CHECK(j["state_gb"].get<double>() == Approx(fullest / 1e9).epsilon(1e-12));
  }
}

// tester9 #4: an optimizer is an op rule with an `optimizer` field (README "Operator rules"): Lion added with --ops,
// no list in the scripts to edit; its moments size the model state; a malformed field is an error at its line.
TEST_CASE("an optimizer of one's own: an op rule with an optimizer field is --optimizer NAME", "[cli][precision]") {
  temp_dir t;
  const std::string lion =
      "local K, rules = require \"neusight.kernels\", require \"neusight.rules\"\n"
      "return {\n"
      "  name = \"lion\", doc = \"Lion: one fused kernel, 2w + g + 2m + copy bytes per parameter\",\n"
      "  attrs = rules.optimizer_attrs,\n"
      "  optimizer = { moments = 1, impl = \"fused\" },\n"
      "  forward = function(node)\n"
      "    local r = rules.optimizer_roles(node)\n"
      "    local out = rules.optimizer_prologue(r, node.dtype)\n"
      "    out[#out + 1] = K.vec(\"addcmul\", r.rows, r.P, node.dtype, { bytes_per_elem = 2 * r.w + r.g + 2 * r.m + r.copy })\n"
      "    return out\n"
      "  end,\n"
      "}\n";
  t.write("ops/lion.lua", lion);
  const std::string ops = "--ops '" + (t.path / "ops").string() + "' ";
  const json l = run_json(gpt2_train + ops + "--dtype bf16 --optimizer lion");
  const json a = run_json(gpt2_train + ops + "--dtype bf16 --optimizer adamw");
  CHECK(l["optimizer"] == "lion");
  CHECK(l["optimizer_impl"] == "fused");  // the rule's default
  // autocast: fp32 parameters and gradients, one fp32 moment (adamw's two)
  CHECK(l["state_bytes_per_param"]["optimizer_state"] == 4.0);
  CHECK(a["state_bytes_per_param"]["optimizer_state"] == 8.0);
  const auto lops = optimizer_ops(l);
  REQUIRE(lops.size() == 1);
  CHECK(lops[0]["op"] == "lion");
  CHECK(lops[0]["bytes"].get<double>() == (2 * 4 + 4 + 2 * 4) * gpt2_large_params);  // 2w + g + 2m, fp32
  CHECK(l["optimizer_ms"].get<double>() < a["optimizer_ms"].get<double>());
  // a rule that is no optimizer, and a misspelled key of the field
  const auto not_opt = run_cli(gpt2_train + "--optimizer linear");
  CHECK(not_opt.code != 0);
  CHECK_THAT(not_opt.err, Catch::Contains("its op rule ops/linear.lua has no 'optimizer' field"));
  // lion.lua with `from` replaced by `to` is refused saying `expect`
  const auto refused = [&](const std::string& from, const std::string& to, const std::string& expect) {
    std::string changed = lion;
    changed.replace(changed.find(from), from.size(), to);
    t.write("ops/lion.lua", changed);
    const auto r = run_cli(gpt2_train + ops + "--optimizer lion");
    INFO(from << " -> " << to);
    CHECK(r.code != 0);
    CHECK_THAT(r.err, Catch::Contains(expect));
  };
  // a step of no kernels would be a silent 0 ms (tester10)
  refused("    return out\n", "    return {}\n", "forward() of optimizer 'lion' returned no kernels");
  refused("moments = 1", "moment = 1", "lion.lua:5: field 'optimizer': unknown key 'moment' (did you mean 'moments'?)");
}

// fp8 training runs as Transformer Engine does: fp8 only for the inputs of the Linear layers' GEMMs, everything
// between them in bf16 (norms, element-wise ops, attention, the embedding, the LM head, tensor-parallel collectives,
// the activation a pipeline stage sends). Every node ran at 1 byte per element before: Llama-3-8B at tp 2 × pp 2 on
// H100s 302.8 ms (all-reduces, norms, adds and sends at half their bytes), 356.0 ms with its bf16 activations.
TEST_CASE("precision: fp8 training keeps its activations in bf16 and only its linears' GEMMs in fp8",
          "[cli][precision]") {
  const std::string base = "predict --model llama3_8b --gpu h100 --mode train --batch 8 --seq 2048 --tp 2 --pp 2 "
                           "--microbatches 4 --format json --dtype ";
  const json bf16 = run_json(base + "bf16"), fp8 = run_json(base + "fp8");
  CHECK(fp8["parallel"]["p2p_bytes"].get<double>() == bf16["parallel"]["p2p_bytes"].get<double>());
  const json &a = bf16["ops"], &b = fp8["ops"];
  REQUIRE(a.size() == b.size());
  size_t gemms = 0, kept = 0, collectives = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(b[i].dump());
    REQUIRE(a[i]["name"] == b[i]["name"]);
    if (b[i]["phase"] == "optimizer") continue;  // the recipe's state, not activations
    const double fp8_bytes = b[i]["bytes"], bf16_bytes = a[i]["bytes"];
    if (b[i]["kind"] == "gemm" && b[i]["name"] != "lm_head") {
      ++gemms;
      CHECK(fp8_bytes < bf16_bytes);  // its operands in fp8
    } else {
      ++kept;
      CHECK(fp8_bytes == Approx(bf16_bytes));
      if (b[i]["kind"] == "collective") {
        ++collectives;
        CHECK(b[i]["ms"].get<double>() == Approx(a[i]["ms"].get<double>()));
      }
    }
  }
  CHECK(gemms >= 8);
  CHECK(kept >= 20);
  CHECK(collectives >= 4);
}
