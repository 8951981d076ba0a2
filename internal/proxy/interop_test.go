package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/limitertest"
	"github.com/limiterd/limiterd/internal/proxy"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
	"github.com/limiterd/limiterd/limiter/ratelimit"
)

// pacedClient is a node's client as Arweave 2.9.7 writes it
// (arweave_throttling): before each request it asks its adaptive throttle
// — limiterd's port of the node's, package throttle — and waits as long as
// the throttle says; after each reply it hands the throttle the reply's
// ratelimit-* fields. Requests go one at a time, as a node syncing from
// one peer sends them.
type pacedClient struct {
	t    *testing.T
	th   *throttle.Throttle
	peer string
	http *http.Client
	base string
	// Per path: requests, 429s, 429s after the first reply of the path's
	// group, and the time spent waiting for the throttle.
	sent, limited, limitedAfterFirst map[string]int
	waited                           time.Duration
	firstReply                       map[string]bool
	// now and sleep are the clock: the real one, or a fake one whose
	// sleep moves it on.
	now   func() time.Time
	sleep func(d time.Duration, wake <-chan struct{})
}

func newPacedClient(t *testing.T, base string, clock *limitertest.Clock) *pacedClient {
	now, sleep := time.Now, func(d time.Duration, wake <-chan struct{}) {
		select {
		case <-wake:
		case <-time.After(d):
		}
	}
	if clock != nil {
		now, sleep = clock.Now, func(d time.Duration, _ <-chan struct{}) { clock.Add(d) }
	}
	th, err := throttle.New(now(), throttle.Config{Mode: throttle.ModeAdaptive, Period: throttle.DefaultPeriod,
		RetryInterval: throttle.DefaultRetryInterval, DefaultType: throttle.DefaultType, DefaultRPM: throttle.DefaultRPM,
		Compile: func(p string) (throttle.Matcher, error) { return limiter.ThrottleMatcher(p) }})
	if err != nil {
		t.Fatal(err)
	}
	c := &pacedClient{t: t, th: th, peer: "limiterd-node:1984", http: &http.Client{Transport: &http.Transport{}}, base: base,
		sent: map[string]int{}, limited: map[string]int{}, limitedAfterFirst: map[string]int{}, firstReply: map[string]bool{},
		now: now, sleep: sleep}
	t.Cleanup(c.http.CloseIdleConnections)
	return c
}

// get sends GET path once the throttle lets it go, and reports the reply.
func (c *pacedClient) get(path, key string) {
	c.t.Helper()
	start := c.now()
	r := c.th.TryAdaptive(start, c.peer, path)
	for !r.Admitted {
		wait := r.WaitIn
		if wait <= 0 {
			wait = 10 * time.Second // only a reply or the wake ends it: none comes, so the test fails below
		}
		c.sleep(wait, r.Wake)
		if c.now().Sub(start) > 5*time.Minute {
			c.t.Fatalf("%s: waited 5 minutes for the throttle (%+v)", path, r)
		}
		r = c.th.PollAdaptive(c.now(), r.Ticket)
	}
	c.waited += c.now().Sub(start)
	resp, err := c.http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.sent[key]++
	if resp.StatusCode == http.StatusTooManyRequests {
		c.limited[key]++
		if c.firstReply[key] {
			c.limitedAfterFirst[key]++
		}
	} else if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("%s: status %d", path, resp.StatusCode)
	}
	c.firstReply[key] = true
	fields := map[string]string{}
	for name, vs := range resp.Header {
		if strings.HasPrefix(strings.ToLower(name), "ratelimit-") {
			fields[strings.ToLower(name)] = vs[len(vs)-1]
		}
	}
	c.th.Observe(c.now(), c.peer, path, fields)
}

// TestInteropAdaptiveClient: a 2.9.7 node's client sends 400 requests
// (general and chunk, alternately) through limiterd in front of a node,
// on the real clock. With server.ratelimit_headers = "both" it learns
// each group's quota from the first reply and paces itself: not one 429
// after that. With "ietf" its peer looks incompatible (no ratelimit-*
// field), it never slows down, and it gets the 429s of a client that
// does not pace at all.
func TestInteropAdaptiveClient(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 800 requests over loopback on the real clock")
	}
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(node.Close)
	up, _ := url.Parse(node.URL)
	// Arweave 2.9.7's groups, their ticks shortened so that the pacing
	// takes seconds, not the minutes of the 30 s ticks, and their tokens
	// cut to 25 a tick (50/s): an unpaced client must outrun its limits
	// on any machine, and a sequential one under -race on a loaded CI
	// machine managed 400 requests/s a group, within the 800/s of 400
	// tokens a tick (a run saw no 429 and no pacing at all).
	groups := limiter.ArweaveGroups297()
	for name, g := range map[string][4]int64{"general": {3, 2000, 25, 500}, "chunk": {20, 1000, 25, 500}} {
		s := groups[name]
		s.SlidingWindowLimit, s.SlidingWindowDuration, s.LeakyLimit, s.LeakyTickInterval = g[0], g[1], g[2], g[3]
		s.LeakyTickReduction = g[2]
		groups[name] = s
	}
	run := func(set ratelimit.Set) *pacedClient {
		lim, err := limiter.New(memory.New(), time.Now(), limiter.Config{Groups: groups, Routes: limiter.ArweaveRoutes(), IPv6Prefix: 64,
			ArweaveVersion: limiter.Arweave297})
		if err != nil {
			t.Fatal(err)
		}
		c := newPacedClient(t, serve(t, proxy.New(lim, proxy.Options{Upstream: up, RateLimitHeaders: set})), nil)
		for i := range 200 {
			c.get("/info", "general")
			c.get(fmt.Sprintf("/chunk/%d", i), "chunk")
		}
		t.Logf("ratelimit_headers = %s: sent %v, 429s %v (after the first reply of the group: %v), waited %s for the throttle; throttle: %+v",
			set, c.sent, c.limited, c.limitedAfterFirst, c.waited.Round(time.Millisecond), c.th.AdaptiveStats())
		return c
	}

	both := run(ratelimit.SetBoth)
	for _, g := range []string{"general", "chunk"} {
		if both.limitedAfterFirst[g] != 0 {
			t.Errorf("both: %d 429s in %s after the first reply: the client did not pace by the fields", both.limitedAfterFirst[g], g)
		}
	}
	if both.waited < time.Second {
		t.Errorf("both: the client waited %s in all: it was never paced, so the test proves nothing", both.waited)
	}
	ietf := run(ratelimit.SetIETF)
	if ietf.limited["general"] == 0 || ietf.limited["chunk"] == 0 {
		t.Errorf("ietf: 429s %v: a client that cannot pace must run into the limits", ietf.limited)
	}
}

// TestInteropAdaptiveClientProduction: the same client against Arweave
// 2.9.7's production groups as they are (general: a 3 / 2 s window and 450
// tokens per 30 s tick; chunk: 1 000 / 1 s and 6 000 per 30 s), on a fake
// clock that the client's waits move on (each request takes 5 ms): 2 000
// requests, with waits for 30 s ticks.
//
// chunk sees no 429 after its first reply. general sees a few, and they
// are the node's own: once its bucket is dry, the node's fields (which
// limiterd reproduces exactly, docs/replies.md) say "reset 1 s" — the *age* of
// the window's oldest timestamp, not the time until it expires — so the client
// comes back after 1 s, while the 2 s window is still full, and is refused; the
// refusal's fields then give it the window's 3 calls, 1 s later again. One 429
// per 2 s while the bucket is dry, where an unpaced client gets hundreds
// (decision 92).
func TestInteropAdaptiveClientProduction(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(node.Close)
	up, _ := url.Parse(node.URL)
	run := func(set ratelimit.Set) *pacedClient {
		clock := limitertest.NewClock(time.UnixMilli(1_700_000_000_000))
		lim, err := limiter.New(memory.New(), clock.Now(), limiter.Config{Groups: limiter.ArweaveGroups297(), Routes: limiter.ArweaveRoutes(),
			IPv6Prefix: 64, ArweaveVersion: limiter.Arweave297})
		if err != nil {
			t.Fatal(err)
		}
		c := newPacedClient(t, serve(t, proxy.New(lim, proxy.Options{Upstream: up, Now: clock.Now, RateLimitHeaders: set})), clock)
		start := clock.Now()
		for i := range 1000 {
			c.get("/info", "general")
			clock.Add(5 * time.Millisecond)
			c.get(fmt.Sprintf("/chunk/%d", i), "chunk")
			clock.Add(5 * time.Millisecond)
		}
		t.Logf("ratelimit_headers = %s: sent %v, 429s %v (after the first reply: %v), %s of fake time, %s of it waiting",
			set, c.sent, c.limited, c.limitedAfterFirst, clock.Now().Sub(start), c.waited)
		return c
	}
	both, ietf := run(ratelimit.SetBoth), run(ratelimit.SetIETF)
	if both.limitedAfterFirst["chunk"] != 0 {
		t.Errorf("both: %d 429s in chunk after the first reply", both.limitedAfterFirst["chunk"])
	}
	if both.waited < 30*time.Second {
		t.Errorf("both: waited %s: the client never met general's 30 s tick, so the test proves little", both.waited)
	}
	// At most one refusal per 2 s of the client's waiting (the window's
	// duration), and far below an unpaced client's.
	if n, most := both.limitedAfterFirst["general"], int(both.waited/(2*time.Second))+1; n > most || n*10 > ietf.limited["general"] {
		t.Errorf("both: %d 429s in general (at most %d, one per 2 s of waiting, and under a tenth of ietf's %d)", n, most, ietf.limited["general"])
	}
	if ietf.limited["general"] == 0 {
		t.Errorf("ietf: no 429 in general: an unpaced client must run into its 453 per 30 s")
	}
}
