package algo_test

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/limiterd/limiterd/limiter/algo"
)

// op is one event of a random sequence: a request or a manual reduction
// at a time.
type op struct {
	at     int64
	reduce bool
}

// randomParams returns random limits, small and large, exact divisors of
// each other or not.
func randomParams(r *rand.Rand) algo.Params {
	limits := []int64{1, 2, 3, 7, 10, 100, 450, 1000, 123457}
	periods := []int64{1, 7, 1000, 1001, 30_000, 60_000, 86_400_000}
	bursts := []int64{0, 1, 2, 5, 50}
	return algo.Resolve(limits[r.IntN(len(limits))], periods[r.IntN(len(periods))], bursts[r.IntN(len(bursts))])
}

// randomOps returns a non-decreasing timeline of requests, bunched and
// spread around the rate L/P, with now and then a reduction or a long gap.
func randomOps(r *rand.Rand, p algo.Params, n int) []op {
	t := int64(1_700_000_000_000) + r.Int64N(p.Period)
	interval := max(1, p.Period/p.Limit)
	ops := make([]op, n)
	for i := range ops {
		switch x := r.IntN(100); {
		case x < 35: // same ms
		case x < 75:
			t += r.Int64N(2*interval + 1)
		case x < 95:
			t += r.Int64N(2*p.Period + 1)
		default:
			t += r.Int64N(10*p.Period + 1)
		}
		ops[i] = op{at: t, reduce: r.IntN(12) == 0}
	}
	return ops
}

// outcome is what one op got: admitted (or given back), and the wait of a
// rejection; with the quota after it.
type outcome struct {
	ok          bool
	wait        int64
	left, reset int64
}

func play(k algo.Kind, p algo.Params, ops []op) []outcome {
	s := algo.Fresh(k, p, ops[0].at)
	out := make([]outcome, len(ops))
	for i, o := range ops {
		var res outcome
		if o.reduce {
			s, res.ok = reduceOK(k, s, p, o.at)
		} else {
			s, res.ok, res.wait = algo.Decide(k, s, p, o.at)
		}
		q := quotaOf(k, s, p, o.at)
		res.left, res.reset = q.Remaining, q.Reset
		out[i] = res
	}
	return out
}

// TestBucketEqualsGCRA: token_bucket and gcra admit the same sequences for
// the same L, P and B (docs/limiting.md, "Other algorithms"), with the same
// waits, quotas and reductions, though one stores tokens and the other a TAT.
func TestBucketEqualsGCRA(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 3000 {
		p := randomParams(r)
		ops := randomOps(r, p, 200)
		tb, gc := play(algo.TokenBucket, p, ops), play(algo.GCRA, p, ops)
		for i := range ops {
			if tb[i] != gc[i] {
				t.Fatalf("trial %d %+v op %d %+v: token_bucket %+v, gcra %+v", trial, p, i, ops[i], tb[i], gc[i])
			}
		}
	}
}

// model is a naive reference implementation of one algorithm: exact
// rationals or plain lists of timestamps, written from docs/limiting.md without
// the package's integer encodings.
type model interface {
	decide(now int64) (ok bool, wait int64)
	reduce(now int64) bool
	remaining(now int64) int64
}

func rat(a, b int64) *big.Rat { return big.NewRat(a, b) }

// ceilRat returns ⌈x⌉ for x ≥ 0.
func ceilRat(x *big.Rat) int64 {
	q := new(big.Int).Quo(x.Num(), x.Denom())
	if new(big.Rat).SetInt(q).Cmp(x) < 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func floorRat(x *big.Rat) int64 {
	if x.Sign() < 0 {
		return -ceilRat(new(big.Rat).Neg(x))
	}
	return new(big.Int).Quo(x.Num(), x.Denom()).Int64()
}

// bucketModel: tokens as a rational, refilled at L/P per ms, capped at B.
type bucketModel struct {
	p      algo.Params
	tokens *big.Rat
	last   int64
}

func (m *bucketModel) refill(now int64) {
	if now > m.last {
		m.tokens.Add(m.tokens, rat((now-m.last)*m.p.Limit, m.p.Period))
		if m.tokens.Cmp(rat(m.p.Burst, 1)) > 0 {
			m.tokens = rat(m.p.Burst, 1)
		}
		m.last = now
	}
}

func (m *bucketModel) decide(now int64) (bool, int64) {
	m.refill(now)
	if m.tokens.Cmp(rat(1, 1)) < 0 {
		missing := new(big.Rat).Sub(rat(1, 1), m.tokens)
		return false, ceilRat(missing.Mul(missing, rat(m.p.Period, m.p.Limit)))
	}
	m.tokens.Sub(m.tokens, rat(1, 1))
	return true, 0
}

func (m *bucketModel) reduce(now int64) bool {
	m.refill(now)
	if m.tokens.Cmp(rat(m.p.Burst, 1)) >= 0 {
		return false
	}
	m.tokens.Add(m.tokens, rat(1, 1))
	if m.tokens.Cmp(rat(m.p.Burst, 1)) > 0 {
		m.tokens = rat(m.p.Burst, 1)
	}
	return true
}

func (m *bucketModel) remaining(now int64) int64 {
	m.refill(now)
	return floorRat(m.tokens)
}

// gcraModel: the textbook GCRA with a rational TAT: T = P/L, τ = (B−1)·T.
type gcraModel struct {
	p    algo.Params
	tat  *big.Rat
	seen int64 // the time of the last admission: time never goes back
}

func (m *gcraModel) at(now int64) (*big.Rat, *big.Rat, *big.Rat) {
	now = max(now, m.seen)
	n := rat(now, 1)
	tat := new(big.Rat).Set(m.tat)
	if tat.Cmp(n) < 0 {
		tat = n
	}
	tau := rat((m.p.Burst-1)*m.p.Period, m.p.Limit)
	return n, tat, tau
}

func (m *gcraModel) decide(now int64) (bool, int64) {
	n, tat, tau := m.at(now)
	sep := new(big.Rat).Sub(tat, n)
	if sep.Cmp(tau) > 0 {
		return false, ceilRat(sep.Sub(sep, tau))
	}
	m.tat = tat.Add(tat, rat(m.p.Period, m.p.Limit))
	m.seen = max(now, m.seen)
	return true, 0
}

func (m *gcraModel) reduce(now int64) bool {
	n, tat, _ := m.at(now)
	if tat.Cmp(n) <= 0 {
		return false
	}
	tat.Sub(tat, rat(m.p.Period, m.p.Limit))
	if tat.Cmp(n) < 0 {
		tat = n
	}
	m.tat, m.seen = tat, max(now, m.seen)
	return true
}

func (m *gcraModel) remaining(now int64) int64 {
	n, tat, tau := m.at(now)
	room := new(big.Rat).Sub(tau, new(big.Rat).Sub(tat, n))
	if room.Sign() < 0 {
		return 0
	}
	return floorRat(room.Mul(room, rat(m.p.Limit, m.p.Period))) + 1
}

// fixedModel: the admitted timestamps; a window is floor(t/P).
type fixedModel struct {
	p  algo.Params
	ts []int64
}

func (m *fixedModel) count(now int64) int64 {
	var n int64
	for _, t := range m.ts {
		if t/m.p.Period == now/m.p.Period {
			n++
		}
	}
	return n
}

func (m *fixedModel) decide(now int64) (bool, int64) {
	if m.count(now)+1 > m.p.Limit {
		return false, (now/m.p.Period+1)*m.p.Period - now
	}
	m.ts = append(m.ts, now)
	return true, 0
}

func (m *fixedModel) reduce(now int64) bool {
	if m.count(now) == 0 {
		return false
	}
	m.ts = m.ts[:len(m.ts)-1]
	return true
}

func (m *fixedModel) remaining(now int64) int64 { return max(0, m.p.Limit-m.count(now)) }

// slidingModel: the admitted timestamps, counted per clock-aligned window,
// the estimate curr + prev·(P − (now − start))/P as a rational.
type slidingModel struct {
	p  algo.Params
	ts []int64
}

func (m *slidingModel) counts(now int64) (start, curr, prev int64) {
	start = now / m.p.Period * m.p.Period
	for _, t := range m.ts {
		switch {
		case t >= start:
			curr++
		case t >= start-m.p.Period:
			prev++
		}
	}
	return start, curr, prev
}

func (m *slidingModel) estimate(now int64, extra int64) *big.Rat {
	start, curr, prev := m.counts(now)
	e := rat(prev*(m.p.Period-(now-start)), m.p.Period)
	return e.Add(e, rat(curr+extra, 1))
}

func (m *slidingModel) decide(now int64) (bool, int64) {
	if m.estimate(now, 1).Cmp(rat(m.p.Limit, 1)) > 0 {
		start, curr, prev := m.counts(now)
		if curr+1 > m.p.Limit || prev == 0 {
			return false, start + m.p.Period - now
		}
		// r = 1 − (L − curr − 1)/prev; until = start + P·r, rounded up.
		r := new(big.Rat).Sub(rat(1, 1), rat(m.p.Limit-curr-1, prev))
		return false, start + ceilRat(r.Mul(r, rat(m.p.Period, 1))) - now
	}
	m.ts = append(m.ts, now)
	return true, 0
}

func (m *slidingModel) reduce(now int64) bool {
	if _, curr, _ := m.counts(now); curr == 0 {
		return false
	}
	m.ts = m.ts[:len(m.ts)-1]
	return true
}

func (m *slidingModel) remaining(now int64) int64 {
	room := new(big.Rat).Sub(rat(m.p.Limit, 1), m.estimate(now, 0))
	return max(0, floorRat(room))
}

// TestAgainstModels plays random sequences against each algorithm and its
// naive model: the same admissions, waits, reductions and remaining
// counts.
func TestAgainstModels(t *testing.T) {
	kinds := []struct {
		k   algo.Kind
		new func(p algo.Params, t0 int64) model
	}{
		{algo.TokenBucket, func(p algo.Params, t0 int64) model {
			return &bucketModel{p: p, tokens: rat(p.Burst, 1), last: t0}
		}},
		{algo.GCRA, func(p algo.Params, t0 int64) model { return &gcraModel{p: p, tat: rat(t0, 1), seen: t0} }},
		{algo.FixedWindow, func(p algo.Params, _ int64) model { return &fixedModel{p: p} }},
		{algo.SlidingWindow, func(p algo.Params, _ int64) model { return &slidingModel{p: p} }},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, kc := range kinds {
		for trial := range 400 {
			p := randomParams(r)
			if p.Limit > 1000 {
				p.Limit = 1000 // the list models are quadratic
			}
			if kc.k == algo.FixedWindow || kc.k == algo.SlidingWindow {
				p.Burst = 0
			}
			ops := randomOps(r, p, 150)
			m := kc.new(p, ops[0].at)
			s := algo.Fresh(kc.k, p, ops[0].at)
			for i, o := range ops {
				var got, want outcome
				if o.reduce {
					s, got.ok = reduceOK(kc.k, s, p, o.at)
					want.ok = m.reduce(o.at)
				} else {
					s, got.ok, got.wait = algo.Decide(kc.k, s, p, o.at)
					want.ok, want.wait = m.decide(o.at)
				}
				got.left, want.left = quotaOf(kc.k, s, p, o.at).Remaining, m.remaining(o.at)
				if got != want {
					t.Fatalf("%v trial %d %+v op %d %+v: got %+v, model %+v", kc.k, trial, p, i, o, got, want)
				}
				if idle := algo.Idle(kc.k, s, p, o.at); idle && got.left < min(p.Limit, p.Burst) {
					t.Fatalf("%v: idle with only %d left", kc.k, got.left)
				}
			}
		}
	}
}

// TestOutOfOrder: decisions a few ms out of order (goroutines that read the
// clock, then wait for the lock) never admit more than in order would over
// the same requests, for every algorithm.
func TestOutOfOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range []algo.Kind{algo.TokenBucket, algo.GCRA, algo.FixedWindow, algo.SlidingWindow} {
		for range 300 {
			p := randomParams(r)
			if !k.HasBurst() {
				p.Burst = p.Limit
			}
			ops := randomOps(r, p, 100)
			shuffled := slices.Clone(ops)
			for i := range shuffled {
				shuffled[i].reduce = false
				if j := i + r.IntN(3); j < len(shuffled) {
					shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
				}
			}
			admitted := 0
			s := algo.Fresh(k, p, shuffled[0].at)
			last := int64(0)
			for _, o := range shuffled {
				var a bool
				s, a, _ = algo.Decide(k, s, p, o.at)
				if a {
					admitted++
				}
				last = max(last, o.at)
			}
			// Over any span, at most B (or L) plus the refill of the span.
			span := last - shuffled[0].at
			if k == algo.FixedWindow || k == algo.SlidingWindow {
				span += 2 * p.Period
			}
			bound := p.Burst + (span*p.Limit)/p.Period + 1
			if int64(admitted) > bound {
				t.Fatalf("%v %+v: %d admitted out of order, bound %d", k, p, admitted, bound)
			}
		}
	}
}
