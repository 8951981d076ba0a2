package bench

// The adaptive concurrency simulation (docs/benchmarks.md, "Adaptive
// concurrency: a crowd against a node"): the limiter core, unchanged, in
// front of a stand-in node, on a virtual clock. Nothing runs on the wall
// clock and nothing listens: a run of minutes of traffic takes a second,
// its figures do not depend on the machine, and the same -rand gives the same run
// again.

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

// SimNode is the stand-in node: Servers requests served at a time, each for
// Service × a factor uniform in [1 − Jitter, 1 + Jitter] (0: Service
// exactly), the others queued first come, first served, without bound.
type SimNode struct {
	Servers int
	Service time.Duration
	Jitter  float64
}

// Capacity returns the node's answers per second.
func (n SimNode) Capacity() float64 { return float64(n.Servers) / n.Service.Seconds() }

// SimLoad is the traffic: Crowd peers, each sending Poisson arrivals at
// Overload × the node's capacity / Crowd per second (each within its
// per-peer limits: PeerConcurrency in flight, no rate limit reached), and
// one polite peer sending Polite requests a second (Poisson). A client
// gives up on an answer later than ClientTimeout: it is not goodput.
type SimLoad struct {
	Crowd           int
	Overload        float64
	PeerConcurrency int64
	Polite          float64
	ClientTimeout   time.Duration
}

// SimPhase is a stretch of a run: For long, the node Slowdown times slower
// (1: as it is).
type SimPhase struct {
	For      time.Duration
	Slowdown float64
}

// SimResult is what a run measured over its phases after the first
// Warmup.
type SimResult struct {
	// Goodput is the answers per second the clients got within their
	// timeout, over the node's capacity.
	Goodput float64
	// P50 and P99 are the latencies of the admitted requests' answers as
	// their clients saw them (a client that gave up saw its timeout).
	P50, P99 time.Duration
	// Inflight is the node's mean requests in flight (served and queued),
	// MaxInflight the most.
	Inflight    float64
	MaxInflight int
	// PoliteSent and PoliteOK: the polite peer's requests, and those
	// answered within the timeout.
	PoliteSent, PoliteOK int
	// Shed are the requests the adaptive limit shed (503); Rejected, the
	// per-peer limits' (429).
	Shed, Rejected int
	// Limit is the adaptive limit every 100 ms from the run's start (the
	// warmup included), with Probing set while the unloaded latency was
	// measured.
	Limit   []int64
	Probing []bool
	// Unloaded is the controller's unloaded latency at the same instants
	// (0 until measured).
	Unloaded []time.Duration
	// Node is the node's requests in flight (served and queued) at the
	// same instants, Slowest the longest latency of the answers in the
	// 100 ms before each: the traces that show where a run's p99 comes
	// from.
	Node    []int
	Slowest []time.Duration
	// Phases are the indices in Limit where each phase began.
	Phases []int
}

// PoliteRate returns the polite peer's success rate.
func (r *SimResult) PoliteRate() float64 {
	if r.PoliteSent == 0 {
		return 0
	}
	return float64(r.PoliteOK) / float64(r.PoliteSent)
}

// SimConfig is one run.
type SimConfig struct {
	Node     SimNode
	Load     SimLoad
	Adaptive bool
	// Settings are the group's adaptive settings (DefaultAdaptive when
	// zero), turned on with Adaptive.
	Settings limiter.Adaptive
	Warmup   time.Duration
	Phases   []SimPhase
	Rand     uint64 // the random stream's key: the same one, the same run
}

// The events of the simulation.
const (
	evArrive = iota // a peer's request arrives at limiterd
	evDone          // the node answers a request
	evSample        // every 100 ms: the limit is recorded
)

type simEvent struct {
	at   int64 // µs
	kind int
	peer int      // evArrive: the peer (Crowd is the polite one)
	req  *simReq  // evDone
	seq  uint64   // ties broken in order of scheduling
	_    struct{} // not comparable
}

type simReq struct {
	peer int
	sent int64 // µs
	d    limiter.Decision
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// SimGroup returns the group the simulation decides in: every key the
// Arweave general group has, per-peer limits the crowd stays within, and
// the adaptive settings a.
func SimGroup(load SimLoad, a limiter.Adaptive) limiter.GroupSettings {
	g := limiter.ArweaveGroups()[limiter.GroupGeneral]
	g.SlidingWindowLimit, g.SlidingWindowDuration = 100_000, 1000
	g.LeakyLimit = 0
	g.ConcurrencyLimit = load.PeerConcurrency
	g.Adaptive = a
	return g
}

// MeasureQuota gives group g of l answers in the two seconds after t0 (100
// of the first of ps each second, answered in 1 ms), so that the group's
// adaptive concurrency has measured its fair pace's quota, as when the node
// answers: the decision path's cost then includes keeping each peer's pace
// (docs/limiting.md, "Fair share at saturation").
func MeasureQuota(l *limiter.Limiter, g limiter.GroupID, ps []peer.Peer, t0 time.Time) {
	for s := range 2 {
		for i, p := range ps[:min(100, len(ps))] {
			at := t0.Add(time.Duration(s+1)*time.Second + time.Duration(i)*time.Millisecond)
			d := l.Decide(at, p, g)
			d.Sample(at, time.Millisecond, false)
			d.Release()
		}
	}
}

// RunSim runs cfg and returns what it measured.
func RunSim(cfg SimConfig) (SimResult, error) {
	a := cfg.Settings
	if a == (limiter.Adaptive{}) {
		a = limiter.DefaultAdaptive()
	}
	a.AdaptiveConcurrency = cfg.Adaptive
	t0 := time.UnixMilli(1_700_000_000_000)
	lim, err := limiter.New(memory.New(), t0, limiter.Config{
		Groups: map[string]limiter.GroupSettings{limiter.GroupGeneral: SimGroup(cfg.Load, a)}, IPv6Prefix: 64})
	if err != nil {
		return SimResult{}, err
	}
	g, _ := lim.GroupID(limiter.GroupGeneral)
	rng := rand.New(rand.NewPCG(cfg.Rand, cfg.Rand^0x9e3779b97f4a7c15))
	peers := make([]peer.Peer, cfg.Load.Crowd+1)
	for i := range peers {
		ad := netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})
		peers[i] = peer.Peer{Addr: ad, Key: peer.KeyFromAddr(ad, 64)}
	}
	polite := cfg.Load.Crowd
	crowdRate := cfg.Load.Overload * cfg.Node.Capacity() / float64(cfg.Load.Crowd)
	rate := func(p int) float64 {
		if p == polite {
			return cfg.Load.Polite
		}
		return crowdRate
	}
	var end int64
	for _, ph := range cfg.Phases {
		end += ph.For.Microseconds()
	}
	end += cfg.Warmup.Microseconds()
	warm := cfg.Warmup.Microseconds()

	var q simQueue
	var seq uint64
	push := func(at int64, kind, p int, r *simReq) {
		seq++
		heap.Push(&q, &simEvent{at: at, kind: kind, peer: p, req: r, seq: seq})
	}
	next := func(p int) int64 { return int64(rng.ExpFloat64() / rate(p) * 1e6) }
	for p := range peers {
		if rate(p) > 0 {
			push(next(p), evArrive, p, nil)
		}
	}
	push(0, evSample, 0, nil)

	var res SimResult
	var lat []int64
	var busy int
	var waiting []*simReq
	var inflightArea float64
	var last int64
	var answered int
	var slowest int64 // µs, the longest answer since the last sample
	nodeInflight := func() int { return busy + len(waiting) }
	slow := func(at int64) float64 {
		t := at - warm
		for _, ph := range cfg.Phases {
			if t < ph.For.Microseconds() {
				return ph.Slowdown
			}
			t -= ph.For.Microseconds()
		}
		return 1
	}
	serve := func(r *simReq, at int64) {
		busy++
		s := float64(cfg.Node.Service.Microseconds()) * slow(at) * (1 + cfg.Node.Jitter*(2*rng.Float64()-1))
		push(at+int64(s), evDone, 0, r)
	}
	timeout := cfg.Load.ClientTimeout.Microseconds()
	phaseAt := warm
	phase := 0
	for q.Len() > 0 {
		e := heap.Pop(&q).(*simEvent)
		if e.at >= end {
			break
		}
		if e.at >= warm {
			from := max(last, warm)
			inflightArea += float64(nodeInflight()) * float64(e.at-from)
			res.MaxInflight = max(res.MaxInflight, nodeInflight())
		}
		last = e.at
		now := t0.Add(time.Duration(e.at) * time.Microsecond)
		measured := e.at >= warm
		switch e.kind {
		case evSample:
			for phase < len(cfg.Phases) && e.at >= phaseAt {
				res.Phases = append(res.Phases, len(res.Limit))
				phaseAt += cfg.Phases[phase].For.Microseconds()
				phase++
			}
			v, _ := lim.Adaptive(g)
			res.Limit = append(res.Limit, v.Limit)
			res.Probing = append(res.Probing, v.Probing)
			res.Unloaded = append(res.Unloaded, v.Unloaded)
			res.Node = append(res.Node, nodeInflight())
			res.Slowest = append(res.Slowest, time.Duration(slowest)*time.Microsecond)
			slowest = 0
			push(e.at+100_000, evSample, 0, nil)
		case evArrive:
			push(e.at+next(e.peer), evArrive, e.peer, nil)
			if measured && e.peer == polite {
				res.PoliteSent++
			}
			d := lim.Decide(now, peers[e.peer], g)
			if !d.Allowed {
				if measured {
					if d.Reason == limiter.ReasonAdaptive {
						res.Shed++
					} else {
						res.Rejected++
					}
				}
				continue
			}
			r := &simReq{peer: e.peer, sent: e.at, d: d}
			if busy < cfg.Node.Servers {
				serve(r, e.at)
			} else {
				waiting = append(waiting, r)
			}
		case evDone:
			busy--
			if len(waiting) > 0 {
				serve(waiting[0], e.at)
				waiting[0] = nil
				waiting = waiting[1:]
			}
			r := e.req
			l := e.at - r.sent
			slowest = max(slowest, l)
			r.d.Sample(now, time.Duration(l)*time.Microsecond, false)
			r.d.Release()
			if r.sent < warm {
				continue
			}
			seen := min(l, timeout)
			lat = append(lat, seen)
			if l <= timeout {
				answered++
				if r.peer == polite {
					res.PoliteOK++
				}
			}
		}
	}
	secs := float64(end-warm) / 1e6
	res.Goodput = float64(answered) / secs / cfg.Node.Capacity()
	res.Inflight = inflightArea / float64(end-warm)
	if len(lat) > 0 {
		slices.Sort(lat)
		pct := func(p float64) time.Duration {
			i := int(math.Ceil(p*float64(len(lat)))) - 1
			return time.Duration(lat[max(i, 0)]) * time.Microsecond
		}
		res.P50, res.P99 = pct(0.50), pct(0.99)
	}
	return res, nil
}

// Settle returns how long after sample index from the limit took to come
// within ±band of where it ended up before index to (the median of the
// last 5 s), and to stay there but for measurements of the unloaded
// latency; -1 when it never did.
func (r *SimResult) Settle(from, to int, band float64) time.Duration {
	tail := slices.Clone(r.Limit[max(from, to-50):to])
	slices.Sort(tail)
	ref := float64(tail[len(tail)/2])
	lo, hi := ref*(1-band), ref*(1+band)
	settled := -1
	for i := to - 1; i >= from; i-- {
		if r.Probing[i] {
			continue
		}
		if v := float64(r.Limit[i]); v < lo || v > hi {
			break
		}
		settled = i
	}
	if settled < 0 {
		return -1
	}
	return time.Duration(settled-from) * 100 * time.Millisecond
}

// Follow returns how long after sample index from the controller's
// unloaded latency came within ±band of want, -1 when it never did before
// index to.
func (r *SimResult) Follow(from, to int, want time.Duration, band float64) time.Duration {
	lo, hi := float64(want)*(1-band), float64(want)*(1+band)
	for i := from; i < to; i++ {
		if u := float64(r.Unloaded[i]); u >= lo && u <= hi {
			return time.Duration(i-from) * 100 * time.Millisecond
		}
	}
	return -1
}

// String is the result as one line.
func (r SimResult) String() string {
	return fmt.Sprintf("goodput %.1f%%  p50 %v  p99 %v  node in flight %.1f (max %d)  polite %d/%d = %.1f%%  shed %d  rejected %d",
		100*r.Goodput, r.P50, r.P99, r.Inflight, r.MaxInflight, r.PoliteOK, r.PoliteSent, 100*r.PoliteRate(), r.Shed, r.Rejected)
}
