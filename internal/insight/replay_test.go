package insight_test

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/insight"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/peer"
)

var r0 = time.UnixMilli(1_700_000_000_000)

// replayLimiter is a limiter recording its decisions, with a group "test"
// of settings s.
func replayLimiter(t testing.TB, s limiter.GroupSettings) (*limiter.Limiter, limiter.GroupID) {
	t.Helper()
	groups := limiter.ArweaveGroups()
	groups["test"] = s
	rec := insight.NewRecorder(1 << 14)
	l, err := limiter.New(memory.New(), r0, limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64}, limiter.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	recorders.Store(l, rec)
	g, _ := l.GroupID("test")
	return l, g
}

// recorders holds the Recorder observing each limiter replayLimiter made.
var recorders sync.Map

// recorderOf returns the Recorder observing l.
func recorderOf(l *limiter.Limiter) *insight.Recorder {
	r, _ := recorders.Load(l)
	return r.(*insight.Recorder)
}

func testPeer(i int) peer.Peer {
	a := netip.AddrFrom4([4]byte{203, 0, byte(i >> 8), byte(i)})
	return peer.Peer{Addr: a, Key: peer.KeyFromAddr(a, 64)}
}

// drive sends n requests of peers random peers over span on the fake
// timeline (each admitted one released at once, so concurrency never
// rejects) and logs them; it returns the limiter's own rejections. With
// heavy > 0, half the requests come from the first heavy peers.
func drive(t testing.TB, l *limiter.Limiter, g limiter.GroupID, log *insight.RequestLog, rng *rand.Rand, peers, heavy, n int, span time.Duration) int64 {
	t.Helper()
	var rejected int64
	var buf []insight.Arrival
	ms := int64(0)
	step := span.Milliseconds() / int64(n)
	for i := range n {
		ms += rng.Int64N(2*step + 1)
		p := rng.IntN(peers)
		if heavy > 0 && rng.IntN(2) == 0 {
			p = rng.IntN(heavy)
		}
		d := l.Decide(r0.Add(time.Duration(ms)*time.Millisecond), testPeer(p), g)
		if !d.Allowed {
			rejected++
		}
		d.Release()
		if i%1000 == 999 {
			buf, _ = recorderOf(l).Drain(buf[:0])
			log.Add(buf)
		}
	}
	buf, _ = recorderOf(l).Drain(buf[:0])
	log.Add(buf)
	return rejected
}

func stepper(t testing.TB, l *limiter.Limiter, g limiter.GroupID, now time.Time, edit func(*limiter.GroupSettings)) insight.Stepper {
	t.Helper()
	rs, ok := insight.CurrentReplaySettings(l, g, now)
	if !ok {
		t.Fatal("no settings")
	}
	if edit != nil {
		edit(&rs.Settings)
		rs.Leaky = limiter.NewSchedule(rs.Leaky.Anchor, rs.Settings.LeakyTickInterval)
		rs.Cleanup = limiter.NewSchedule(rs.Cleanup.Anchor, rs.Settings.CleanupInterval)
	}
	s, err := insight.NewStepper(rs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReplayReproduces: replayed under the settings it was decided with,
// the log gives exactly the limiter's rejections; a lower limit rejects
// more, a higher one fewer.
func TestReplayReproduces(t *testing.T) {
	s := limiter.GroupSettings{
		SlidingWindowLimit: 3, SlidingWindowDuration: 1000, CleanupInterval: 5000, CleanupExpiry: 4000,
		LeakyLimit: 20, LeakyTickInterval: 7000, LeakyTickReduction: 6, ConcurrencyLimit: 1000,
	}
	for _, seed := range []uint64{1, 2, 3} {
		l, g := replayLimiter(t, s)
		log := insight.NewRequestLog()
		rng := rand.New(rand.NewPCG(seed, 7))
		want := drive(t, l, g, log, rng, 40, 0, 20000, 2*time.Minute)
		now := r0.Add(3 * time.Minute)
		same := stepper(t, l, g, now, nil)
		lower := stepper(t, l, g, now, func(s *limiter.GroupSettings) { s.LeakyLimit = 10 })
		higher := stepper(t, l, g, now, func(s *limiter.GroupSettings) { s.LeakyLimit = 40; s.SlidingWindowLimit = 5 })
		res := log.Replay(g, r0, []insight.Stepper{same, lower, higher})
		if res.Logged != 20000 || res.Requests != 20000 || res.Shift != 0 || res.Short {
			t.Fatalf("seed %d: %+v", seed, res)
		}
		if want == 0 || res.Observed != want || res.Rejected[0] != want {
			t.Fatalf("seed %d: the limiter rejected %d, the log says %d, the replay %d", seed, want, res.Observed, res.Rejected[0])
		}
		if !(res.Rejected[1] > want && res.Rejected[2] < want) {
			t.Fatalf("seed %d: lower %d, same %d, higher %d", seed, res.Rejected[1], want, res.Rejected[2])
		}
		t.Logf("seed %d: %d requests, rejected %d; leaky 10: %d; leaky 40, window 5: %d", seed, res.Requests, want, res.Rejected[1], res.Rejected[2])
	}
}

// TestReplayKeepsConcurrency: a request the limiter rejected for
// concurrency stays rejected, and changes no state.
func TestReplayKeepsConcurrency(t *testing.T) {
	s := limiter.GroupSettings{
		SlidingWindowLimit: 0, SlidingWindowDuration: 1000, CleanupInterval: 120000, CleanupExpiry: 120000,
		LeakyLimit: 2, LeakyTickInterval: 60000, LeakyTickReduction: 2, ConcurrencyLimit: 1,
	}
	l, g := replayLimiter(t, s)
	p := testPeer(1)
	d1 := l.Decide(r0.Add(time.Millisecond), p, g) // token 1, held
	d2 := l.Decide(r0.Add(2*time.Millisecond), p, g)
	d1.Release()
	d3 := l.Decide(r0.Add(3*time.Millisecond), p, g) // token 2
	d3.Release()
	d4 := l.Decide(r0.Add(4*time.Millisecond), p, g) // rate limit
	if !d1.Allowed || d2.Allowed || d2.Reason != limiter.ReasonConcurrency || !d3.Allowed || d4.Allowed {
		t.Fatalf("setup: %v %v %v %v", d1.Allowed, d2.Reason, d3.Allowed, d4.Allowed)
	}
	buf, _ := recorderOf(l).Drain(nil)
	log := insight.NewRequestLog()
	log.Add(buf)
	res := log.Replay(g, r0, []insight.Stepper{stepper(t, l, g, r0.Add(time.Second), nil)})
	if res.Observed != 2 || res.Concurrency != 1 || res.Rejected[0] != 2 {
		t.Fatalf("%+v", res)
	}
}

// TestReplaySample: with a peer sample the log keeps only the sampled
// (peer, group)s' requests, every one of them, and the replay scales its
// counts; a stricter sample later filters the older records too.
func TestReplaySample(t *testing.T) {
	s := limiter.GroupSettings{
		SlidingWindowLimit: 0, SlidingWindowDuration: 1000, CleanupInterval: 120000, CleanupExpiry: 120000,
		LeakyLimit: 5, LeakyTickInterval: 60000, LeakyTickReduction: 5, ConcurrencyLimit: 100,
	}
	l, g := replayLimiter(t, s)
	recorderOf(l).SetSampling(1, 0)
	log := insight.NewRequestLog()
	var buf []insight.Arrival
	send := func(from, n int) {
		for i := range 400 {
			for j := range n {
				d := l.Decide(r0.Add(time.Duration(from+i*n+j)*time.Millisecond), testPeer(i), g)
				d.Release()
			}
		}
		buf, _ = recorderOf(l).Drain(buf[:0])
		log.Add(buf)
	}
	send(0, 8) // 400 peers, 8 requests each: 5 admitted, 3 rejected
	res := log.Replay(g, r0, []insight.Stepper{stepper(t, l, g, r0.Add(time.Minute), nil)})
	if res.Shift != 1 || res.Logged%8 != 0 || res.Logged < 8*150 || res.Logged > 8*250 {
		t.Fatalf("half the peers, 8 requests each: %+v", res)
	}
	if res.Requests != int64(res.Logged)*2 || res.Observed != res.Requests*3/8 || res.Rejected[0] != res.Observed {
		t.Fatalf("scaled: %+v", res)
	}
	half := res.Logged
	recorderOf(l).SetSampling(2, 0)
	send(10000, 1)
	res = log.Replay(g, r0, []insight.Stepper{stepper(t, l, g, r0.Add(time.Minute), nil)})
	if res.Shift != 2 || res.Logged >= half || res.Logged%9 != 0 {
		t.Fatalf("a quarter of the peers, 9 requests each: %+v (half had %d)", res, half)
	}
}

// BenchmarkWhatIf1M replays 1 000 000 logged requests of one group (an
// hour: half from 50 heavy peers at about 2.8/s each, half from 5000
// others; window 3 per s, 30 tokens per 30 s) through the current
// settings and a halved leaky limit: what the group page's what-if does
// for one field. Target: ≤ 200 ms.
func BenchmarkWhatIf1M(b *testing.B) {
	s := limiter.ArweaveGroups()["general"]
	s.SlidingWindowLimit, s.LeakyLimit, s.LeakyTickReduction = 3, 30, 30
	l, g := replayLimiter(b, s)
	log := insight.NewRequestLog()
	rng := rand.New(rand.NewPCG(1, 2))
	drive(b, l, g, log, rng, 5000, 50, 1_000_000, 59*time.Minute)
	if log.Len() != 1_000_000 {
		b.Fatalf("logged %d", log.Len())
	}
	now := r0.Add(time.Hour)
	steps := []insight.Stepper{stepper(b, l, g, now, nil), stepper(b, l, g, now, func(s *limiter.GroupSettings) { s.LeakyLimit /= 2 })}
	b.ResetTimer()
	var res insight.ReplayResult
	for i := 0; i < b.N; i++ {
		res = log.Replay(g, now.Add(-time.Hour), steps)
	}
	b.StopTimer()
	if res.Logged != 1_000_000 {
		b.Fatalf("replayed %d", res.Logged)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/whatif")
	b.Logf("rejected now %d (observed %d), at half the leaky limit %d", res.Rejected[0], res.Observed, res.Rejected[1])
}

// TestReplayAlgorithms: every other algorithm (docs/limiting.md) replays as the
// local backend decided (the same rejections under the same limits), a lower
// limit rejects more and a higher one fewer, and a replay under another
// algorithm answers too.
func TestReplayAlgorithms(t *testing.T) {
	for _, k := range []algo.Kind{algo.TokenBucket, algo.GCRA, algo.FixedWindow, algo.SlidingLog, algo.SlidingWindow} {
		t.Run(k.String(), func(t *testing.T) {
			s := limiter.ArweaveGroups()["general"]
			s.Algorithm, s.Limit, s.Period, s.ConcurrencyLimit = k, 5, 2000, 1000
			if k.HasBurst() {
				s.Burst = 8
			}
			l, g := replayLimiter(t, s)
			log := insight.NewRequestLog()
			rng := rand.New(rand.NewPCG(uint64(k), 7))
			want := drive(t, l, g, log, rng, 40, 0, 20000, 2*time.Minute)
			now := r0.Add(3 * time.Minute)
			same := stepper(t, l, g, now, nil)
			lower := stepper(t, l, g, now, func(s *limiter.GroupSettings) { s.Limit = 3 })
			higher := stepper(t, l, g, now, func(s *limiter.GroupSettings) { s.Limit = 8; s.Burst = 0 })
			hybrid := stepper(t, l, g, now, func(s *limiter.GroupSettings) { s.Algorithm, s.Burst = algo.Hybrid, 0 })
			res := log.Replay(g, r0, []insight.Stepper{same, lower, higher, hybrid})
			if want == 0 || res.Observed != want || res.Rejected[0] != want {
				t.Fatalf("the limiter rejected %d, the log says %d, the replay %d", want, res.Observed, res.Rejected[0])
			}
			if !(res.Rejected[1] > want && res.Rejected[2] < want) {
				t.Fatalf("lower %d, same %d, higher %d", res.Rejected[1], want, res.Rejected[2])
			}
			if res.Rejected[3] == want {
				t.Fatalf("the hybrid's replay rejects as many as %s: %d", k, want)
			}
			t.Logf("%d requests, rejected %d; limit 3: %d; limit 8: %d; the hybrid: %d", res.Requests, want, res.Rejected[1], res.Rejected[2], res.Rejected[3])
		})
	}
	// Limits that are not valid are refused, naming the key.
	s := limiter.ArweaveGroups()["general"]
	s.Algorithm = algo.GCRA
	if _, err := insight.NewStepper(insight.ReplaySettings{Settings: s}); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("a gcra without its limit: %v", err)
	}
}

// The request log's memory grows a chunk at a time and stops at
// RequestLogMaxBytes however much is added.
func TestRequestLogBytes(t *testing.T) {
	log := insight.NewRequestLog()
	if log.Bytes() != 0 {
		t.Fatalf("empty: %d bytes", log.Bytes())
	}
	batch := make([]insight.Arrival, 4096)
	for i := range batch {
		batch[i] = insight.Arrival{InSample: true, MS: int64(i)}
	}
	log.Add(batch[:1])
	first := log.Bytes()
	if first <= 0 || first >= insight.RequestLogMaxBytes/4 {
		t.Fatalf("one request: %d bytes", first)
	}
	for range 3 * insight.RequestLogSize / len(batch) {
		log.Add(batch)
	}
	if log.Bytes() != insight.RequestLogMaxBytes || log.Len() != insight.RequestLogSize {
		t.Fatalf("full: %d bytes holding %d, want %d holding %d", log.Bytes(), log.Len(), insight.RequestLogMaxBytes, insight.RequestLogSize)
	}
}
