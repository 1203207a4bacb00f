return {
  name = "mine",
  forward = function(node
}
