package cluster

import (
	"strings"

	"github.com/limiterd/limiterd/limiter"
)

// Key names. Every key of one (peer, group) carries the same hash tag,
// {<peer>|<group>}, so that a script touching several of them runs on one
// Redis Cluster node; everything else a script needs (the group's schedule,
// its limits, the instance) travels as an argument, never as a key name
// built inside a script.
const (
	keyPrefix = "ld:"
	// keySchedules is the hash of the groups' shared tick schedules.
	keySchedules = keyPrefix + "sched"
	// Suffixes of a (peer, group)'s keys.
	sufCounts    = ":c"  // local_first: HASH of in-flight counts per instance
	sufHybrid    = ":h"  // hybrid, local_first: HASH of tokens
	sufTokens    = ":pt" // hybrid, strict: packed STRING of tokens and in-flight counts per instance (lua/decide.lua)
	sufHybridWin = ":hw" // hybrid: ZSET of window timestamps
	sufState     = ":ps" // token_bucket, gcra, fixed_window, sliding_window: packed STRING of the state and in-flight counts
	sufLog       = ":l"  // sliding_log: ZSET of timestamps
	sufLogCounts = ":pi" // sliding_log: packed STRING of in-flight counts per instance
	// The layout before in-flight counts: a ZSET of slots, and the
	// algorithms' state as one string. Forget deletes them too. (The state
	// strings as text, ":t", ":s" and ":i" before decision 220, are no
	// longer read: they expire by their TTL.)
	sufOldSlots = ":f"
	sufOldAlgo  = ":a"
)

// escaper keeps a peer's text from ending the hash tag early: Redis hashes
// only what lies between the first '{' and the next '}', so a '}' inside
// the peer text would move the tag (and a '|' would blur the separator).
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D", "|", "%7C")

// tagOf returns the hash tag of peer text p in group g, braces included.
func tagOf(p, g string) string {
	return "{" + escaper.Replace(p) + "|" + escaper.Replace(g) + "}"
}

// canaryTag returns the hash tag of the keys instance inst probes Redis
// with.
func canaryTag(inst string) string {
	return tagOf("canary:"+inst, "canary")
}

// baseKey returns the prefix of every key of peer k in group g of the
// generation sc says: ld:{<peer>|<group>}:<generation>.
func baseKey(k limiter.Key, g string, sc *sharedSched) string {
	return genKey(k, g, sc, "")
}

// stableKey returns the key of peer k in group g named by suf that
// outlives a change of the group's algorithm: the state strings holding
// the requests in flight, which keep counting through it (the state's
// fields carry their generation instead): ld:{<peer>|<group>}<suf>.
func stableKey(k limiter.Key, g string, suf string) string {
	var buf [128]byte
	return string(append(appendTag(buf[:0], k, g), suf...))
}

// algoSuffixes lists the suffixes of every key one (peer, group) may hold,
// whatever its algorithm: what Forget deletes.
var algoSuffixes = []string{sufCounts, sufTokens, sufHybrid, sufHybridWin, sufState, sufLog, sufLogCounts, sufOldSlots, sufOldAlgo}
