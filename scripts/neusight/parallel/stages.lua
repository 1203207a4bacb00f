-- scripts/neusight/parallel/stages.lua — the stage partition: a graph's prologue, layer groups and epilogue spread over the pipeline's virtual stages.
--
-- Owns which nodes (and how many instances of each) every virtual stage (pp × virtual_stages of them) runs: layers
-- are spread as evenly as possible, earlier stages taking the remainder, the prologue goes to the first stage and the
-- epilogue to the last; optimizer nodes are set aside for the step. Also the activation the stages exchange.
local max, min = math.max, math.min
local ipairs, error = ipairs, error

local M = {}

-- Splits the graph into prologue (unlayered nodes before the first layer), layer groups (one per
-- layer name, in order, c = the group's replication: count / attrs.per_layer) and epilogue (the other unlayered nodes).
-- Optimizer nodes are set aside. `times` (the predicted times) may be nil: nodes straight from a builder.
function M.regions(nodes, times)
  local prologue, epilogue, groups, by_name, optimizer = {}, {}, {}, {}, {}
  local seen_layer = false
  for i, n in ipairs(nodes) do
    if (times and times[i].opt > 0) or n.phase == "optimizer" then
      optimizer[#optimizer + 1] = i
    elseif n.layer ~= nil and n.layer ~= "" then
      seen_layer = true
      local g = by_name[n.layer]
      if not g then
        g = { name = n.layer, count = 0, nodes = {} }
        by_name[n.layer] = g
        groups[#groups + 1] = g
      end
      -- a node that runs several times per layer (attrs.per_layer: a MoE layer's experts) counts the layer once
      g.count = max(g.count, (n.count or 1) // ((n.attrs or {}).per_layer or 1))
      g.nodes[#g.nodes + 1] = i
    elseif seen_layer then
      epilogue[#epilogue + 1] = i
    else
      prologue[#prologue + 1] = i
    end
  end
  return prologue, groups, epilogue, optimizer
end

-- Layers of all groups together.
local function layers_of(groups)
  local total = 0
  for _, g in ipairs(groups) do total = total + g.count end
  return total
end

--- Layers the stage partition counts: Σ over layer groups of count / attrs.per_layer (neusight.search asks it which
--- interleaved layouts divide the model).
function M.layer_count(nodes)
  local _, groups = M.regions(nodes, nil)
  return layers_of(groups)
end

--- Refuses `V` virtual stages (pp × virtual_stages) over a graph of `total` layers (M.layer_count) when it has fewer
--- layers than stages: M.partition's rule, which neusight.workload also checks when it builds a plan's graph. The
--- error is the setting's, not the model's (neusight.infeasible: search skips such a layout with it as the reason).
function M.stages_check(total, V)
  if total < V and V > 1 then
    require("neusight").infeasible(("parallel: %d pipeline stage(s) (pp × virtual_stages) but the model has only %d "
      .. "layer(s)"):format(V, total))
  end
end

--- Virtual stage contents: stages[k].segments, in graph order, each { nodes = {i…}, reps = r,
--- per = {instances of node i per rep} }: the prologue (one rep; goes to the first stage), runs of
--- consecutive layers of one group (reps = layers; a node of a group with c layers and count n runs
--- n/c instances per layer), the epilogue (to the last stage). Layers are spread as evenly as
--- possible, earlier stages taking the remainder. stages[k].items flattens them: { node, share }.
function M.partition(nodes, prologue, groups, epilogue, V)
  local total = layers_of(groups)
  M.stages_check(total, V)
  local function single(list)
    local per = {}
    for j, i in ipairs(list) do per[j] = nodes[i].count end
    return { nodes = list, reps = 1, per = per, layered = false }
  end
  local stages = {}
  for k = 1, V do stages[k] = { segments = {}, items = {}, layers = 0 } end
  if #prologue > 0 then stages[1].segments[1] = single(prologue) end
  local base, extra = total // V, total % V
  local g_idx, g_used = 1, 0 -- current group and layers of it already placed
  -- a group's `per`, and the items of `reps` of its layers, are the same in every stage: made once, shared (read-only)
  local per_of, items_of = {}, {}
  for k = 1, V do
    local want = base + (k <= extra and 1 or 0)
    stages[k].layers = want
    while want > 0 do
      local g = groups[g_idx]
      local take = min(want, g.count - g_used)
      local per = per_of[g_idx]
      if not per then
        per = {}
        for j, i in ipairs(g.nodes) do per[j] = nodes[i].count / g.count end
        per_of[g_idx], items_of[per] = per, {}
      end
      stages[k].segments[#stages[k].segments + 1] = { nodes = g.nodes, reps = take, per = per, layered = true }
      want, g_used = want - take, g_used + take
      if g_used == g.count then g_idx, g_used = g_idx + 1, 0 end
    end
  end
  if #epilogue > 0 then stages[V].segments[#stages[V].segments + 1] = single(epilogue) end
  for _, st in ipairs(stages) do
    local items = st.items
    for _, seg in ipairs(st.segments) do
      local by_reps = items_of[seg.per] -- nil: the prologue or epilogue
      local list = by_reps and by_reps[seg.reps]
      if not list then
        list = {}
        for j, i in ipairs(seg.nodes) do list[j] = { node = i, share = seg.reps * seg.per[j] } end
        if by_reps then by_reps[seg.reps] = list end
      end
      for j = 1, #list do items[#items + 1] = list[j] end
    end
  end
  return stages
end

-- Output shape of the last node of the last layer group, the activation pipeline stages exchange, and that node.
function M.boundary_shape(nodes, groups)
  local g = groups[#groups]
  if not g then return nil end
  local last = nodes[g.nodes[#g.nodes]]
  return last.output, last
end

return M
