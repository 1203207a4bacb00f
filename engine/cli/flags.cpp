// engine/cli/flags.cpp — the flag table: every flag of every command, declared once with the commands it applies to.
#include "cli/flags.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "core/cluster_spec.h"
#include "core/roofline.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "lua/script_limits.h"

namespace ns {
namespace fs = std::filesystem;

std::vector<std::string> list_split(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, end - start);
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    out.push_back(a == std::string::npos ? std::string() : item.substr(a, b - a + 1));
    if (end == text.size()) break;
    start = end + 1;
  }
  return out;
}

bool calibrate_from_trace(const std::string& file) {
  return file.size() > 5 && text_lower(file.substr(file.size() - 5)) == ".json";
}

void flags_check(CLI::App* sc, unsigned command, flag_targets& t) {
  const common_flags& common = t.get<common_flags>();
  if (command == cmd::serve) {
    const serve_flags& vflags = t.get<serve_flags>();
    const raw_flags& raw = t.get<raw_flags>();
    // a sweep compares lists of --batch or --rate; a trace is one workload (its arrivals and lengths)
    if (*sc->get_option("--requests-file") && vflags.sweep)
      throw CLI::ValidationError("--requests-file", "a trace is one workload, not a list to sweep: --sweep compares "
                                 "--batch or --rate lists; run serve --requests-file once per --gpu and --tp");
    // the continuous-batching options, with either arrival source
    for (const char* name : {"--seed", "--chunked-prefill", "--max-batch", "--max-batched-tokens"})
      if (*sc->get_option(name) && !*sc->get_option("--rate") && !*sc->get_option("--requests-file"))
        throw CLI::RequiresError(name, "--rate (or --requests-file)");
    for (const auto& [name, text] : {std::pair{"--gpu", &raw.serve_gpu}, {"--tp", &raw.serve_tp},
                                     {"--batch", &raw.serve_batch}, {"--rate", &raw.serve_rate}})
      if (!vflags.sweep && list_split(*text).size() > 1)
        throw CLI::ValidationError(name, "'" + *text + "' is a list: pass --sweep to compare settings (without it "
                                   "serve forecasts one setting)");
  }
  if (command == cmd::scale)
    if (const auto unused = scale_flag_unused(t.get<scale_flags>())) throw CLI::ValidationError(unused->first, unused->second);
  // predict --calibrate TRACE.json fits from the trace's own kernels: a workload flag would be ignored, so refuse it
  if (command == cmd::predict && !common.calibrate.empty() && calibrate_from_trace(common.calibrate))
    for (const auto& name : workload_flag_names(cmd::predict))
      if (name != "--gpu" && sc->get_option(name)->count() > 0)
        throw CLI::ValidationError(name, "has no effect with --calibrate " + common.calibrate + ": a trace's ops carry "
                                   "their own shapes and dtypes (give predict --gpu only)");
}

namespace {

// The largest integer a count flag takes: 18 digits, so that the values can be multiplied a few times in 64 bits
// before the workload's own bounds (scripts/neusight/workload.lua: batch at most 16777216, …) refuse them by name.
constexpr int64_t flag_integer_max = 999999999999999999;
// The largest value of a flag kept in an `int` (train's --epochs, --batch, --threads, …).
constexpr int64_t flag_int_max = std::numeric_limits<int>::max();

// "" when `item` is a decimal integer from `min` to `max` (digits only: no sign, blank, exponent or fraction), its value
// then in `*value` when given, else what is wrong, in the words "a positive integer expected, got 0" (`what` names the
// kind of value; a value above `max` is "<what> of at most <max>" unless `what` says the range itself).
std::string integer_problem(const std::string& item, int64_t min, int64_t max, const std::string& what,
                            bool what_has_range = false, int64_t* value = nullptr) {
  if (item.empty() || !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return what + " expected, got " + (item.empty() ? "an empty value" : "'" + item + "'");
  int64_t n = 0;
  const auto [at, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
  if (ec != std::errc() || at != item.data() + item.size() || n > max)
    return what + (what_has_range ? "" : " of at most " + std::to_string(max)) + " expected, got " + item;
  if (n < min) return what + " expected, got " + item;
  if (value) *value = n;
  return {};
}

// " (in LIST)" after an item's problem when `v` is a list of several items; "" for a single value (--hidden 0: "got 0",
// not "got 0 (in 0)").
std::string in_list(const std::string& v) { return v.find(',') != std::string::npos ? " (in " + v + ")" : ""; }

// What is wrong with a comma-separated list as a whole, before its items' own checks: an empty item ("--gpu h100,",
// "--batch 1,,8"), or, with `each_once`, an item given twice ("--batch 1,8,8": the same combination would be forecast
// twice, two equal rows). `keys`, one an item (list_split's), tell two items apart (8 and 08 are one batch); without
// them, the items themselves. "" when nothing is.
std::string list_problem(const std::string& v, const std::vector<std::string>& keys = {}, bool each_once = true) {
  const auto items = list_split(v);
  std::vector<std::string> seen;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    if (item.empty()) return "an empty item in the list '" + v + "'";
    if (!each_once) continue;
    const std::string& k = keys.empty() ? item : keys[i];
    if (std::find(seen.begin(), seen.end(), k) != seen.end())
      return item + " is given twice in the list '" + v + "' (each value once)";
    seen.push_back(k);
  }
  return {};
}

// Reads one item of a list (not empty): its value as text (what tells two items apart), or "" with `why` set to what is
// wrong with it.
using item_read = std::function<std::string(const std::string& item, std::string& why)>;

// What is wrong with a comma-separated list of values: the first item that `read` refuses, in its words with
// " (in LIST)" after them, else what is wrong with the list as a whole (list_problem: an empty item, with `each_once`
// a value given twice, as `read` read it). Each item is read once.
std::string values_problem(const std::string& v, const item_read& read, bool each_once = true) {
  std::vector<std::string> keys;
  for (const auto& item : list_split(v)) {
    std::string why;
    keys.push_back(item.empty() ? item : read(item, why));
    if (!why.empty()) return why + in_list(v);
  }
  return list_problem(v, keys, each_once);
}

// An item_read of a decimal integer from `min` to `max` (integer_problem's words for one that is not).
item_read integer_read(int64_t min, int64_t max, std::string what, bool what_has_range = false) {
  return [=](const std::string& item, std::string& why) {
    int64_t n = 0;
    why = integer_problem(item, min, max, what, what_has_range, &n);
    return why.empty() ? std::to_string(n) : std::string();
  };
}

// Every item of a comma-separated list is a positive integer (at most flag_integer_max), each once.
CLI::Validator positive_list() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        return values_problem(v, integer_read(1, flag_integer_max, "a positive integer"));
      },
      "");
}

// Every item of a comma-separated list is one of `choices`, each once.
CLI::Validator member_list(std::vector<std::string> choices) {
  std::string shown;
  for (const auto& c : choices) shown += (shown.empty() ? "" : ",") + c;
  return CLI::Validator(
      [choices, shown](std::string& v) -> std::string {
        for (const auto& item : list_split(v))
          if (!item.empty() && std::find(choices.begin(), choices.end(), item) == choices.end())
            return "Value " + item + " not in {" + shown + "}";
        return list_problem(v);
      },
      "{" + shown + "}[,…]");
}

// An integer of one value from `min` to `max` (CLI::PositiveNumber's message names a range of doubles with 300
// digits): "a positive integer expected, got 0"; `max` is the target's (an `int`: flag_int_max).
CLI::Validator integer_value(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& v) -> std::string {
        const std::string what = min == 0 ? "a non-negative integer" : min == 1 ? "a positive integer"
                                                                                 : "an integer >= " + std::to_string(min);
        if (v.find(',') != std::string::npos) return what + " expected (one value, not a list), got " + v;
        return integer_problem(v, min, max, what);
      },
      min == 0 ? "NONNEGATIVE" : "POSITIVE");  // the help's type, as CLI11's checks name it (INT:POSITIVE)
}
CLI::Validator positive_integer(int64_t max = flag_integer_max) { return integer_value(1, max); }

// One integer of all that a T (a 64-bit integer type) holds, and no more: CLI11 fills a uint64_t from "-1" by wrapping
// around (train's --seed) and saturates an int64_t out of range (serve's --seed 99999999999999999999 ran as seed
// 9223372036854775807). `refusal(v, range)` says what is wrong with `v`, `range` the words "from MIN to MAX".
template <class T>
CLI::Validator whole_integer(std::string (*refusal)(const std::string& v, const std::string& range)) {
  static_assert(std::is_integral_v<T> && sizeof(T) == 8);
  return CLI::Validator(
      [refusal](std::string& v) -> std::string {
        T n = 0;
        const char* end = v.data() + v.size();
        const auto [at, ec] = std::from_chars(v.data(), end, n);  // no blank, no '+'; no '-' for an unsigned T
        if (v.empty() || ec != std::errc() || at != end)
          return refusal(v, "from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
                                std::to_string(std::numeric_limits<T>::max()));
        return {};
      },
      "");
}

// train --hidden: the hidden layers' widths, a comma-separated list of 1 to hidden_layers_max integers from 1 to
// hidden_width_max (repeats are the point: 64,64,64). The shipped models are 2 or 3 layers of 32 or 64
// (weights/train.sh); 16 times as wide and 8 deep is far beyond what the 5 tile features support, and every such
// model stays well inside the weights reader's file size (core/weights.cpp), so predict reads whatever train writes.
constexpr int64_t hidden_width_max = 1024;
constexpr size_t hidden_layers_max = 8;
// the weights of the largest: input layer, hidden-to-hidden layers, output layer (weights and biases), as the reader counts
static_assert(((tile_feature_count + 1) * hidden_width_max + (hidden_layers_max - 1) * (hidden_width_max + 1) * hidden_width_max +
               (hidden_width_max + 1) * size_t(tile_outputs)) * sizeof(float) < text_file_max_data,
              "train --hidden's largest model must fit the weights reader's file size");
CLI::Validator hidden_layers() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        const auto items = list_split(v);
        if (items.empty()) return "1 to " + std::to_string(hidden_layers_max) + " layer widths expected, got none";
        if (items.size() > hidden_layers_max)
          return "at most " + std::to_string(hidden_layers_max) + " hidden layers expected, got " +
                 std::to_string(items.size()) + " (" + v + ")";
        const std::string what = "a layer width from 1 to " + std::to_string(hidden_width_max);
        return values_problem(v, integer_read(1, hidden_width_max, what, true), false);
      },
      "N[,N…]");
}

// A fraction in (0, 1] (serve's --gpu-memory-utilization).
CLI::Validator unit_fraction() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || !(d > 0 && d <= 1))
          return "Value " + v + " is not a fraction in (0, 1]: the share of GPU memory for weights + KV cache (e.g. 0.9)";
        return {};
      },
      "FRACTION");
}

// A finite number above 0 (or at least 0 with `zero_ok`), one value. CLI::PositiveNumber and NonNegativeNumber let
// "nan" through (no comparison holds for it), and a NaN in a field whose 0 or -1 means "not given" fails that test
// too: --ttft-ms nan would run without the target, --bucket-mb nan with the default bucket.
CLI::Validator finite_number(bool zero_ok) {
  return CLI::Validator(
      [zero_ok](std::string& v) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        if (v.empty() || std::isspace(static_cast<unsigned char>(v.front())) || end != v.c_str() + v.size() ||
            !std::isfinite(d) || d < 0 || (d == 0 && !zero_ok))  // strtod skips leading blanks: " 5" is refused
          return "Value " + v + " is not a " + (zero_ok ? "non-negative" : "positive") + " finite number";
        return {};
      },
      zero_ok ? "NONNEGATIVE" : "POSITIVE");  // the help's type, as CLI11's checks name it
}

// Every item of a comma-separated list is a finite number (its sign and range are the script's to check).
CLI::Validator number_list() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        return values_problem(v, [](const std::string& item, std::string& why) {
          char* end = nullptr;
          const double d = std::strtod(item.c_str(), &end);
          if (end != item.c_str() + item.size() || !std::isfinite(d)) why = "Value " + item + " is not a number";
          return why.empty() ? fmt::format("{}", d) : std::string();
        });
      },
      "");
}

// Items of a list flag are not empty ("--gpu h100,", "--dtype ,bf16") and each is given once (list_problem); what
// they name is the scripts' to check.
CLI::Validator nonempty_list() {
  return CLI::Validator([](std::string& v) -> std::string { return list_problem(v); }, "");
}

// Every option that takes a value refuses an empty one (flags_add): `--dtype ""` ran with the default dtype, so a
// shell script's unset variable silently forecast something else than it meant.
CLI::Validator nonempty_value() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        return v.empty() ? "an empty value (give a value, or leave the flag out for its default)" : std::string();
      },
      "");
}

// A flag's path that names no folder or file is an input error, as a `run FILE`, --calibrate FILE or --model FILE that
// does not exist is (exit 1, "neusight: …"), not a usage error: the validators below note it for app.cpp's handler
// (flag_path_missing), which CLI11's ValidationError alone cannot tell from a malformed value. CLI11's ExistingFile had
// made --graph and --trace exit 2 ("--graph: File does not exist: x", without the program's name).
bool path_missing_noted = false;

CLI::Validator existing_dir() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        std::error_code ec;
        if (fs::is_directory(v, ec)) return {};
        path_missing_noted = true;
        return v + (fs::exists(v, ec) ? ": not a directory" : ": no such directory");  // text_no_such_file's form
      },
      "DIR");
}

CLI::Validator existing_file() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        std::error_code ec;
        if (fs::exists(v, ec) && !fs::is_directory(v, ec)) return {};
        path_missing_noted = true;
        return fs::is_directory(v, ec) ? v + ": a directory, not a file" : text_no_such_file(v);
      },
      "FILE");
}

// --predictor: a built-in or a Lua predictor (session::predictor_make resolves and checks the name).
std::string predictor_help() {
  std::string builtins;
  for (const auto& n : predictor_names()) builtins += (builtins.empty() ? "" : ", ") + n;
  return "Kernel latency predictor: " + builtins +
         ", or a Lua predictor: NAME (neusight/predictors/NAME.lua on the script search path, e.g. roofline_derated) "
         "or a .lua file";
}

// train --family: every family the flag accepts (family_name_list, the one list), each with what it holds where a
// name does not say it.
std::string family_help() {
  static const std::map<std::string, std::string> gloss = {
      {"bmm", "fp32 batched GEMMs"}, {"linear", "fp32 GEMMs"}, {"gemm_tc16", "bf16/fp16/tf32 tensor-core GEMMs"},
      {"gemm_fp8", "fp8 GEMMs"}, {"attention_prefill", "context_attention rows"},
      {"attention_decode", "generation_attention rows"}};
  std::string out;
  for (const auto& n : family_name_list()) {
    const auto g = gloss.find(n);
    out += (out.empty() ? "" : ", ") + n + (g == gloss.end() ? "" : " (" + g->second + ")");
  }
  return "Kernel family: " + out;
}

// --gpu FILE of the commands that read measured data (train, eval): what a GPU file of the user's is for.
std::string gpu_file_help(const std::string& rows) {
  return "GPU file (path/to/my_gpu.toml, repeatable) for " + rows + " of a GPU neusight does not bundle: " + rows +
         " whose device the file names (its name, an alias or its stem; case, spaces, '-' and '_' aside) use it, as "
         "do those of a bundled GPU of the file's name; a file no " + (rows == "rows" ? "row" : "folder") +
         " names is an error (scripts/collect/README.md)";
}

// Adds the option (a flag for a bool) bound to `target`.
template <class T>
CLI::Option* add(CLI::App* app, const std::string& name, T& target, const std::string& help) {
  if constexpr (std::is_same_v<T, bool>)
    return app->add_flag(name, target, help);
  else
    return app->add_option(name, target, help);
}

using flag_bind = std::function<CLI::Option*(CLI::App*, const std::string& name, const std::string& help, flag_targets&)>;

// The value goes to member `m` of the command's flag struct S (one of flag_targets' parts).
template <class S, class T>
flag_bind to(T S::*m) {
  return [m](CLI::App* app, const std::string& name, const std::string& help, flag_targets& t) {
    return add(app, name, t.get<S>().*m, help);
  };
}
// A repeatable option into the vector member `m`: one value per use (`--gpu a.toml --gpu b.toml`), so that the
// positional arguments after it stay positional (CLI11 lets a vector option take every value up to the next flag).
template <class S, class T>
flag_bind to_each(std::vector<T> S::*m) {
  return [m](CLI::App* app, const std::string& name, const std::string& help, flag_targets& t) {
    return add(app, name, t.get<S>().*m, help)->allow_extra_args(false);
  };
}
// train's model options (train_flags::opts).
template <class T>
flag_bind to_train(T train_options::*m) {
  return [m](CLI::App* app, const std::string& name, const std::string& help, flag_targets& t) {
    return add(app, name, t.get<train_flags>().opts.*m, help);
  };
}

// What an entry sets on its option on every command, or one use of it on its commands (a use's check, type name and
// group replace the entry's; its relations add to them).
struct flag_rules {
  std::optional<CLI::Validator> check;
  std::string type_name, group;
  bool required = false, show_default = false;
  std::vector<std::string> needs, excludes;  // other flags of the same command, by name
};

// One binding of a flag: the commands it has that meaning on and where its value goes there.
struct flag_use {
  unsigned commands = 0;
  flag_bind bind;
  std::string help;        // replaces the entry's help: the flag means something else on these commands
  std::string note;        // appended to the help
  bool workload = false;   // a workload field: run says it overrides the script's
  bool list = false;       // a comma-separated list makes run/predict compare every combination
  flag_rules rules;
};

// A flag: its name (CLI11's: "-o,--output", or a positional's), its help and checks, and its uses. The builder's
// setters after on() apply to that use; before the first on(), to the entry (every command).
struct flag_spec {
  std::string name, help;
  flag_rules rules;
  std::vector<flag_use> uses;

  flag_spec(std::string n, std::string h) : name(std::move(n)), help(std::move(h)) {}
  flag_spec& on(unsigned commands, flag_bind bind) {
    uses.push_back(flag_use{commands, std::move(bind), {}, {}, false, false, {}});
    return *this;
  }
  flag_rules& r() { return uses.empty() ? rules : uses.back().rules; }
  // the last .on()'s use: a per-use setter written before any .on() is a mistake in the table
  flag_use& last() {
    if (uses.empty()) throw std::logic_error("flag table: " + name + ": a per-command setter before any .on()");
    return uses.back();
  }
  flag_spec& check(CLI::Validator v) {
    r().check = std::move(v);
    return *this;
  }
  flag_spec& type(std::string t) {
    r().type_name = std::move(t);
    return *this;
  }
  flag_spec& group(std::string g) {
    r().group = std::move(g);
    return *this;
  }
  flag_spec& required() {
    r().required = true;
    return *this;
  }
  flag_spec& show_default() {
    r().show_default = true;
    return *this;
  }
  flag_spec& needs(const std::vector<std::string>& names) {
    r().needs.insert(r().needs.end(), names.begin(), names.end());
    return *this;
  }
  flag_spec& excludes(const std::vector<std::string>& names) {
    r().excludes.insert(r().excludes.end(), names.begin(), names.end());
    return *this;
  }
  // the use's own wording: its whole help (the flag means something else there), a note after the entry's help
  flag_spec& help_as(std::string h) {
    last().help = std::move(h);
    return *this;
  }
  flag_spec& note(std::string n) {
    last().note = std::move(n);
    return *this;
  }
  flag_spec& workload() {
    last().workload = true;
    return *this;
  }
  flag_spec& list() {
    last().list = true;
    return *this;
  }
};

using namespace cmd;
constexpr unsigned forecast = run | predict;
// the commands that open a session: they read the search paths, -v and the script limits
constexpr unsigned sessions = run | predict | paths | models | ops | train | eval_kernels | eval_models | scale | search | serve;
// the sessions that read op rules: train and eval kernels price micro-benchmark rows by kernel family, and models lists
// the presets' parameter counts from their builders, none of them through an op rule (--ops was a silent no-op there)
constexpr unsigned op_readers = sessions & ~(models | train | eval_kernels);
// the commands that resolve GPU names (--gpu, --from/--to, data devices) or list the GPUs: they read --gpus-dir
constexpr unsigned gpu_readers = run | predict | paths | gpus | train | eval_kernels | eval_models | scale | search | serve;
const char* const parallel_group = "Parallelism (scripts/neusight/parallel.lua)";
const char* const limits_group = "Script limits (per call into a Lua script; 0: no limit)";

// In each command's --help the flags come in this order.
std::vector<flag_spec> table_make() {
  std::vector<flag_spec> t;
  auto flag = [&t](std::string name, std::string help) -> flag_spec& { return t.emplace_back(std::move(name), std::move(help)); };

  // The positional arguments.
  flag("script",
       "Workload script returning { model=…, gpu=…, mode=…, batch=…, seq=… }; a relative path that does not exist here "
       "is looked up in the bundled files (examples/gpt3_train.lua works from any folder)")
      .on(run, to(&raw_flags::script)).required();
  flag("list", "Optional word 'list'").on(ops, to(&raw_flags::list_word)).check(CLI::IsMember({"list"}));
  flag("which",
       "Print this folder alone (for scripts: python3 \"$(neusight paths scripts)/collect/collect.py\" works from any "
       "folder): data, gpus, ops, scripts, weights, examples, or readme (the manual, README.md)")
      .on(paths, to(&raw_flags::paths_which))
      .check(CLI::IsMember({"data", "gpus", "ops", "scripts", "weights", "examples", "readme"}));
  flag("files", "Micro-benchmark CSV files or folders").on(eval_kernels, to(&eval_kernels_flags::files)).required();
  flag("labels", "Label folders label/<GPU> (or label/ itself, or single label JSON files)")
      .on(eval_models, to(&eval_models_flags::labels)).required();

  // The workload.
  flag("--model",
       "Model preset (e.g. gpt3_175b, bert_large, llama3_8b, mixtral_8x7b, deepseek_v3; `neusight models` lists them) or "
       "a HuggingFace config.json (the model_types scripts/neusight/models/hf.lua maps: GPT-2, BERT, OPT, Switch, Llama, "
       "Mistral, Qwen2/3, Phi-3, Gemma, Gemma2, Mixtral, Qwen MoE, DeepSeek-V2/V3), or a .lua file returning a model "
       "function (or a workload table with one as `model`, e.g. examples/custom_model.lua)")
      .on(predict, to(&forecast_flags::model)).list().check(nonempty_list())
      .on(search, to(&search_flags::model)).required()
      .on(serve, to(&serve_flags::model)).required()
      .help_as("Model preset or HuggingFace config.json of a decoder-only model with a KV cache (the gpt, opt, llama, "
               "moe and deepseek builders; `neusight models` lists the presets), or a .lua file returning a model function "
               "that builds prefill and decode steps (opts.phase, opts.context)");
  flag("--gpu", "GPU: file path, file stem or alias, see `neusight gpus`")
      .on(forecast, to(&forecast_flags::gpu)).workload().list().check(nonempty_list())
      .on(search, to(&search_flags::gpu)).required()
      .on(serve, to(&raw_flags::serve_gpu)).required().check(nonempty_list()).type("GPU[,GPU…]")
      .note(" (--sweep: a list, e.g. h100,a100_sxm4_80gb,l4)")
      .on(train, to_each(&train_flags::gpu_files)).help_as(gpu_file_help("rows")).type("FILE")
      .on(eval_kernels, to_each(&eval_kernels_flags::gpu_files)).help_as(gpu_file_help("rows")).type("FILE")
      .on(eval_models, to_each(&eval_models_flags::gpu_files)).help_as(gpu_file_help("label folders")).type("FILE");
  flag("--gpus", "Number of GPUs").on(search, to(&search_flags::gpus)).required().check(CLI::Range(int64_t(1), cluster_max_count)).type("N");  // a cluster's most GPUs (core/cluster_spec.h); a huge count made the divisor loop run for ever
  flag("--batch", "Global batch size")
      .on(forecast, to(&forecast_flags::batch)).workload().list().check(positive_list()).type("N[,N…]")
      .on(search, to(&search_flags::batch)).required().check(positive_integer())
      .on(serve, to(&raw_flags::serve_batch)).check(positive_list()).type("N[,N…]")
      .help_as("Static batch: N requests prefilled together, then decoded to the end (--sweep: a list, e.g. 1,8,32)")
      .on(train, to_train(&train_options::batch)).help_as("Mini-batch size").show_default().check(positive_integer(flag_int_max));
  flag("--seq", "Sequence length")
      .on(forecast, to(&forecast_flags::seq)).workload().list().check(positive_list()).type("N[,N…]")
      .note(" (prefill: the prompt length; decode takes none: one new token over --context tokens, and in a --mode list "
            "with decode its rows take --seq as their --context when none is given)")
      .on(search, to(&search_flags::seq)).required().check(positive_integer());
  flag("--mode",
       "train, inference, or a serving phase: prefill (prompts of --seq tokens, writing the KV cache) or decode (one "
       "token per sequence over a KV cache of --context tokens)")
      .on(forecast, to(&forecast_flags::mode)).workload().list()
      .check(member_list({"train", "inference", "prefill", "decode"}))
      .on(search, to(&search_flags::mode)).help_as("train or inference").show_default()
      .check(CLI::IsMember({"train", "inference"}));
  flag("--context", "Tokens already in each sequence's KV cache (required by, and only for, --mode decode; a --mode list "
                    "gives it to its decode rows only)")
      .on(forecast, to(&forecast_flags::context)).workload().list().check(positive_list()).type("N[,N…]");
  // the lengths go to scripts/neusight/serve.lua as given: length_spec is their one check and bound (neusight.workload
  // MAX_SIZE), whose message names the flag and the limit
  // required unless --requests-file gives each request's (cli/app.cpp)
  flag("--input-len", "Prompt tokens per request: N, or uniform:LO:HI (integers, inclusive; --rate only); required "
                      "unless --requests-file")
      .on(serve, to(&serve_flags::input_len));
  flag("--output-len", "Generated tokens per request (the first comes from the prefill): N, or uniform:LO:HI; "
                       "required unless --requests-file")
      .on(serve, to(&serve_flags::output_len));
  flag("--optimizer", "Optimizer step in training: none, sgd, adam, adamw, or an op rule of yours with an optimizer field "
                     "(--ops DIR; README: Operator rules)")  // scripts/neusight/workload.lua checks the name
      .on(forecast, to(&forecast_flags::optimizer)).workload()
      .on(search, to(&search_flags::optimizer)).note(" (default adam)");
  flag("--optimizer-impl",
       "How the step runs: fused (one kernel; default for adamw, and under Megatron kernels: parallel runs) or foreach "
       "(multi-tensor passes; default for adam, sgd otherwise)")
      .on(forecast, to(&forecast_flags::optimizer_impl)).workload()
      .on(search, to(&search_flags::optimizer_impl));
  flag("--dtype",
       "Compute element type: fp32, tf32, fp16, bf16, fp8 (also as people write them: bfloat16, BF16, torch.float16, "
       "fp8_e4m3, …)")
      .on(forecast, to(&forecast_flags::dtype)).workload().list().check(nonempty_list())
      .note("; default fp32 (a workload's own dtype under run): the model as PyTorch loads it without torch_dtype "
            "(a config.json's torch_dtype is not read), prefill and decode included; serve's default is bf16")
      .on(search, to(&search_flags::dtype))
      .on(serve, to(&serve_flags::dtype)).note("; default bf16. fp8 is W8A8 as vLLM runs an FP8 checkpoint: fp8 "
                                                 "linear GEMMs over bf16 activations (embeddings, norms, attention and LM "
                                                 "head in bf16), a bf16 KV cache unless --kv-dtype fp8 (--weight-dtype "
                                                 "fp8 with bf16 compute is weight-only)");
  flag("--kv-dtype",
       "KV-cache element type of the serving phases (prefill, decode): fp8, bf16, fp16 or fp32; default the "
       "activations' dtype: the compute dtype, bf16 under --dtype fp8 (vLLM's kv_cache_dtype auto). The cache bytes, the "
       "KV-cache writes and the decode attention's cache reads shrink; FLOPs stay at --dtype")
      .on(forecast, to(&forecast_flags::kv_dtype)).workload()
      .on(serve, to(&serve_flags::kv_dtype)).note(" (fp8 halves a bf16 cache: more concurrent sequences)");
  flag("--weight-dtype",
       "Weight-only quantisation (inference, prefill, decode): int8, int4 or fp8 weights, dequantised in the GEMM; "
       "compute stays at --dtype")
      .on(forecast, to(&forecast_flags::weight_dtype)).workload()
      .on(serve, to(&serve_flags::weight_dtype));
  flag("--precision",
       "Precision recipe: pure (parameters, gradients, optimizer state in --dtype) or amp (fp32 master weights and "
       "optimizer state, 16-bit compute); default amp when training in fp16/bf16/fp8, else pure "
       "(scripts/neusight/precision.lua)")
      .on(forecast, to(&forecast_flags::precision)).workload()
      .on(search, to(&search_flags::precision));
  flag("--attention",
       "Attention implementation: eager (matmul-softmax-matmul kernels) or sdpa (one fused FlashAttention kernel each "
       "way); default sdpa for bf16/fp16/fp8 where the model has it, else eager")
      .check(CLI::IsMember({"eager", "sdpa"}))
      .on(forecast, to(&forecast_flags::attention)).workload()
      .on(serve, to(&serve_flags::attention));
  flag("--experts",
       "How an MoE model's routed experts run: loop (HF eager's per-expert loop) or grouped (permute, grouped GEMMs, "
       "unpermute: Megatron-Core GroupedMLP / vLLM fused_moe; scripts/neusight/models/moe.lua)")
      .check(CLI::IsMember({"loop", "grouped"}))
      .on(forecast, to(&forecast_flags::experts)).workload().note("; default loop")
      .on(serve, to(&serve_flags::experts)).note("; default grouped, as serving engines run them")
      .on(search, to(&search_flags::experts)).note("; every layout; default loop (Megatron-LM's SequentialMLP, its "
                                                  "default without --moe-grouped-gemm)");
  flag("--router-skew",
       "Load imbalance of an MoE model's routed experts under expert parallelism: uniform (the busiest rank gets the "
       "expected maximum of a uniform random router's rows; default), balanced (every rank the mean) or a factor >= 1 "
       "(the busiest rank's rows over the mean; scripts/neusight/models/moe.lua)")
      .type("SKEW")
      .check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("an empty value (uniform, balanced or a factor >= 1)") : std::string(); }, ""))
      .on(forecast, to(&forecast_flags::router_skew)).workload()  // serve has no expert parallelism: not offered there
      .on(search, to(&search_flags::router_skew)).note("; every layout with ep > 1");
  flag("--lora-rank",
       "LoRA fine-tuning (--mode train, one GPU): the base model frozen, rank-R adapters A (in -> R) and B (R -> out) "
       "trained on each --lora-targets linear, HF PEFT's LoraLayer (scripts/neusight/lora.lua)")
      .type("R").check(positive_integer())
      .on(forecast, to(&forecast_flags::lora_rank)).workload();
  flag("--lora-targets",
       "LoRA's target linears, PEFT's target_modules (module names, or without _proj: q,k,v,o,gate,up,down); default "
       "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj, those the model has")
      .type("NAME[,NAME…]").check(nonempty_list())
      .on(forecast, to(&forecast_flags::lora_targets)).workload();
  flag("--predictor", predictor_help())
      .on(forecast, to(&forecast_flags::predictor))
      .on(search, to(&search_flags::predictor))
      .on(serve, to(&serve_flags::predictor))
      .on(eval_kernels, to(&eval_kernels_flags::predictor))
      .on(eval_models, to(&eval_models_flags::predictor))
      .on(scale, to(&scale_flags::predictor)).note(" — whose forecasts on the two GPUs give the ratio");
  flag("--weights",
       "Weights root of the neusight predictor, laid out as weights/<vendor>/<family> (default: the bundled weights/; "
       "e.g. the --out of weights/train.sh)")
      .type("DIR").check(existing_dir())
      .on(forecast, to(&forecast_flags::weights))
      .on(search, to(&search_flags::weights))
      .on(eval_kernels, to(&eval_kernels_flags::weights))
      .on(eval_models, to(&eval_models_flags::weights))
      .on(scale, to(&scale_flags::weights));
  flag("--overhead",
       "Host-side framework overhead per kernel launch (scripts/neusight/overhead.lua: a launch takes at least the "
       "GPU's launch_s): on or off (default: the script's `enabled`, off as shipped). The shipped launch_s is 0 on "
       "every GPU (its fitted value), so on changes nothing and a warning says so until launch_s is set there")
      .check(CLI::IsMember({"on", "off"}))
      .on(forecast, to(&forecast_flags::overhead))
      .on(eval_models, to(&eval_models_flags::overhead));
  flag("--launch",
       "Kernel launches: eager (PyTorch, one host launch per op: the predictors' times) or graph (CUDA-graph replay as "
       "serving engines run, a hipGraph on AMD/ROCm; scripts/neusight/launch.lua)")
      .check(CLI::IsMember({"eager", "graph"}))
      .on(forecast, to(&forecast_flags::launch)).workload().note("; default eager")
      .on(serve, to(&serve_flags::launch)).note("; default graph");
  flag("--fusion", "Inference with torch.compile-style kernel fusion (scripts/neusight/fusion.lua)")
      .on(forecast, to(&forecast_flags::fusion)).workload();
  flag("--flash-attention", "Like --fusion, and each attention block becomes one FlashAttention kernel")
      .on(forecast, to(&forecast_flags::flash_attention)).workload();

  // Parallelism.
  flag("--dp", "Data-parallel degree: replicas; --batch stays the global batch")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::dp)).workload().list().check(positive_list()).type("N[,N…]");
  flag("--tp", "Tensor-parallel degree (Megatron-style sharding of each layer)")
      .check(positive_list()).type("N[,N…]")
      .on(forecast, to(&forecast_flags::tp)).workload().list().group(parallel_group)
      .on(serve, to(&raw_flags::serve_tp)).note("; one replica over tp GPUs (--sweep: a list, e.g. 1,2,4)");
  flag("--ep", "Expert-parallel degree (MoE models): experts spread over ep of the dp ranks")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::ep)).workload().list().check(positive_list()).type("N[,N…]")
      .on(search, to(&search_flags::ep)).check(positive_integer())
      .note("; fixed, where the default searches every ep dividing dp and the expert count");
  flag("--pp", "Pipeline-parallel degree: stages")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::pp)).workload().list().check(positive_list()).type("N[,N…]");
  flag("--microbatches", "Microbatches per iteration and pipeline (batch / (dp * microbatches) each)")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::microbatches)).workload().list().check(positive_list()).type("N[,N…]");
  flag("--schedule", "Pipeline schedule: a name of neusight.parallel's schedule registry (bundled: gpipe, 1f1b, interleaved)")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::schedule)).workload()  // scripts/neusight/parallel.lua checks the name
      .on(search, to(&search_flags::schedule)).type("NAME[,NAME…]").check(nonempty_list())  // search.lua checks the names
      .note(" — a comma-separated list, each searched (e.g. 1f1b,interleaved; default 1f1b)");
  flag("--virtual-stages", "Model chunks per device of the interleaved schedule (default 2 with --schedule interleaved)")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::virtual_stages)).workload().check(positive_integer()).type("N")
      .on(search, to(&search_flags::virtual_stages)).check(positive_list()).note(" — a comma-separated list, each searched");
  flag("--bucket-mb", "Data-parallel gradient bucket size in MB (default 25, PyTorch DDP's)")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::bucket_mb)).workload().check(finite_number(false)).type("MB");
  flag("--overlap-grad-reduce", "Overlap the data-parallel gradient reduction with backward: on (default) or off")
      .group(parallel_group).check(CLI::IsMember({"on", "off"}))
      .on(forecast, to(&forecast_flags::overlap_grad_reduce)).workload();
  flag("--kernels",
       "Whose kernels run the model: megatron (Megatron-LM's fused ones; default with more than one GPU; on one GPU a "
       "one-device plan, to compare like with like) or eager (the HF eager graph; default on one GPU)")
      .on(forecast, to(&forecast_flags::kernels)).workload()  // scripts/neusight/parallel/config.lua checks the name
      .group(parallel_group)
      .on(serve, to(&serve_flags::kernels))  // serve.lua checks it against config.lua's names; serve's own options
      .help_as("Whose kernels run the model: megatron (Megatron-LM's fused set, which vLLM, SGLang and TensorRT-LLM "
               "run too: fused RMSNorm, one QKV GEMM, one gate-up GEMM, fused rotary and SiLU-and-mul; default, at "
               "every --tp) or eager (the HF eager graph, as HF transformers' generate runs it)");
  flag("--recompute",
       "Activation recomputation: none, selective (core attention re-runs in backward) or full (every layer re-runs its "
       "forward)")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::recompute)).workload().list().check(nonempty_list())  // parallel/config.lua checks the names
      .on(search, to(&search_flags::recompute)).show_default()  // scripts/neusight/search.lua checks the mode
      .note("; or auto (per layout the cheapest that fits) or all (every mode, each ranked)");
  flag("--sequence-parallel", "Megatron sequence parallelism (needs --tp >= 2): norms/dropouts on s/tp tokens")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::sequence_parallel)).workload()
      .on(search, to(&search_flags::sequence_parallel))
      .help_as("Megatron sequence parallelism (norms/dropouts on s/tp tokens) in every searched layout with tp > 1");
  flag("--distributed-optimizer", "Shard the optimizer state and step over dp (Megatron's distributed optimizer, ZeRO-1)")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::distributed_optimizer)).workload()
      .on(search, to(&search_flags::distributed_optimizer));
  flag("--zero",
       "ZeRO stage of data-parallel training: 0 (DDP), 1 (optimizer state sharded over dp: the same as "
       "--distributed-optimizer), 2 (+ gradients), 3 (+ parameters: FSDP full sharding, each layer's parameters "
       "all-gathered before its forward and backward); 2 and 3 need pp 1, 3 ep 1")
      .group(parallel_group)
      .excludes({"--distributed-optimizer"})  // the same fact: --zero 1 is it
      .on(forecast, to(&forecast_flags::zero)).workload().list().check(nonempty_list()).type("N[,N…]")
      .on(search, to(&search_flags::zero))
      .help_as("ZeRO stages to forecast each layout under: a list (0,3) or all (0,1,2,3); 2 and 3 skip layouts with "
               "pp > 1, 3 those with ep > 1; default: the workload's (DDP, or --distributed-optimizer)");
  flag("--cluster",
       "Cluster: a gpus/clusters/*.toml name (dgx_h100, dgx_a100, pcie_8gpu), a .toml path, or none (the GPU's own "
       "links, dropping a workload's cluster); default: nodes of up to 8 GPUs on the GPU's own links, joined past 8 "
       "GPUs by one 400 Gb/s NIC per GPU, at most the GPU's PCIe link (scripts/neusight/topology.lua)")
      .group(parallel_group)
      .on(forecast, to(&forecast_flags::cluster)).workload()
      .on(search, to(&search_flags::cluster));

  // predict --graph (after the flags it excludes: CLI11 names the first given one in "--batch excludes --graph")
  flag("--graph", "")
      .on(predict, to(&graph_flags::file))
      .help_as("Reference operator graph opgraph/<model>-<inf|train>-<seq>-<batch>.csv instead of --model (needs --gpu; "
               "mode from the file name)")
      .check(existing_file())
      .excludes({"--model", "--batch", "--seq", "--context", "--optimizer", "--optimizer-impl", "--dtype", "--kv-dtype",
                 "--weight-dtype", "--precision", "--attention", "--experts", "--router-skew", "--lora-rank", "--lora-targets", "--fusion", "--flash-attention", "--dp",
                 "--tp", "--pp", "--ep", "--microbatches", "--schedule", "--virtual-stages", "--bucket-mb",
                 "--overlap-grad-reduce", "--kernels", "--cluster", "--recompute", "--sequence-parallel",
                 "--distributed-optimizer", "--zero",
                 "--calibrate"})  // a reference graph is not fitted (run_graph has no --calibrate): refused, not ignored
      .on(scale, to(&scale_flags::graph)).help_as("Operator graph of the trace (default: opgraph/<tag>.csv beside label/)");
  flag("--layers", "")
      .check(positive_integer())
      .on(predict, to(&graph_flags::layers))
      .help_as("Layer count of --graph (default: the model config in ../DLmodel_configs beside the file)")
      .needs({"--graph"})
      .on(scale, to(&scale_flags::layers)).help_as("Replicate the traced layer N times (default: the model config)");

  // search.
  flag("--max-tp", "Largest tensor-parallel degree to try (keep tp inside a node)")
      .on(search, to(&search_flags::max_tp)).show_default().check(positive_integer());
  flag("--top", "Show this many layouts").on(search, to(&search_flags::top)).show_default().check(positive_integer());
  flag("--all", "Also list layouts that do not fit in memory").on(search, to(&search_flags::all));

  // serve.
  flag("--rate", "Continuous batching: Poisson arrivals (gamma with --burstiness), requests per second (--sweep: a list, e.g. 1,4,16)")
      .on(serve, to(&raw_flags::serve_rate)).check(number_list()).type("FLOAT[,FLOAT…]").excludes({"--batch"});
  // 0 is "not given" in serve_flags (serve.lua fills the default): a 0 given is refused here, never taken as the default
  flag("--requests", "Requests to simulate (with --rate; default 1000)")
      .on(serve, to(&serve_flags::requests)).check(positive_integer()).needs({"--rate"});
  flag("--burstiness",
       "Gamma shape of the gaps between --rate's arrivals, as vLLM benchmark_serving's --burstiness: the mean gap stays "
       "1/rate; 1 (the default) is Poisson, below 1 burstier (coefficient of variation 1/sqrt(B)), above 1 more regular")
      .on(serve, to(&serve_flags::burstiness)).check(finite_number(false)).needs({"--rate"}).type("B");
  flag("--requests-file",
       "Continuous batching of a trace instead of --rate, --input-len and --output-len: one request a row, in arrival "
       "order. CSV with a header, or JSON Lines (one object a line); columns (case ignored): the arrival, arrival_s "
       "(seconds from the start) or TIMESTAMP (a date and time YYYY-MM-DD HH:MM:SS[.fraction], or a number of seconds; "
       "the first row arrives at 0), the prompt, input_len or ContextTokens, and the output, output_len or "
       "GeneratedTokens (positive integers): the Azure LLM inference traces read as they are. An error names FILE:LINE")
      .on(serve, to(&serve_flags::requests_file)).type("FILE")
      .excludes({"--rate", "--batch", "--input-len", "--output-len", "--calibrate"});  // --sweep: cli/app.cpp says why
  flag("--time-scale", "Multiply the --requests-file trace's arrival times by X (0.5 replays it twice as fast)")
      .on(serve, to(&serve_flags::time_scale)).check(finite_number(false)).needs({"--requests-file"}).type("X");
  flag("--seed", "Random seed")
      .on(serve, to(&serve_flags::seed)).note(" of the arrivals and lengths (with --rate; with --requests-file of the capacity replay only; any integer, default 0)").check(whole_integer<int64_t>([](const std::string& v, const std::string& range) {
        return "Value " + v + " is not an integer " + range;
      }))  // with --rate or --requests-file (cli/app.cpp): the latter's capacity replay draws from it
      .on(train, to_train(&train_options::seed)).note(" (split, init, batches)").show_default().check(whole_integer<uint64_t>([](const std::string& v, const std::string& range) {
        return "an integer " + range + " expected, got '" + v + "'";
      }));
  // these four need --rate or --requests-file (cli/app.cpp: CLI11's needs takes every option it names)
  flag("--chunked-prefill",
       "Chunked prefill: at most TOKENS tokens per step, decodes first (with --rate or --requests-file)")
      .on(serve, to(&serve_flags::chunked_prefill)).check(positive_integer());
  flag("--max-batch", "Most running requests (vLLM max_num_seqs; default 256)")
      .on(serve, to(&serve_flags::max_batch)).check(positive_integer());
  flag("--max-batched-tokens",
       "Most prompt tokens in one prefill step without chunking (default 8192; beside --chunked-prefill, whose TOKENS "
       "are a chunked step's budget, it has no effect and a warning says so)")
      .on(serve, to(&serve_flags::max_batched_tokens)).check(positive_integer());
  flag("--block-size", "KV-cache block size in tokens (default 16)")
      .on(serve, to(&serve_flags::block_size)).check(positive_integer());
  flag("--gpu-memory-utilization", "Fraction of GPU memory for weights + KV cache, in (0, 1] (default 0.9, vLLM's)")
      .on(serve, to(&serve_flags::gpu_memory_utilization)).check(unit_fraction());
  flag("--sweep",
       "Run every combination of the lists --gpu x --tp x (--batch | --rate), one row each (the numbers of a single "
       "`serve` run of it), and choose the cheapest meeting the targets: lowest $ per million output tokens when every "
       "GPU file has price_per_hour_usd, else highest output tokens/s per GPU. A combination that cannot run (does not "
       "fit, tp not dividing the heads) is a row with its error; when none meets the targets the run says so and exits "
       "0 (1 when none could run at all; a script's error stops the sweep)")
      .on(serve, to(&serve_flags::sweep));
  flag("--ttft-ms",
       "--sweep target: time to first token at most this many ms (the p90 over the requests with --rate; the batch's "
       "prefill with --batch)")
      .on(serve, to(&serve_flags::ttft_ms)).check(finite_number(false)).needs({"--sweep"});
  flag("--tpot-ms",
       "--sweep target: time per output token at most this many ms (the p90 over the requests with --rate; the mean "
       "over the decode steps with --batch)")
      .on(serve, to(&serve_flags::tpot_ms)).check(finite_number(false)).needs({"--sweep"});

  // train and eval.
  flag("--family", family_help())
      .on(train, to(&train_flags::family)).required().check(CLI::IsMember(family_name_list()));
  flag("--data", "CSV files or folders (searched recursively), e.g. dataset/train/collect/bmm")
      .on(train, to(&train_flags::data)).required();
  flag("--out", "Output weight folder, e.g. weights/nvidia/bmm").on(train, to(&train_flags::out)).required();
  flag("--exclude-gpu", "Leave this GPU's rows out (repeatable)")
      .on(train, to_each(&train_flags::exclude_gpus))
      .on(eval_kernels, to_each(&eval_kernels_flags::exclude_gpus));
  flag("--vendor", "Expected vendor of the rows (nvidia or amd)").on(train, to(&train_flags::vendor));
  flag("--tiles", "Tiles of the rows: measured (from the kernel names) or rule (what a forecast uses)")
      .check(CLI::IsMember({"measured", "rule"}))
      .on(train, to(&train_flags::tiles)).note("; default measured")
      .on(eval_kernels, to(&eval_kernels_flags::tiles)).note("; default rule (measured: an oracle)");
  flag("--hidden", "Hidden layer sizes: 1 to " + std::to_string(hidden_layers_max) + " widths from 1 to " +
                       std::to_string(hidden_width_max))
      .on(train, to(&raw_flags::hidden)).show_default().check(hidden_layers());
  flag("--epochs", "Maximum epochs").on(train, to_train(&train_options::max_epochs)).show_default().check(positive_integer(flag_int_max));
  flag("--patience", "Stop after this many epochs without improvement")
      .on(train, to_train(&train_options::patience)).show_default().check(integer_value(0, flag_int_max));
  flag("--lr", "Adam learning rate").on(train, to_train(&train_options::lr)).show_default().check(finite_number(false));
  flag("--threads", "Threads per mini-batch").on(train, to_train(&train_options::threads)).show_default()
      .check(positive_integer(flag_int_max));
  flag("-q,--quiet", "No progress bar").on(train, to(&train_flags::quiet));
  flag("--force", "Replace a model already in --out").on(train, to(&train_flags::force));
  flag("--dry-run",
       "Read the rows as training would and print the manifest keys they alone decide (min_seconds: the least measured "
       "latency, tensor-core and attention families); train nothing, write nothing (--out is not touched)")
      .on(train, to(&train_flags::dry_run));
  flag("--graphs", "Folder of opgraph/<tag>.csv (default: opgraph/ beside label/)")
      .on(eval_models, to(&eval_models_flags::graphs)).type("DIR");
  flag("--calibrate-each",
       "Also score calibration from one measurement: per GPU, each label in turn calibrates the forecast "
       "(scripts/neusight/calibration.lua, as predict --calibrate) and the GPU's other labels are scored before and after")
      .on(eval_models, to(&eval_models_flags::calibrate_each));

  // scale.
  flag("--trace", "Trace: per-op label CSV label/<GPU>/<tag>.csv, Chrome-trace JSON (one GPU's kernels: a trace whose "
                  "kernels ran on several devices is refused), or wavescale manifest")
      .on(scale, to(&scale_flags::trace)).required().check(existing_file());
  flag("--from", "GPU the trace was measured on (default: the GPU the trace names — a Chrome trace's deviceProperties "
                 "entry of the device its kernels ran on —, or its label/<GPU>/ folder); an error when the trace names "
                 "another")
      .on(scale, to(&scale_flags::from));
  flag("--to", "GPU to forecast").on(scale, to(&scale_flags::to)).required();
  flag("--wave-variant",
       "Wave scaling of Chrome/wavescale traces: code (the released code, default) or paper (wave counts)")
      .on(scale, to(&scale_flags::wave_variant)).check(CLI::IsMember({"code", "paper"}));

  // The session: search paths, diagnostics, script limits.
  flag("--ops", "Directory of op rules searched before the bundled ops/ (repeatable)")
      .type("DIR").check(existing_dir()).on(op_readers, to(&common_flags::ops_dirs));  // as --scripts: a typo is no silent no-op
  flag("--scripts",
       "Directory of Lua modules searched before the bundled scripts/ (repeatable): DIR/neusight/launch.lua replaces "
       "module neusight.launch; DIR/neusight/pipeline.lua the steps of every forecast (predict, run, serve, search, "
       "eval models); DIR/neusight/models/<arch>.lua adds a model builder (README: Writing a model builder)")
      .type("DIR").check(existing_dir()).on(sessions, to(&common_flags::scripts_dirs));
  flag("--gpus-dir",
       "Directory of GPU files (*.toml) found by file stem, name or alias before the bundled gpus/ (repeatable; then "
       "NEUSIGHT_GPUS_PATH's ';'-separated folders): a file there hides a bundled one of its stem or GPU name (-v "
       "names each)")
      .type("DIR").check(existing_dir()).on(gpu_readers, to(&common_flags::gpus_dirs));
  flag("--traceback", "Print the Lua traceback of script errors").on(sessions, to(&common_flags::traceback));
  flag("-v,--verbose", "Report op, script and GPU (--gpus-dir) files that shadow others, and other details")
      .on(sessions, to(&common_flags::verbose));
  flag("--script-budget",
       "Lua instructions a script may run per call (default " + std::to_string(script_budget_default) +
           ", or NEUSIGHT_SCRIPT_BUDGET)")
      .type("N").check(integer_value(0, flag_integer_max)).group(limits_group).on(sessions, to(&common_flags::script_budget));
  flag("--script-memory",
       "Lua heap in MB while a script runs (default " + std::to_string(script_memory_mb_default) +
           ", or NEUSIGHT_SCRIPT_MEMORY)")
      .type("MB").check(integer_value(0, flag_integer_max)).group(limits_group).on(sessions, to(&common_flags::script_memory));
  flag("--script-timeout",
       "CPU seconds a script may run per call, also inside one library call (default " +
           fmt::format("{:g}", script_timeout_default) + ", or NEUSIGHT_SCRIPT_TIMEOUT)")
      .type("SECONDS").check(finite_number(true)).group(limits_group).on(sessions, to(&common_flags::script_timeout));

  // The report.
  flag("--format", "Output format")
      .on(reports & ~no_csv, to(&common_flags::format)).check(CLI::IsMember({"table", "json", "csv"}))
      .on(no_csv, to(&common_flags::format)).check(CLI::IsMember({"table", "json"}));
  flag("-o,--output", "Write the report to FILE instead of standard output")
      .type("FILE")
      .on(reports & ~no_csv, to(&common_flags::output)).note(" (a .json or .csv FILE sets --format unless it is given)")
      .on(no_csv, to(&common_flags::output))  // app.cpp refuses -o x.csv on these: said here, as --format says it
      .note(" (a .json FILE sets --format unless it is given; this command writes a table or JSON, not CSV)");
  flag("--report",
       "Also write a self-contained HTML page of the forecast to FILE (scripts/neusight/html.lua): time by op kind and "
       "phase, memory, the pipeline stages and their op-by-op timeline (serve: latency percentiles, what bounds each "
       "phase, the sweep's rows); nothing is written on error")
      .type("FILE.html")
      .on(run | predict, to(&common_flags::report_html))
      .on(serve, to(&serve_flags::report_html));

  // Calibration: --no-calibration on the commands that forecast (NEUSIGHT_NO_CALIBRATION=1 for all); --calibrate on
  // those that forecast one workload (run, predict) or one static serving batch (serve).
  flag("--no-calibration",
       "Ignore the GPU's calibration (<gpu file stem>.calibration.toml beside its file, written by --calibrate; also "
       "NEUSIGHT_NO_CALIBRATION=1)")
      .on(run | predict, to(&common_flags::no_calibration))
      .on(serve, to(&serve_flags::no_calibration))
      .on(search, to(&search_flags::no_calibration));
  flag("--calibrate", "Fit per-kernel-family correction factors of the GPU from FILE")
      .type("FILE")
      .excludes({"--no-calibration", "--report"})  // it writes the calibration and its summary, not a forecast
      .on(run | predict, to(&common_flags::calibrate))
      .note(": a TOML with latency_ms = the measured time of exactly this workload on that GPU (and optionally note = "
            "\"…\"), or a PyTorch-profiler Chrome trace (.json, recorded with shapes on that GPU: "
            "scripts/collect/hf_trace.py; predict --gpu G only, no workload); they are written beside the GPU's file as "
            "<stem>.calibration.toml and used by later forecasts on it (scripts/neusight/calibration.lua)")
      .on(serve, to(&serve_flags::calibrate)).excludes({"--sweep"})
      .note(", a TOML with the measured times of exactly this static batch (--batch; not --rate) on that GPU: ttft_ms = "
            "its prefill (time to first token) and/or tpot_ms = its mean decode step (time per output token), optionally "
            "note = \"…\"; each phase is fitted from its own, as predict --calibrate does: the TTFT's factors correct the "
            "prefill and other forecasts (the TPOT's without ttft_ms), the TPOT's decode steps (without tpot_ms decode "
            "steps keep their forecast). "
            "Written beside the GPU's file as <stem>.calibration.toml and used by later forecasts on it (predict, "
            "search, serve; scripts/neusight/calibration.lua fit_serve)");
  return t;
}

const std::vector<flag_spec>& table() {
  static const std::vector<flag_spec> t = table_make();
  return t;
}

}  // namespace

bool flag_path_missing() { return path_missing_noted; }

std::vector<std::string> workload_flag_names(unsigned command) {
  std::vector<std::string> names;
  for (const flag_spec& f : table())
    for (const flag_use& u : f.uses)
      if ((u.commands & command) && u.workload) names.push_back(f.name);
  return names;
}

CLI::App* flags_add(CLI::App* app, unsigned command, flag_targets& t) {
  std::vector<std::pair<CLI::Option*, flag_rules>> added;
  for (const flag_spec& f : table())
    for (const flag_use& u : f.uses) {
      if (!(u.commands & command)) continue;
      std::string help = u.help.empty() ? f.help : u.help;
      help += u.note;
      if (u.workload && command == cmd::run) help += " (overrides the script)";
      if (u.list) help += " (a comma-separated list compares every combination)";
      CLI::Option* o = u.bind(app, f.name, help, t);
      flag_rules r = u.rules;  // the use's own rules, the entry's where the use sets none
      if (!r.check) r.check = f.rules.check;
      if (r.type_name.empty()) r.type_name = f.rules.type_name;
      if (r.group.empty()) r.group = f.rules.group;
      r.required = r.required || f.rules.required;
      r.show_default = r.show_default || f.rules.show_default;
      r.needs.insert(r.needs.begin(), f.rules.needs.begin(), f.rules.needs.end());
      r.excludes.insert(r.excludes.begin(), f.rules.excludes.begin(), f.rules.excludes.end());
      if (o->get_type_size_max() > 0) o->check(nonempty_value());  // every option that takes a value: before its check
      if (r.check) o->check(*r.check);
      if (!r.type_name.empty()) o->type_name(r.type_name);
      if (!r.group.empty()) o->group(r.group);
      if (r.required) o->required();
      if (r.show_default) o->capture_default_str();
      added.emplace_back(o, std::move(r));  // a second use on the command throws CLI::OptionAlreadyAdded
    }
  // the relations, once the command's flags are all there (a name it lacks is a mistake in the table: it throws)
  for (const auto& [o, r] : added) {
    for (const auto& n : r.needs) o->needs(app->get_option(n));
    for (const auto& n : r.excludes) o->excludes(app->get_option(n));
  }
  return app;
}

}  // namespace ns
