-- scripts/neusight/search.lua — what `neusight search` (engine/cli/search_cmd.cpp) needs to know about a model before
-- it enumerates layouts: the expert count (the expert-parallel degrees ep worth trying divide it) and the layer count
-- (the interleaved schedule wants layers divisible by pp × virtual_stages, as Megatron-LM does); and which schedules
-- and recomputation modes it may try (neusight.parallel's names: search lists none of its own), which of them share a
-- build (SHARED_BUILD) and which run model chunks (neusight.parallel.config's CHUNKED; their pp and layer rules:
-- pipeline_skip below). engine/cli/search_cmd.cpp names no schedule.
local ipairs, pairs, type, setmetatable = ipairs, pairs, type, setmetatable

local M = {}

--- The schedules whose variants (the same ep, the schedule's default virtual stages) share one model build in search:
--- each device runs one model chunk under them, so the graph, its kernels and their times do not depend on which
--- (only the timeline does), and search re-times one build with the plan's schedule changed. Interleaved builds its
--- own (its model chunks); a schedule a --scripts override registers builds its own unless it is added here.
M.SHARED_BUILD = { gpipe = true, ["1f1b"] = true }

-- The schedules that run several model chunks per device (virtual stages), neusight.parallel.config's CHUNKED (name →
-- default chunks): search tries --virtual-stages with them only, and shows their rows as schedule/v.
-- An older --scripts config.lua (before CHUNKED) ran interleaved alone with chunks, 2 by default.
local function chunked() return require("neusight.parallel.config").CHUNKED or { interleaved = 2 } end

--- search's --schedule and --recompute checked against neusight.parallel's names, with normalize's messages
--- (did-you-mean included): each of `schedules` a schedule of the registry (neusight.parallel.schedule: a --scripts
--- override may add one), `recompute` "auto", "all" or one of neusight.parallel.config's CHOICES.recompute. Returns
--- { schedules = the names given (the default schedule when none), shared_build = for each of them whether it is one
--- of M.SHARED_BUILD, virtual_stages = for each whether it is one of chunked(), virtual_schedules = the names
--- of chunked() (sorted; for search's legend), virtual_stages_refusal = what search says of --virtual-stages when
--- none of the schedules runs model chunks (nil when one does), recompute = the modes, least recomputation first }.
---@param schedules string[]
---@param recompute string
function M.choices(schedules, recompute)
  local config = require "neusight.parallel.config"
  local out = { schedules = {}, shared_build = {}, virtual_stages = {}, virtual_schedules = {}, recompute = {} }
  for i, s in ipairs(schedules) do out.schedules[i] = config.check_schedule(s, "search: --schedule") end
  if #out.schedules == 0 then out.schedules[1] = config.check_schedule(config.DEFAULT_SCHEDULE, "search: default schedule") end
  local chunks = chunked()
  for i, s in ipairs(out.schedules) do
    out.shared_build[i], out.virtual_stages[i] = M.SHARED_BUILD[s] == true, chunks[s] ~= nil
  end
  for s in pairs(chunks) do out.virtual_schedules[#out.virtual_schedules + 1] = s end
  table.sort(out.virtual_schedules)
  local any = false
  for _, v in ipairs(out.virtual_stages) do any = any or v end
  if not any then
    local v = out.virtual_schedules
    out.virtual_stages_refusal = #v == 0
      and "search: --virtual-stages: no schedule runs model chunks (scripts/neusight/parallel/config.lua CHUNKED names none)"
      or ("search: --virtual-stages applies to the %s schedule%s only (add %s to --schedule)")
        :format(table.concat(v, ", "), #v > 1 and "s" or "", #v > 1 and "one" or "it")
  end
  if #config.CHOICES.recompute == 0 then
    error("neusight.parallel.config: CHOICES.recompute is empty: search has no recomputation mode to try", 0)
  end
  local accepted = { "auto", "all" }
  for i, mode in ipairs(config.CHOICES.recompute) do
    out.recompute[i] = mode
    accepted[#accepted + 1] = mode
  end
  config.one_of(recompute, accepted, "search: --recompute")
  return out
end

--- Layers as neusight.parallel's stage partition counts them (parallel.layer_count).
M.layers = function(nodes) return require("neusight.parallel").layer_count(nodes) end

--- Why search skips a pipeline variant before forecasting it, or nil: a schedule with model chunks (chunked())
--- needs what neusight.parallel.config chunks_refusal says (pp >= 2, at least 2 chunks) and, as Megatron-LM requires,
--- the model's `layers` divisible by pp × virtual_stages (neusight.parallel.config layers_refusal; `virtual_stages` 0:
--- the schedule's default, neusight.parallel.config CHUNKED; `layers` 0: unknown, not checked). Other schedules are never skipped here; the
--- forecasts themselves refuse what cannot run (neusight.parallel).
---@return string?
function M.pipeline_skip(layers, pp, schedule, virtual_stages)
  local config = require "neusight.parallel.config"
  local default = config.chunks_of and config.chunks_of(schedule) or chunked()[schedule]
  if not default then return nil end
  local v = virtual_stages > 0 and virtual_stages or default
  if config.chunks_refusal then
    local field, why = config.chunks_refusal(schedule, pp, v) -- the reason alone: a skip names no parallel field
    -- (a --scripts config.lua older than the field and reason apart returns "parallel.<field>: <reason>" alone)
    if field and not why then why = tostring(field):gsub("^parallel%.[%w_]+: ", "") end
    if why then return why end
  end
  -- the layers' rule is neusight.parallel.config's (predict warns with it); a --scripts config.lua older than it would
  -- rank layouts Megatron-LM cannot run: neusight.needs' error naming that file and the bundled one
  return require("neusight").needs("neusight.parallel.config", "layers_refusal")(schedule, layers, pp, v)
end

--- { experts = E (1: a dense model, or a model function, whose experts cannot be known), layers = L } of a normalized
--- workload (neusight.workload normalize), from its model built without a parallel plan at batch 1.
---@param w table
function M.model_facts(w)
  local workload = require("neusight.workload")
  local probe = {}
  for k, v in pairs(w) do probe[k] = v end
  probe.parallel, probe.batch, probe.mode, probe.optimizer = nil, 1, "inference", nil
  local _, nodes = workload.graph(probe)
  local experts = 1
  local cfg, builder = workload.model_builder(w.model) -- a function model: nil, nil
  if builder and builder.expert_parallel and builder.num_experts then experts = builder.num_experts(cfg) end
  return { experts = experts, layers = M.layers(nodes) }
end

--- What search's JSON (engine/cli/search_cmd.cpp) says of the workloads it forecast beside the layouts, from their
--- report fields (neusight.report workload's table `f`: the last layout loaded; these are the same in every layout),
--- under predict's keys: the optimizer and its implementation as normalize resolved them ("" without one).
---@param f table
---@return table
function M.json_fields(f)
  return setmetatable({ optimizer = f.optimizer, optimizer_impl = f.optimizer_impl },
    { __order = { "optimizer", "optimizer_impl" } })
end

--- search's CSV (engine/cli/search_cmd.cpp): `doc.columns` the fields of a row (the JSON's `layouts` entries), in
--- order, and `doc.rows` the layouts shown, as the JSON gives them. Numbers as every CSV writes them (neusight.report
--- number_csv: exact, in the JSON's digits), booleans true/false, names as neusight.report csv_field quotes them.
---@param doc { columns: string[], rows: table[] }
---@return string
function M.format_csv(doc)
  local needs = require("neusight").needs
  local number_csv, csv_field = needs("neusight.report", "number_csv"), needs("neusight.report", "csv_field")
  local function cell(v)
    if type(v) == "number" then return number_csv(v) end
    if type(v) == "boolean" then return v and "true" or "false" end
    if v == nil then return "" end
    return csv_field(v)
  end
  local out = { table.concat(doc.columns, ",") }
  for _, row in ipairs(doc.rows) do
    local cells = {}
    for i, k in ipairs(doc.columns) do cells[i] = cell(row[k]) end
    out[#out + 1] = table.concat(cells, ",")
  end
  return table.concat(out, "\n") .. "\n"
end

return M
