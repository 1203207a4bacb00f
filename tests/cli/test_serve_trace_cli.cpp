// tests/cli/test_serve_trace_cli.cpp — `neusight serve --requests-file` (a trace of arrivals and lengths, CSV or JSON
// Lines, scripts/neusight/arrivals.lua) and `--burstiness` (gamma gaps for --rate) end to end.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::run_json;

namespace {

json serve(const std::string& args) { return run_json("serve --model llama3_8b --gpu h100 " + args); }

}  // namespace

TEST_CASE("serve trace: an idle-spaced trace's requests are each a static batch of one", "[cli][serve][trace]") {
  ns_test::temp_dir t;
  // the Azure traces' header and timestamps, 10 minutes apart: each request runs alone
  const std::string file = t.write("azure.csv",
                                 "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                 "2023-11-16 18:15:46.6805900,512,4\n"
                                 "2023-11-16 18:25:46.6805900,512,8\n"
                                 "2023-11-16 18:35:46.6805900,512,2\n");
  const json s = serve("--requests-file " + file);
  CHECK(s["kind"] == "simulation");
  CHECK(s["requests"] == 3);
  CHECK(s["max_running"] == 1);
  CHECK(s["trace"]["requests"] == 3);
  CHECK(s["trace"]["duration_s"].get<double>() == Approx(1200).epsilon(1e-12));
  CHECK(s["trace"]["mean_rate_per_s"].get<double>() == Approx(2.0 / 1200).epsilon(1e-12));
  CHECK(s["trace"]["columns"]["arrival"] == "TIMESTAMP");
  CHECK(s["trace"]["format"] == "csv");
  CHECK(s["output_len_mean"].get<double>() == Approx(14.0 / 3).epsilon(1e-12));
  CHECK(s["ttft_ms"]["count"] == 3);
  const json batch1 = serve("--batch 1 --input-len 512 --output-len 4");
  const double ttft = batch1["ttft_ms"];
  CHECK(s["ttft_ms"]["min"].get<double>() == Approx(ttft).epsilon(1e-9));
  CHECK(s["ttft_ms"]["max"].get<double>() == Approx(ttft).epsilon(1e-9));
  // the same requests as JSON Lines with seconds from the start: the same numbers
  const std::string jsonl = t.write("r.jsonl",
                                  "{\"arrival_s\": 0, \"input_len\": 512, \"output_len\": 4}\n"
                                  "{\"arrival_s\": 600, \"input_len\": 512, \"output_len\": 8}\n"
                                  "{\"arrival_s\": 1200, \"input_len\": 512, \"output_len\": 2}\n");
  const json j = serve("--requests-file " + jsonl);
  CHECK(j["trace"]["format"] == "jsonl");
  CHECK(j["ttft_ms"] == s["ttft_ms"]);
  CHECK(j["tpot_ms"] == s["tpot_ms"]);
  // --time-scale 0.001: 0.6 s apart, still one at a time; the trace's span and rate scaled
  const json fast = serve("--requests-file " + jsonl + " --time-scale 0.001");
  CHECK(fast["trace"]["duration_s"].get<double>() == Approx(1.2).epsilon(1e-12));
  CHECK(fast["trace"]["time_scale"] == 0.001);
  CHECK(fast["ttft_ms"]["max"].get<double>() == Approx(ttft).epsilon(1e-9));
  CHECK(run_cli("serve --model llama3_8b --gpu h100 --rate 1 --input-len 8 --output-len 8 --time-scale 2").code == 2);
}

// tester10 #12: a trace with many requests beyond the model's max_position_embeddings said one, the longest; it now
// says how many of them there are
TEST_CASE("serve trace: the position warning counts the requests beyond max_position_embeddings", "[cli][serve][trace]") {
  ns_test::temp_dir t;
  std::string text = "arrival_s,input_len,output_len\n";
  for (int i = 0; i < 6; ++i) text += std::to_string(i * 100) + (i % 2 ? ",140000,10\n" : ",100,10\n");
  const json s = serve("--predictor roofline --requests-file " + t.write("long.csv", text).string());
  int said = 0;
  for (const auto& w : s["warnings"]) {
    const std::string text_of = w.get<std::string>();
    if (text_of.find("max_position_embeddings") == std::string::npos) continue;
    ++said;
    CHECK(text_of.find("long.csv:3: input 140000 + output 10 tokens (the longest of 3 requests of the trace beyond it)") !=
          std::string::npos);
  }
  CHECK(said == 1);
}

TEST_CASE("serve trace: the bundled example runs with chunked prefill, tp, CSV and a page", "[cli][serve][trace]") {
  ns_test::temp_dir t;
  const std::string example = (ns_test::source_dir / "examples/serve_trace.csv").string();
  const std::string page = (t.path / "p.html").string();
  const json s = serve("--requests-file " + example + " --chunked-prefill 2048 --tp 2 --report " + page);
  CHECK(s["requests"] == 48);
  CHECK(s["tp"] == 2);
  CHECK(s["chunked_prefill"] == 2048);
  CHECK(s["throughput"]["capacity_requests_per_s"].get<double>() > 0);
  CHECK(ns_test::slurp(page).find("48 requests from " + example + " over 35.9 s, mean 1.31 requests/s") !=
        std::string::npos);
  const auto csv = run_cli("serve --model llama3_8b --gpu h100 --requests-file " + example + " --format csv");
  CHECK(csv.code == 0);
  CHECK(csv.out.find("trace.requests,48") != std::string::npos);
  CHECK(csv.out.find("ttft_ms.p99,") != std::string::npos);
  const auto table = run_cli("serve --model llama3_8b --gpu h100 --requests-file " + example);
  CHECK(table.out.find("48 requests from " + example + " (csv: TIMESTAMP, ContextTokens, GeneratedTokens)") !=
        std::string::npos);
}

TEST_CASE("serve trace: bad files and conflicting options are clear errors, nothing written", "[cli][serve][trace]") {
  ns_test::temp_dir t;
  const std::string out = (t.path / "o.json").string();
  auto fails = [&](const std::string& name, const std::string& text, const std::string& message) {
    const std::string file = t.write(name, text);
    const auto r = run_cli("serve --model llama3_8b --gpu h100 --requests-file " + file + " -o " + out);
    INFO(text << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.rfind("neusight: " + file + message, 0) == 0);
    CHECK_FALSE(std::filesystem::exists(out));
  };
  const std::string h = "arrival_s,input_len,output_len\n";
  fails("empty.csv", "", ": empty: no requests");
  fails("header.csv", h, ":1: no requests: the header is the only line");
  fails("unsorted.csv", h + "0,8,8\n5,8,8\n4,8,8\n", ":4: arrival_s 4 comes 1 s before the previous row's (line 3)");
  fails("negative.csv", h + "-0.5,8,8\n", ":2: arrival_s must not be negative (got -0.5)");
  fails("fraction.csv", h + "0,8.5,8\n", ":2: input_len must be a positive integer number of tokens (got '8.5')");
  fails("missing.csv", "arrival_s,input_len\n0,8\n", ":1: no output length column: one of output_len, generatedtokens");
  fails("bad.jsonl", "{\"arrival_s\": 0, \"input_len\": 8, \"output_len\": 8}\n{\"arrival_s\": 1,}\n",
        ":2: a JSON object's key must be a string");
  const auto none = run_cli("serve --model llama3_8b --gpu h100 --requests-file " + (t.path / "nope.csv").string());
  CHECK(none.code == 1);
  CHECK(none.err.find("nope.csv") != std::string::npos);
  // what the file replaces, and what needs one setting: refused by the flags (usage errors)
  const std::string ok = t.write("ok.csv", h + "0,8,8\n");
  for (const std::string extra : {"--rate 1", "--batch 1", "--input-len 8", "--output-len 8", "--sweep",
                                  "--requests 5", "--burstiness 0.5"}) {
    const auto r = run_cli("serve --model llama3_8b --gpu h100 --requests-file " + ok + " " + extra);
    INFO(extra << "\n" << r.err);
    CHECK(r.code == 2);
  }
  const auto sweep = run_cli("serve --model llama3_8b --gpu h100,l4 --requests-file " + ok + " --sweep");
  CHECK(sweep.code == 2);
  CHECK(sweep.err.find("a trace is one workload, not a list to sweep") != std::string::npos);
  // a measurement calibrates a static batch: refused beside a trace
  const std::string m = t.write("m.toml", "ttft_ms = 10\n");
  CHECK(run_cli("serve --model llama3_8b --gpu h100 --requests-file " + ok + " --calibrate " + m).code == 2);
  // without a file the lengths are still required, and the continuous-batching options take either arrival source
  CHECK(run_cli("serve --model llama3_8b --gpu h100 --rate 1 --output-len 8").code == 2);
  const auto chunk = run_cli("serve --model llama3_8b --gpu h100 --batch 1 --input-len 8 --output-len 8 --chunked-prefill 64");
  CHECK(chunk.code == 2);
  CHECK(chunk.err.find("--chunked-prefill requires --rate (or --requests-file)") != std::string::npos);
  CHECK(run_cli("serve --model llama3_8b --gpu h100 --requests-file " + ok + " --seed 4 --max-batch 8").code == 0);
}

TEST_CASE("serve: --burstiness 1 is the Poisson run, below 1 burstier at the same rate", "[cli][serve][trace]") {
  const std::string base = "--rate 20 --requests 300 --input-len 512 --output-len 64 --seed 2";
  const json plain = serve(base);
  const json one = serve(base + " --burstiness 1");
  CHECK(one == plain);  // every number, and no new field
  const json bursty = serve(base + " --burstiness 0.2");
  CHECK(bursty["burstiness"] == 0.2);
  CHECK(bursty["ttft_ms"]["p99"].get<double>() > plain["ttft_ms"]["p99"].get<double>());
  CHECK(run_cli("serve --model llama3_8b --gpu h100 --batch 1 --input-len 8 --output-len 8 --burstiness 0.5").code == 2);
  // a sweep runs each rate as that single serve does, and says the burstiness
  const json sweep = run_json("serve --model llama3_8b --gpu h100 --rate 20,25 --requests 300 --input-len 512 "
                              "--output-len 64 --seed 2 --burstiness 0.2 --sweep");
  CHECK(sweep["burstiness"] == 0.2);
  CHECK(sweep["rows"][0]["ttft_ms_p90"] == bursty["ttft_ms"]["p90"]);
  CHECK(run_cli("serve --model llama3_8b --gpu h100 " + base + " --burstiness 0").code == 2);
}
