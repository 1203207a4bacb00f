-- ops/send_recv.lua — a point-to-point transfer of the node's output (pipeline stage boundary), priced by neusight.collectives.
return require("neusight.parallel").rule("send_recv",
  "send_recv: SENDRECV of the output to the next stage in the pass attrs.direction names")
