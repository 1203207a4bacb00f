-- scripts/tiling/vec.lua — vector-kernel tiles: elements per thread block for elementwise, softmax and layernorm.
--
-- Derived from the NeuSight data (dataset/train/collect/<op>, dataset/test/{elem,ln,softmax}.csv,
-- dataset_amd/train/collect/<op>): every elementwise op (add, addu, mul, …, gelu, relu, tanh) runs
-- PyTorch's vectorized_elementwise_kernel<4> with a fixed block size, whatever the op or shape:
--   NVIDIA (CUDA): 128 threads × 4 elements = 512 elements per block;
--   AMD (ROCm):    256 threads × 4 elements = 1024 elements per block.
-- The rule reproduces the measured elements per block (from_grid below) on all 137 969 elementwise rows,
-- including two special cases: tensors smaller than one block, and tensors over 2 GiB, which TensorIterator
-- splits into 32-bit-indexable halves (the profiler records one half's grid, so the measured value
-- doubles per split). For a split tensor select() also returns the most elements one launch takes and that
-- launch's block (`piece`, `piece_elems`): off the data's split kernels the predictor prices the tensor as that
-- launch scaled by its elements (engine/core/neusight_predictor.cpp, split_by_piece).
-- Softmax and layernorm launch one block per row: elements per block = hidden, up to M.row_max.
-- Beyond the longest row any of the data measured (M.row_max) a row is priced as ⌈hidden / row_max⌉ tiles of that
-- longest row: the kernel's time grows linearly with its row length at the utilisation of the longest rows measured.
-- Physically the same launch (one block per row, looping over the row); as tiles of one whole row the tile model's
-- inputs left the range it was trained on and its utilisation fell with the row length: an fp32 softmax over a
-- 128 256-token vocabulary (Llama 3's cross-entropy, 16 384 rows) came out at 14× its roofline on an H100, 36× on an
-- A100, rising to 44× at 262 144 (tests/scripts/test_tiling.lua). No measured row is longer, so none moves.
local ceil, floor, type, tostring, error = math.ceil, math.floor, type, tostring, error
local fmt = string.format
local kernels = require "neusight.kernels"

local M = {}

-- The longest row the softmax and layer-norm rows of the NeuSight data have (dataset/test/{softmax,ln}.csv: 16 384;
-- the train/collect grids at most 4 094; dataset_amd no longer), by family.
M.row_max = { softmax = 16384, layernorm = 16384 }

-- Threads per block × elements per thread of the elementwise kernel, by vendor (gpus/*.toml `vendor`).
M.block_elems = { nvidia = 128 * 4, amd = 256 * 4 }

-- Largest byte offset a kernel may address with 32-bit indexing (TensorIterator::can_use_32bit_indexing).
local INT32_MAX = 2 ^ 31 - 1

-- Smallest power of two >= x (x >= 1).
local function pow2_ceil(x)
  local p = 1
  while p < x do p = p * 2 end
  return p
end

--- Measured elements per block of a vector-kernel launch: 2^ceil(log2(ceil(rows·hidden / blocks))),
--- the reference's Tile1 for elementwise kernels (method-neusight.md §1.4).
---@return integer
function M.from_grid(rows, hidden, grid_x, grid_y, grid_z)
  for i, v in ipairs { rows, hidden, grid_x, grid_y, grid_z } do
    if type(v) ~= "number" or v < 1 then
      error(fmt("bad argument #%d to 'from_grid' (positive number expected, got %s)", i, tostring(v)), 2)
    end
  end
  return pow2_ceil(ceil(rows * hidden / (grid_x * grid_y * grid_z)))
end

-- Elements of the first 32-bit-indexable piece: TensorIterator coalesces a contiguous tensor to one
-- dimension and halves it (floor) until its last byte offset fits in an int32.
local function first_piece(numel, elem_bytes)
  local piece = numel
  while (piece - 1) * elem_bytes + 1 > INT32_MAX do piece = floor(piece / 2) end
  return piece
end

local function check_dim(k, name)
  local v = k[name]
  if type(v) ~= "number" or v < 1 or v ~= v // 1 then
    error(fmt("scripts/tiling/vec.lua: select(): k.%s must be a positive integer (got %s)", name, tostring(v)), 3)
  end
  return v
end

--- Elements per thread block for one vector kernel.
---@param k table { family = "elementwise"|"softmax"|"layernorm", op, rows, hidden [, dtype] }
---@param gpu neusight.Gpu read-only GPU table (vendor is read)
---@return table { elems = integer [, piece = integer, piece_elems = integer] } (piece: a split tensor, below)
function M.select(k, gpu)
  local family = k.family
  local rows, hidden = check_dim(k, "rows"), check_dim(k, "hidden")
  if family == "softmax" or family == "layernorm" then
    -- one block per row (the reference's tile = H); a longer row than any measured as tiles of the longest
    return { elems = math.min(hidden, M.row_max[family]) }
  end
  if family ~= "elementwise" then
    error(fmt("scripts/tiling/vec.lua: select(): unknown family '%s'", tostring(family)), 2)
  end
  local block = M.block_elems[gpu.vendor]
  if not block then
    error(fmt("scripts/tiling/vec.lua: no elementwise block size for vendor '%s' (add it to M.block_elems)",
      tostring(gpu.vendor)), 2)
  end
  -- The split depends on bytes, so the dtype matters (the data is FP32; absent dtype means fp32).
  local numel = rows * hidden
  local bytes = kernels.dtype_bytes(k.dtype or "fp32")
  local piece = first_piece(numel, bytes)
  -- What from_grid would measure: the first piece's grid, divided into the whole tensor.
  local elems = pow2_ceil(ceil(numel / ceil(piece / block)))
  if piece == numel then return { elems = elems } end
  -- Split: also the most elements one launch takes (the largest tensor whose last byte offset fits in an int32)
  -- and that launch's tile, the block. The predictor prices a split tensor at the rate of that launch
  -- (engine/core/neusight_predictor.cpp, "split element-wise tensors").
  return { elems = elems, piece = floor((INT32_MAX - 1) / bytes) + 1, piece_elems = block }
end

return M
