package bench

// BatchFloorScript answers a batch as the cluster backend's decide.lua
// answers one of gcra entries (nine integers each) without touching a key:
// what the batching itself costs, client and Redis, with no limiter behind
// it. ARGV[4] is the batch's number of entries.
const BatchFloorScript = `
local out = {}
for e = 1, tonumber(ARGV[4]) do out[e] = {4, 0, 1, 2, 3, 4, 5, 6, 7} end
return out
`
