// engine/core/cluster_spec.cpp — strict TOML loading of cluster descriptions (gpus/clusters/*.toml).
#include "core/cluster_spec.h"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "core/text.h"
#include "core/toml_read.h"

namespace ns {
namespace fs = std::filesystem;

namespace {

double number_of(const toml::node& v, const std::string& at, const std::string& key) {
  if (v.is_integer()) return double(v.as_integer()->get());
  if (v.is_floating_point()) return v.as_floating_point()->get();
  throw error(at + ": key '" + key + "' must be a number");
}

link_spec link_parse(const toml::node& node, const std::string& source, const std::string& at, const std::string& name) {
  const toml::table* t = node.as_table();
  if (!t) throw error(at + ": key '" + name + "' must be a table ([" + name + "] with bw_gbps, latency_us, efficiency)");
  static const std::vector<std::string> keys = {"bw_gbps", "latency_us", "efficiency"};
  link_spec l;
  for (auto&& [key, value] : *t) {
    const std::string k(key.str());
    const std::string kat = toml_where(source, key.source().begin);
    const std::string full = name + "." + k;
    if (std::find(keys.begin(), keys.end(), k) == keys.end())
      throw error(kat + ": unknown key '" + full + "'" + text_did_you_mean(k, keys));
    const double x = number_of(value, kat, full);
    if (k == "bw_gbps") {
      if (!(x > 0 && x <= cluster_max_bw_gbps))
        throw error(kat + ": key '" + full + "' must be > 0 and at most " + text_limit(cluster_max_bw_gbps) +
                    " (GB/s per direction)");
      l.bw_gbps = x;
    } else if (k == "latency_us") {
      if (!(x >= 0 && x <= cluster_max_latency_us))
        throw error(kat + ": key '" + full + "' must be >= 0 and at most " + text_limit(cluster_max_latency_us) +
                    " (microseconds per message)");
      l.latency_us = x;
    } else {
      if (!(x > 0 && x <= 1)) throw error(kat + ": key '" + full + "' must be in (0, 1] (fraction of bw_gbps reached)");
      l.efficiency = x;
    }
  }
  return l;
}

}  // namespace

cluster_spec cluster_spec_parse(std::string_view toml_text, const std::string& source) {
  const toml::table tbl = toml_parse_text(toml_text, source);
  static const std::vector<std::string> keys = {"name", "description", "gpu", "nodes", "gpus_per_node", "intra", "inter"};
  cluster_spec c;
  c.source = source;
  bool has_gpn = false;
  for (auto&& [key, value] : tbl) {
    const std::string k(key.str());
    const std::string at = toml_where(source, key.source().begin);
    if (std::find(keys.begin(), keys.end(), k) == keys.end())
      throw error(at + ": unknown key '" + k + "'" + text_did_you_mean(k, keys));
    if (k == "name" || k == "description") {
      if (!value.is_string()) throw error(at + ": key '" + k + "' must be a string");
      (k == "name" ? c.name : c.description) = value.as_string()->get();
    } else if (k == "gpu") {
      // one name, or an array of the names of GPUs with the same links (DGX A100: 40 or 80 GB parts)
      const auto bad = [&] {
        return error(at + ": key 'gpu' must be the name of the GPU the cluster was built for (\"H100-SXM5-80GB\"), "
                     "or an array of names");
      };
      if (const toml::array* arr = value.as_array()) {
        if (arr->empty()) throw bad();
        for (const toml::node& item : *arr) {
          if (!item.is_string() || item.as_string()->get().empty()) throw bad();
          c.gpus.push_back(item.as_string()->get());
        }
      } else {
        if (!value.is_string() || value.as_string()->get().empty()) throw bad();
        c.gpus.push_back(value.as_string()->get());
      }
    } else if (k == "gpus_per_node" || k == "nodes") {
      if (!value.is_integer() || value.as_integer()->get() < 1 || value.as_integer()->get() > cluster_max_count)
        throw error(at + ": key '" + k + "' must be a positive integer, at most " + std::to_string(cluster_max_count));
      if (k == "nodes") c.nodes = value.as_integer()->get();
      else c.gpus_per_node = value.as_integer()->get(), has_gpn = true;
    } else {
      (k == "intra" ? c.intra : c.inter) = link_parse(value, source, at, k);
    }
  }
  if (!has_gpn) {
    const size_t lines = size_t(std::count(toml_text.begin(), toml_text.end(), '\n'));
    throw error(source + ":" + std::to_string(std::max<size_t>(lines, 1)) + ":1: missing required key 'gpus_per_node'");
  }
  return c;
}

cluster_spec cluster_resolve(const fs::path& dir, const std::string& query) {
  if (query == "none") {
    cluster_spec c;
    c.source = c.name = "none";
    c.none = true;
    return c;
  }
  fs::path file;
  std::string display;
  if (fs::path(query).extension() == ".toml" || query.find('/') != std::string::npos) {
    file = query, display = query;
  } else {
    file = dir / (query + ".toml"), display = "gpus/clusters/" + query + ".toml";
    if (!fs::is_regular_file(file)) {
      std::vector<std::string> names;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".toml") names.push_back(e.path().stem().string());
      std::sort(names.begin(), names.end());
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw error("unknown cluster '" + query + "'" + text_did_you_mean(query, names) + "; known: " + list +
                  " (or give a path to a .toml file, or none for the GPU's own links)");
    }
  }
  return cluster_spec_parse(text_file_read(fs::path(file).string(), display, text_file_max_script, "cannot read cluster file"),
                            display);
}

}  // namespace ns
