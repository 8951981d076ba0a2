package cluster

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// script is a Lua script called by its SHA-1 (EVALSHA); on NOSCRIPT (a
// Redis restarted, failed over or flushed) the caller loads it and calls
// again.
type script struct {
	name string
	src  string
	sha  string
	// perKey: its keys are one (peer, group)'s, and an error of a wrong
	// type or a corrupt value found there (WRONGTYPE, CORRUPT) is that
	// key's failure (a *KeyError; the keys are repaired).
	perKey bool
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

func keyScript(name, src string) *script {
	s := newScript(name, src)
	s.perKey = true
	return s
}

var (
	//go:embed lua/decide.lua
	decideSrc string
	//go:embed lua/reduce.lua
	reduceSrc string
	//go:embed lua/reduce_window.lua
	reduceWindowSrc string
	//go:embed lua/cas.lua
	casSrc string
	//go:embed lua/lf_hybrid.lua
	lfHybridSrc string
	//go:embed lua/cfg_merge.lua
	cfgMergeSrc string
	//go:embed lua/cfg_peek.lua
	cfgPeekSrc string
)

// The scripts.
var (
	scriptDecide   = newScript("decide", decideSrc)
	scriptReduce   = keyScript("reduce", reduceSrc)
	scriptReduceW  = keyScript("reduce_window", reduceWindowSrc)
	scriptCAS      = newScript("cas", casSrc)
	scriptLFHybrid = keyScript("lf_hybrid", lfHybridSrc)
	scriptMerge    = newScript("cfg_merge", cfgMergeSrc)
	scriptPeek     = newScript("cfg_peek", cfgPeekSrc)
)
