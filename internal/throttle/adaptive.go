package throttle

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The adaptive throttle (throttle.mode = "adaptive", docs/throttle.md): Arweave
// 2.9.7's client throttle (arweave_throttling). Per peer it learns, from
// the replies the node reports (Observe), which group each path key falls
// in and the peer's quota per group; a call then goes while the quota has
// calls left, and otherwise waits first in first out until the quota is
// refilled (reset seconds after the reply that emptied it) or a new reply
// gives it calls again. Peers whose replies lack the fields are never
// throttled; tx/* paths never are.
//
// No goroutine and no clock here either: a waiting call holds a Ticket,
// which the caller polls (PollAdaptive) when the Result's Wake channel is
// closed or its WaitIn has passed, and cancels if it gives up.

// adaptiveIdle is how long a peer's group with nothing waiting and no
// refill pending is kept without traffic (the node stops such a group
// process after throttling.idle_timeout, 60 s, and forgets its state).
const adaptiveIdle = 60 * time.Second

// AdaptiveMaxWait is how long a call waits at most: then it goes anyway,
// as the node's does (THROTTLE_RECEIVE_TIMEOUT_MS).
const AdaptiveMaxWait = 190 * time.Second

// The outcomes of an adaptive throttle call (AdaptiveResult.Outcome).
const (
	OutcomeQuota        = "quota"        // a call of the quota: admitted, remaining decremented
	OutcomeQueued       = "queued"       // waiting
	OutcomeQueueFull    = "queue_full"   // MaxWaitingPerPeer waiting already: goes at once
	OutcomeSkip         = "skip"         // a tx/* path: never throttled
	OutcomeUnknown      = "unknown"      // no reply seen yet for this (peer, path key): goes
	OutcomeIncompatible = "incompatible" // the peer's replies lack the fields: goes
	OutcomeUnlimited    = "unlimited"    // the group's quota is not known (reset, idle): goes
	OutcomeReleased     = "released"     // a waiting call released by a reset of its peer: goes
	OutcomeExempt       = "exempt"       // an exempt peer or path
	OutcomeOff          = "off"          // the throttle is off
)

// Ticket names a waiting call of the adaptive throttle.
type Ticket struct {
	Peer  string
	Group string
	ID    uint64
}

// AdaptiveResult is the answer of TryAdaptive and PollAdaptive.
type AdaptiveResult struct {
	// Admitted is true when the call may go now.
	Admitted bool
	// Outcome says why (the Outcome… constants).
	Outcome string
	// Group is the peer's group of the path, once learned.
	Group string
	// Ticket names the call while it waits (Outcome "queued").
	Ticket Ticket
	// WaitIn, while waiting, is how long until the quota's refill; 0 when
	// none is pending (then only a new reply, or AdaptiveMaxWait, ends
	// the wait).
	WaitIn time.Duration
	// Wake, while waiting, is closed when the quota changes: poll then.
	Wake <-chan struct{}
}

// adaptive is the adaptive throttle's state, sharded by peer.
type adaptive struct {
	seed    maphash.Seed
	ticket  atomic.Uint64
	peers   atomic.Int64
	quotas  atomic.Int64
	waiting atomic.Int64

	observed  atomic.Uint64
	learned   atomic.Uint64
	refused   [len(parseErrorNames)]atomic.Uint64
	overflow  [4]atomic.Uint64 // too_many_groups, group_mismatch, routes_full, peers_full
	skipped   atomic.Uint64
	admitted  atomic.Uint64
	queued    atomic.Uint64
	queueFull atomic.Uint64
	passed    atomic.Uint64 // skip, unknown, incompatible, unlimited, released

	shards [throttleShards]adaptiveShard
}

// The overflow counters.
const (
	ovTooManyGroups = iota
	ovGroupMismatch
	ovRoutesFull
	ovPeersFull
)

type adaptiveShard struct {
	mu sync.Mutex
	m  map[string]*apeer
	_  [64]byte
}

// apeer is one peer: its routes, the group ids it named, its quotas.
type apeer struct {
	incompatible bool
	routes       map[string]string   // path key → group id
	ids          map[string]struct{} // distinct group ids named
	quotas       map[string]*aquota
	waiting      int
	lastUse      int64
}

// aquota is one (peer, group): the quota last learned and the waiters.
type aquota struct {
	known     bool // false: unlimited
	total     int64
	remaining int64
	amount    int64
	resetSec  int64
	refillAt  int64 // Unix ms of the pending refill; 0: none
	updated   int64
	lastUse   int64
	queue     []uint64 // waiting tickets, oldest first
	granted   []uint64 // tickets given a call, not yet polled
	wake      chan struct{}
}

func newAdaptive() *adaptive {
	a := &adaptive{seed: maphash.MakeSeed()}
	for i := range a.shards {
		a.shards[i].m = make(map[string]*apeer)
	}
	return a
}

func (a *adaptive) shard(peer string) *adaptiveShard {
	return &a.shards[maphash.String(a.seed, peer)%throttleShards]
}

// pathKey returns the node's key of path (arweave_throttling_path):
// split on "/" less a leading empty segment; tx/... is skipped; chunk and
// chunk2, data_sync_record, recent_hash_list_diff and metrics are one key
// each whatever follows, block/T/ID/hash_list and …/wallet_list one each;
// any other path is its own key. The query string is not part of it.
func pathKey(path string) (key string, skip bool) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimPrefix(path, "/")
	first, rest, _ := strings.Cut(path, "/")
	switch first {
	case "tx":
		return "", true
	case "chunk", "chunk2":
		return "chunk", false
	case "data_sync_record", "recent_hash_list_diff", "metrics":
		return first, false
	case "block":
		if segs := strings.Split(rest, "/"); len(segs) == 3 && (segs[2] == "hash_list" || segs[2] == "wallet_list") {
			return "block/" + segs[2], false
		}
	}
	return path, false
}

// refill applies q's pending refill if it is due at ms: remaining =
// min(total, remaining + amount), then the waiters are served.
func (q *aquota) refill(ms int64) {
	if q.refillAt == 0 || ms < q.refillAt {
		return
	}
	q.remaining = min(q.total, q.remaining+q.amount)
	q.resetSec, q.amount, q.refillAt = 0, 0, 0
	q.drain()
}

// drain gives the oldest waiters a call each while some are left.
func (q *aquota) drain() {
	n := 0
	for n < len(q.queue) && q.remaining > 0 {
		q.remaining--
		n++
	}
	if n == 0 {
		return
	}
	q.granted = append(q.granted, q.queue[:n]...)
	q.queue = slices.Delete(q.queue, 0, n)
	q.notify()
}

// release lets every waiter go and forgets the quota (the node's reset of
// a peer: its waiters get request_ready).
func (q *aquota) release() {
	q.granted = append(q.granted, q.queue...)
	q.queue = q.queue[:0]
	q.known, q.refillAt = false, 0
	q.notify()
}

func (q *aquota) notify() {
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
}

func (q *aquota) waitChan() <-chan struct{} {
	if q.wake == nil {
		q.wake = make(chan struct{})
	}
	return q.wake
}

// waitResult is the answer for a ticket still waiting on q at ms.
func (q *aquota) waitResult(peer, group string, id uint64, ms int64) AdaptiveResult {
	r := AdaptiveResult{Outcome: OutcomeQueued, Group: group, Ticket: Ticket{peer, group, id}, Wake: q.waitChan()}
	if q.refillAt != 0 {
		r.WaitIn = time.Duration(q.refillAt-ms) * time.Millisecond
	}
	return r
}

// try is TryAdaptive after the switch and the exemptions.
func (a *adaptive) try(ms int64, peer, path string) AdaptiveResult {
	key, skip := pathKey(path)
	if skip {
		a.passed.Add(1)
		return AdaptiveResult{Admitted: true, Outcome: OutcomeSkip}
	}
	sh := a.shard(peer)
	sh.mu.Lock()
	p := sh.m[peer]
	var group string
	var q *aquota
	if p != nil {
		p.lastUse = ms
		group = p.routes[key]
		q = p.quotas[group]
	}
	if q != nil {
		q.refill(ms)
	}
	var r AdaptiveResult
	switch {
	case p == nil || (group == "" && !p.incompatible):
		r = AdaptiveResult{Admitted: true, Outcome: OutcomeUnknown}
	case p.incompatible:
		r = AdaptiveResult{Admitted: true, Outcome: OutcomeIncompatible, Group: group}
	case q == nil || !q.known:
		r = AdaptiveResult{Admitted: true, Outcome: OutcomeUnlimited, Group: group}
	}
	if r.Outcome != "" {
		sh.mu.Unlock()
		a.passed.Add(1)
		return r
	}
	q.lastUse = ms
	switch {
	case q.remaining > 0:
		q.remaining--
		sh.mu.Unlock()
		a.admitted.Add(1)
		return AdaptiveResult{Admitted: true, Outcome: OutcomeQuota, Group: group}
	case p.waiting >= MaxWaitingPerPeer:
		sh.mu.Unlock()
		a.queueFull.Add(1)
		return AdaptiveResult{Admitted: true, Outcome: OutcomeQueueFull, Group: group}
	}
	id := a.ticket.Add(1)
	q.queue = append(q.queue, id)
	p.waiting++
	r = q.waitResult(peer, group, id, ms)
	sh.mu.Unlock()
	a.waiting.Add(1)
	a.queued.Add(1)
	return r
}
