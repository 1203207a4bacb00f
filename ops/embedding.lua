-- ops/embedding.lua — nn.Embedding lookup of a V×H table: a gather forward, a dense V×H gradient backward.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

-- V (rows of the table) from attrs.num_embeddings; H from attrs.embedding_dim, else the output's last dim.
local function table_dims(node)
  local V = node.attrs.num_embeddings
  if not V then
    error(("node '%s' (op 'embedding') needs attrs.num_embeddings"):format(node.name), 2)
  end
  return V, node.attrs.embedding_dim or node.output[#node.output]
end

---@type neusight.OpRule
return {
  name = "embedding",
  doc = "embedding lookup: MEM(ids, out); bw MEM((V,H)) x2 (zero-fill + scatter-add); acc VECadd(1,V·H)",
  attrs = rules.attrs { num_embeddings = "integer: V, the rows of the table (required)", embedding_dim = "integer: H (default: the output's last dimension)" },
  saves = function(node) return K.index_bytes * K.numel(rules.input(node, 1)) end, -- the int64 indices
  -- Read the indices, write the gathered rows.
  forward = function(node)
    return { K.mem(rules.shapes(node, true), node.dtype) }
  end,
  -- The gradient is a dense V×H tensor: zero-filled, then the output gradient is scattered into it.
  -- frozen (LoRA's base, attrs.frozen): the token ids take no gradient, so no backward runs at all
  backward = function(node)
    if node.attrs.frozen then return {} end
    local V, H = table_dims(node)
    return { K.mem({ { V, H } }, node.dtype), K.mem({ { V, H } }, node.dtype) }
  end,
  accumulate = function(node)
    if node.attrs.frozen then return {} end
    local V, H = table_dims(node)
    return { rules.grad_accumulate(node, V * H) }
  end,
}
