package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// FloodOptions configure Flood.
type FloodOptions struct {
	Bin string // the limiterd binary
	Dir string // a scratch directory of the run's own
	// IPv4 and IPv6 are the distinct flood peers of each family, one
	// request each; MaxTracked is peers.max_tracked.
	IPv4, IPv6, MaxTracked int
	// Conns is the flood's keep-alive connections (default 32).
	Conns int
	// Rate is the flood's requests per second (0: as fast as limiterd
	// answers).
	Rate float64
	// Interval is snapshot.interval (default 5s).
	Interval time.Duration
	// PoliteEvery is the polite peer's pace (default 1s).
	PoliteEvery time.Duration
	// Log receives the daemon's log; Progress a line every few seconds
	// (both may be nil).
	Log, Progress io.Writer
}

// The flood's fixed peers, outside the flood's address blocks.
const (
	politePeer = "203.0.113.10"
	abuserPeer = "198.51.100.66"
	v6Prefix   = "2001:db8:66:1::/64"
	// floodLimit is general's leaky_limit in a flood: the polite peer,
	// at one request a second, stays far below it for 15 minutes.
	floodLimit = 1000
)

// FloodResult is what a Flood measured.
type FloodResult struct {
	Peers                int
	Duration             time.Duration
	Codes                string
	Evictions, Tracked   float64
	PeakRSS, HWM         int64 // bytes
	RSSBefore            int64
	PoliteRequests       int
	PoliteEvicted        []string // what showed the polite peer was evicted (empty: never)
	V6Sent, V6Requests   int64    // the /64 rotator's requests sent, and counted on its one entry
	V6Admitted, V6Denied int64
	AbuserBefore         int  // status of the abuser's request once exhausted, before the flood
	AbuserAfter          int  // and after it
	AbuserTracked        bool // whether the abuser's entry was still there after the flood
	TickDuringFlood      bool // general's leaky tick fell during the run (it forgives everyone)
}

// Limited reports whether the abuser who exhausted its limit before the
// flood is still limited after it.
func (r *FloodResult) Limited() bool { return r.AbuserAfter == 429 }

// String is the report.
func (r *FloodResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flood: %d distinct peers in %v (%.0f req/s); answers %s\n", r.Peers, r.Duration.Round(time.Millisecond),
		float64(r.Peers)/r.Duration.Seconds(), r.Codes)
	fmt.Fprintf(&b, "memory: RSS %s before, peak %s sampled, VmHWM %s\n", MiB(r.RSSBefore), MiB(r.PeakRSS), MiB(r.HWM))
	fmt.Fprintf(&b, "evictions %.0f, tracked entries at the end %.0f\n", r.Evictions, r.Tracked)
	if len(r.PoliteEvicted) == 0 {
		fmt.Fprintf(&b, "polite peer: %d requests, never evicted (its entry counted every one)\n", r.PoliteRequests)
	} else {
		fmt.Fprintf(&b, "polite peer: %d requests, EVICTED: %s\n", r.PoliteRequests, strings.Join(r.PoliteEvicted, "; "))
	}
	fmt.Fprintf(&b, "IPv6 rotator in %s: %d requests sent, %d on its one entry (%d admitted, %d answered 429)\n",
		v6Prefix, r.V6Sent, r.V6Requests, r.V6Admitted, r.V6Denied)
	fmt.Fprintf(&b, "abuser: %d before the flood, %d after it (entry still tracked: %v): ", r.AbuserBefore, r.AbuserAfter, r.AbuserTracked)
	if r.Limited() {
		b.WriteString("still limited\n")
	} else {
		b.WriteString("LAUNDERED by the flood (a fresh bucket)\n")
	}
	if r.TickDuringFlood {
		b.WriteString("note: general's leaky tick fell during the run, which forgives every peer\n")
	}
	return b.String()
}

// Flood starts limiterd with max_tracked, exhausts an abuser, then sends
// one request from each of IPv4+IPv6 distinct peers (X-Forwarded-For from
// the trusted 127.0.0.1) over keep-alive while a polite peer sends one
// request every PoliteEvery and an IPv6 attacker rotates inside one /64;
// it reports memory, evictions and what became of the three.
func Flood(ctx context.Context, o FloodOptions) (*FloodResult, error) {
	orDefault(&o.Conns, 32)
	orDefault(&o.PoliteEvery, time.Second)
	orDefault(&o.Interval, 5*time.Second)
	up, err := StartUpstream()
	if err != nil {
		return nil, err
	}
	defer up.Close()
	s, err := NewSetup(o.Dir, up.URL, floodLimit, 0, fmt.Sprintf("max_tracked = %d", o.MaxTracked), snapshotTOML(o.Interval))
	if err != nil {
		return nil, err
	}
	d := &Daemon{Bin: o.Bin, Config: s.Config, Log: o.Log}
	if err := d.Start(); err != nil {
		return nil, err
	}
	defer d.Stop()
	res := &FloodResult{Peers: o.IPv4 + o.IPv6}
	tickBefore, err := nextTick(d.Admin())
	if err != nil {
		return nil, err
	}
	one := func(peer string) (int, error) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(d.Public() + "/info")
		req.Header.Set("X-Forwarded-For", peer)
		if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
			return 0, err
		}
		return resp.StatusCode(), nil
	}
	// The abuser exhausts general, then goes idle.
	for i := range floodLimit {
		if c, err := one(abuserPeer); err != nil || c != 200 {
			return nil, fmt.Errorf("abuser's request %d: %d %v", i, c, err)
		}
	}
	if res.AbuserBefore, err = one(abuserPeer); err != nil {
		return nil, err
	}
	if st, err := ReadProcStats(d.Pid()); err == nil {
		res.RSSBefore = st.RSS
	}

	fctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	evicted := func(what string) {
		mu.Lock()
		res.PoliteEvicted = append(res.PoliteEvicted, what)
		mu.Unlock()
	}
	// The polite peer: a request at its pace, then its entry must count
	// every request it made (an eviction drops or restarts the count).
	wg.Go(func() {
		t := time.NewTicker(o.PoliteEvery)
		defer t.Stop()
		for n := 1; ; n++ {
			c, err := one(politePeer)
			if err != nil || c != 200 {
				evicted(fmt.Sprintf("request %d answered %d %v", n, c, err))
			}
			e, found, err := Peer(d.Admin(), politePeer, "general")
			switch {
			case err != nil:
				evicted(fmt.Sprintf("after request %d: %v", n, err))
			case !found:
				evicted(fmt.Sprintf("after request %d: not tracked", n))
			case num(e, "requests") != int64(n):
				evicted(fmt.Sprintf("after request %d: its entry counts %d", n, num(e, "requests")))
			}
			mu.Lock()
			res.PoliteRequests = n
			mu.Unlock()
			select {
			case <-fctx.Done():
				return
			case <-t.C:
			}
		}
	})
	// The IPv6 rotator: a new address of one /64 for every request, as
	// many as its limit and a fifth more, during the flood.
	var rotator sync.WaitGroup
	rotator.Go(func() {
		rng := rand.New(rand.NewPCG(66, 1))
		for i := 0; ctx.Err() == nil && i < floodLimit+floodLimit/5; i++ {
			ip := fmt.Sprintf("2001:db8:66:1:%x:%x:%x:%x", rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff)
			c, err := one(ip)
			if err != nil {
				continue
			}
			atomic.AddInt64(&res.V6Sent, 1)
			switch c {
			case 200:
				atomic.AddInt64(&res.V6Admitted, 1)
			case 429:
				atomic.AddInt64(&res.V6Denied, 1)
			}
			time.Sleep(time.Millisecond)
		}
		// At once, while its entry is the freshest: it must have counted
		// every request, as one peer.
		if e, found, err := Peer(d.Admin(), v6Prefix, "general"); err == nil && found {
			atomic.StoreInt64(&res.V6Requests, num(e, "requests"))
		}
	})
	// Memory, sampled.
	wg.Go(func() {
		for fctx.Err() == nil {
			if st, err := ReadProcStats(d.Pid()); err == nil {
				mu.Lock()
				res.PeakRSS = max(res.PeakRSS, st.RSS)
				mu.Unlock()
			}
			select {
			case <-fctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	})

	// The flood: peer k of sender w is w + k·Conns; one request each.
	total := int64(o.IPv4 + o.IPv6)
	var next atomic.Int64
	lctx, lstop := context.WithCancel(fctx)
	defer lstop()
	salt := rand.Uint64()
	l := &Load{Addr: s.Public, Conns: o.Conns, Rate: o.Rate, Next: func(_ int, _ int64, req *fasthttp.Request) bool {
		i := next.Add(1) - 1
		if i >= total {
			return false
		}
		peer := IPv4(i)
		if i >= int64(o.IPv4) {
			peer = IPv6(i-int64(o.IPv4), salt^uint64(i)*0x9e3779b97f4a7c15)
		}
		req.SetRequestURI("/info")
		req.Header.Set("X-Forwarded-For", peer)
		return true
	}}
	start := time.Now()
	progress := make(chan struct{})
	go func() {
		defer close(progress)
		for lctx.Err() == nil {
			select {
			case <-lctx.Done():
			case <-time.After(5 * time.Second):
				if o.Progress != nil {
					st, _ := ReadProcStats(d.Pid())
					fmt.Fprintf(o.Progress, "  %v: %d/%d peers sent, RSS %s\n", time.Since(start).Round(time.Second), l.Sent(), total, MiB(st.RSS))
				}
			}
		}
	}()
	l.Run(lctx)
	res.Duration = time.Since(start)
	lstop()
	if l.Sent() < total {
		return nil, fmt.Errorf("the flood stopped after %d of %d peers", l.Sent(), total)
	}
	<-progress
	res.Codes = l.CodesString()
	rotator.Wait()
	// Let the polite peer make one more request after the flood.
	time.Sleep(o.PoliteEvery + o.PoliteEvery/2)
	stop()
	wg.Wait()

	if st, err := ReadProcStats(d.Pid()); err == nil {
		res.HWM = st.HWM
		res.PeakRSS = max(res.PeakRSS, st.RSS)
	}
	m, err := Metrics(d.Admin())
	if err != nil {
		return nil, err
	}
	res.Evictions, res.Tracked = m["limiterd_evictions_total"], m["limiterd_tracked_entries"]
	_, res.AbuserTracked, _ = Peer(d.Admin(), abuserPeer, "general")
	if res.AbuserAfter, err = one(abuserPeer); err != nil {
		return nil, err
	}
	tickAfter, err := nextTick(d.Admin())
	if err != nil {
		return nil, err
	}
	res.TickDuringFlood = tickAfter != tickBefore
	return res, nil
}

// nextTick returns general's next_leaky_tick.
func nextTick(admin string) (string, error) {
	code, v, err := API(admin, "GET", "/api/v1/groups/general", "")
	if err != nil || code != 200 {
		return "", fmt.Errorf("GET /api/v1/groups/general: %d %v %v", code, v, err)
	}
	s, _ := v["next_leaky_tick"].(string)
	return s, nil
}
