-- scripts/neusight/types.lua — LuaCATS type declarations for op rules, nodes, kernels, predictors and workloads (documentation only).

---@class neusight.Gpu                   GPU spec fields from gpus/<gpu>.toml (read-only)
---@field name string
---@field vendor string
---@field num_sm integer
---@field mem_bw_gbps number            DRAM bandwidth, GB/s (1e9 bytes)
---@field peak_fp32_tflops number
---@field l2_mb number

---@class neusight.Node                  one operator of the graph (read-only for op rules)
---@field op string                      op rule name: ops/<op>.lua
---@field name string                    unique node name, e.g. "h.attn.c_attn"
---@field layer string                   "" outside replicated layers
---@field inputs integer[][]             input shapes; a Python scalar is {1}
---@field output integer[]               output shape
---@field dtype string                   "fp32" | "tf32" | "fp16" | "bf16" | "fp8" | "fp64"
---@field dtype_bytes integer            added by the engine
---@field count integer                  replication (e.g. n_layer)
---@field params number                  trainable parameters owned by the node
---@field training boolean               added by the engine
---@field phase? "forward"|"optimizer"   "optimizer": forward kernels are charged to the optimizer step
---@field attrs table<string, number|boolean|string>  op-specific: bias, num_embeddings, tensor_inputs, …; optimizer
---                                      nodes: impl and the recipe's element sizes (neusight.precision.optimizer_attrs)

---@class neusight.Kernel                one primitive kernel (neusight/kernels.lua builds them)
---@field kind "gemm"|"bmm"|"elementwise"|"softmax"|"layernorm"|"memory"|"collective"|"attention"
---@field name string                    reference primitive: "Linear", "BMM", "VECadd", "VECsoftmax", "VECln", "MEM", …
---@field op? string                     elementwise op: "add", "mulu", …
---@field dtype string
---@field flops number
---@field bytes number                   DRAM bytes moved
---@field b? integer                     gemm/bmm: output b×m×k, A m×n, B n×k (n is the reduction)
---@field m? integer
---@field n? integer
---@field k? integer
---@field rows? integer                  vector kernels: numel / hidden
---@field hidden? integer                vector kernels: last dim of the output
---@field shapes? integer[][]            memory kernels: the shapes moved
---@field seconds? number                fixed latency: the engine uses it instead of predicting

---@class neusight.OpRule                what ops/<name>.lua returns; unknown keys are errors
---@field name string                    must equal the file stem
---@field doc string                     one line, shown by `neusight ops`
---@field forward fun(node: neusight.Node, gpu: neusight.Gpu): neusight.Kernel[]
---@field backward? (fun(node: neusight.Node, gpu: neusight.Gpu): neusight.Kernel[])|false  required in training; false: no backward work
---@field check? fun(node: neusight.Node): string?  shape contract: nil when the shapes agree, else the problem
---@field accumulate? fun(node: neusight.Node, gpu: neusight.Gpu): neusight.Kernel[]  training only: gradient accumulation
---@field saves? fun(node: neusight.Node): number  bytes autograd keeps for backward (neusight/memory.lua; default: the output)
---@field temporary? fun(node: neusight.Node): number  largest transient bytes while it runs (default: inputs + output)
---@field attrs? table<string, string>  node attrs the rule reads: name → "type: what it does" (checked on every node)
---@field fusion? "elementwise"|"anchor"  whether the node may join a fused run (neusight/fusion.lua; default: never)
---@field optimizer? { moments: integer, impl?: "fused"|"foreach" }  an optimizer step (--optimizer NAME): the moments it keeps per parameter, its default implementation

---@class neusight.Tile                  the library tile the tiling rules chose (scripts/tiling/); its non-zero parts
---@field m? integer                     GEMM/BMM output tile along m
---@field k? integer                     GEMM/BMM output tile along k
---@field split? integer                 GEMM split-K factor
---@field elems? integer                 vector kernels: elements per thread block
---@field blocks? number                 attention: thread blocks, and FLOPs and bytes per block
---@field flops? number
---@field bytes? number
---@field kernel? string                 the library kernel, e.g. "ampere_sgemm_128x64_tn"

---@class neusight.PricedKernel: neusight.Kernel  what a Lua predictor's predict() receives (and ns.predict takes)
---@field kv_dtype? string               attention: the KV cache's dtype when it differs
---@field weight_bytes? number           gemm: bytes per weight element under weight-only quantisation
---@field act_quant? string             gemm, bmm (fp8): "dynamic_tensor", the activation quantisation before it
---@field wgrad? boolean                 gemm: the weight-gradient GEMM of its node's backward (neusight.rules linear;
---                                      neusight.parallel.timeline hides a column-parallel input-gradient collective under it)
---@field tile? neusight.Tile            absent before tiling; ns.predict keeps a given one, selects a missing one

---@class neusight.Predictor             what scripts/neusight/predictors/<name>.lua (--predictor <name>) returns
---@field predict fun(kernels: neusight.PricedKernel[], gpu: neusight.Gpu): number[]  seconds per kernel, in order;
---                                      each finite and >= 0. The kernels are distinct, none with fixed `seconds`.
---@field description? string

---@class neusight.Workload              what a workload script returns (neusight/workload.lua validates it)
---@field model string|table|fun(opts: {batch: integer, seq: integer, training: boolean, dtype: string, loss: boolean}): neusight.Node[]
---@field gpu string                     GPU name: gpus/<gpu>.toml
---@field mode "train"|"inference"|"prefill"|"decode"
---@field batch integer                  global batch
---@field seq integer                    sequence length (prompt length in prefill; 1, the default, in decode)
---@field context? integer               decode only (required there): tokens already in each sequence's KV cache
---@field optimizer? string            "none", "sgd", "adam", "adamw" or an op rule with an `optimizer` field; default "adam" for train, "none" for inference
---@field optimizer_impl? "fused"|"foreach"  default "fused" for adamw and under Megatron kernels, else "foreach" (neusight.workload optimizer_impl_default)
---@field dtype? string                  compute dtype, default "fp32"
---@field precision? "pure"|"amp"        state recipe (neusight/precision.lua); default "amp" when training in fp16/bf16/fp8
---@field launch? "eager"|"graph"       kernel launches: eager PyTorch (default) or CUDA-graph replay (neusight/launch.lua)
---@field loss? boolean                  append the loss in training (default true)
---@field description? string

return {}
