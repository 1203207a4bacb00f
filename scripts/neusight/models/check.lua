-- scripts/neusight/models/check.lua — argument checks shared by the model builders (messages name the model).
-- Errors are raised at level 0: the position that matters is the config's field, not this Lua code.
local ipairs, type, tostring, error, floor, huge = ipairs, type, tostring, error, math.floor, math.huge

local M = {}

function M.is_count(v)
  return type(v) == "number" and v >= 1 and v == floor(v) and v < huge
end

--- Raises "<who>: field 'k' must be a positive integer (got v)" for the first bad key.
--- Keys listed in `optional` may also be nil.
function M.counts(who, cfg, required, optional)
  for _, key in ipairs(required) do
    if not M.is_count(cfg[key]) then
      error(("%s: field '%s' must be a positive integer (got %s)"):format(who, key, tostring(cfg[key])), 0)
    end
  end
  for _, key in ipairs(optional or {}) do
    if cfg[key] ~= nil and not M.is_count(cfg[key]) then
      error(("%s: field '%s' must be a positive integer (got %s)"):format(who, key, tostring(cfg[key])), 0)
    end
  end
end

--- Checks opts.batch and opts.seq, and seq against the model's position table (max_name = its field).
function M.batch_seq(who, opts, max_positions, max_name)
  for _, key in ipairs { "batch", "seq" } do
    if not M.is_count(opts[key]) then
      error(("%s: option '%s' must be a positive integer (got %s)"):format(who, key, tostring(opts[key])), 0)
    end
  end
  if max_positions and opts.seq > max_positions then
    error(("%s: seq %d exceeds %s %d"):format(who, opts.seq, max_name, max_positions), 0)
  end
end

return M
