package chaos

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// CheckFloodOptions configure CheckFlood.
type CheckFloodOptions struct {
	Bin, Dir string
	// Duration is how long the flood runs (default 3 min); Rate its checks
	// a second (0: as fast as answered) over Conns connections (default 8).
	Duration time.Duration
	Rate     float64
	Conns    int
	// MaxTracked is peers.max_tracked (default 10 000); Lease is
	// admin.check_lease (default 5 s).
	MaxTracked int
	Lease      time.Duration
	Log        io.Writer
	Progress   io.Writer
}

// CheckFloodResult is what CheckFlood measured.
type CheckFloodResult struct {
	Duration                time.Duration
	MaxTracked              int
	Checks                  int64 // distinct peers checked, none releasing
	Codes                   string
	LeasesCut, Evictions    float64
	PeakTracked, PeakFlight int64 // sampled: tracked entries, slots held by leases
	TrackedAfter            float64
	FlightAfter             int64 // slots held once the leases ended
	RSSBefore, PeakRSS, HWM int64
	RSSAfter                int64
	Failures                []string
}

// OK reports whether the bounds held.
func (r *CheckFloodResult) OK() bool { return len(r.Failures) == 0 }

func (r *CheckFloodResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "check flood: %d distinct peers through POST /api/v1/check in %v (%.0f a second), none releasing; answers %s\n",
		r.Checks, r.Duration.Round(time.Millisecond), float64(r.Checks)/r.Duration.Seconds(), r.Codes)
	fmt.Fprintf(&b, "max_tracked %d: tracked entries at most %d sampled, slots held by leases at most %d; leases cut %.0f, evictions %.0f\n",
		r.MaxTracked, r.PeakTracked, r.PeakFlight, r.LeasesCut, r.Evictions)
	fmt.Fprintf(&b, "memory: RSS %s before, peak %s sampled, VmHWM %s; %s once the leases ended\n", MiB(r.RSSBefore), MiB(r.PeakRSS), MiB(r.HWM), MiB(r.RSSAfter))
	fmt.Fprintf(&b, "once the leases ended: %d slots held, %.0f entries tracked\n", r.FlightAfter, r.TrackedAfter)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "FAILURE: %s\n", f)
	}
	return b.String()
}

// inflight returns the slots held now, all groups together (the
// overview's inflight).
func inflight(admin string) (int64, error) {
	code, v, err := API(admin, "GET", "/api/v1/overview", "")
	if err != nil || code != 200 {
		return 0, fmt.Errorf("GET /api/v1/overview: %d %v", code, err)
	}
	var n int64
	gs, _ := v["groups"].([]any)
	for _, g := range gs {
		e, _ := g.(map[string]any)
		n += num(e, "inflight")
	}
	return n, nil
}

// CheckFlood starts limiterd and floods POST /api/v1/check with distinct
// peers that never release: the leases, bounded by max_tracked (the oldest
// cut first), keep the table and the daemon's memory bounded, and once
// the flood stops and the leases end no slot is held.
func CheckFlood(ctx context.Context, o CheckFloodOptions) (*CheckFloodResult, error) {
	orDefault(&o.Duration, 3*time.Minute)
	orDefault(&o.Conns, 8)
	orDefault(&o.MaxTracked, 10000)
	orDefault(&o.Lease, 5*time.Second)
	up, err := StartUpstream()
	if err != nil {
		return nil, err
	}
	defer up.Close()
	s, err := NewSetup(o.Dir, up.URL, floodLimit, 0, fmt.Sprintf("max_tracked = %d", o.MaxTracked), "")
	if err != nil {
		return nil, err
	}
	if err := editConfig(s, nil, []string{fmt.Sprintf("check_lease = %q", o.Lease)}, 0); err != nil {
		return nil, err
	}
	d := &Daemon{Bin: o.Bin, Config: s.Config, Log: o.Log}
	if err := d.Start(); err != nil {
		return nil, err
	}
	defer d.Stop()
	res := &CheckFloodResult{MaxTracked: o.MaxTracked}
	if st, err := ReadProcStats(d.Pid()); err == nil {
		res.RSSBefore = st.RSS
	}

	fctx, stop := context.WithTimeout(ctx, o.Duration)
	defer stop()
	var mu sync.Mutex
	var sampleErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		for fctx.Err() == nil {
			st, err1 := ReadProcStats(d.Pid())
			m, err2 := Metrics(d.Admin())
			f, err3 := inflight(d.Admin())
			mu.Lock()
			if err := firstOf(err1, err2, err3); err != nil && sampleErr == nil {
				sampleErr = err
			}
			res.PeakRSS = max(res.PeakRSS, st.RSS)
			res.PeakTracked = max(res.PeakTracked, int64(m["limiterd_tracked_entries"]))
			res.PeakFlight = max(res.PeakFlight, f)
			mu.Unlock()
			select {
			case <-fctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	start := time.Now()
	go func() {
		for fctx.Err() == nil {
			select {
			case <-fctx.Done():
			case <-time.After(10 * time.Second):
				if o.Progress != nil {
					mu.Lock()
					fmt.Fprintf(o.Progress, "  %v: tracked at most %d, slots held at most %d, RSS peak %s\n",
						time.Since(start).Round(time.Second), res.PeakTracked, res.PeakFlight, MiB(res.PeakRSS))
					mu.Unlock()
				}
			}
		}
	}()
	salt := uint64(time.Now().UnixNano())
	l := &Load{Addr: s.Admin, Conns: o.Conns, Rate: o.Rate, Next: func(w int, n int64, req *fasthttp.Request) bool {
		// Peer k of sender w is w + k·Conns: distinct over the run.
		i := int64(w) + n*int64(o.Conns)
		peer := IPv4(i)
		if i%4 == 3 {
			peer = IPv6(i, salt^uint64(i)*0x9e3779b97f4a7c15)
		}
		req.Header.SetMethod("POST")
		req.SetRequestURI("/api/v1/check")
		req.Header.Set("Authorization", "Bearer "+Token)
		req.Header.SetContentType("application/json")
		req.SetBodyString(fmt.Sprintf(`{"peer":%q,"path":"/info"}`, peer))
		return true
	}}
	l.Run(fctx)
	res.Duration = time.Since(start)
	stop()
	wg.Wait()
	if sampleErr != nil {
		return nil, sampleErr
	}
	res.Checks, res.Codes = l.Sent(), l.CodesString()
	if st, err := ReadProcStats(d.Pid()); err == nil {
		res.HWM = st.HWM
	}
	// The leases end within check_lease and the expiry's tick (1 s).
	time.Sleep(o.Lease + 2*time.Second)
	m, err := Metrics(d.Admin())
	if err != nil {
		return nil, err
	}
	res.LeasesCut, res.Evictions, res.TrackedAfter = m["limiterd_check_leases_cut_total"], m["limiterd_evictions_total"], m["limiterd_tracked_entries"]
	if res.FlightAfter, err = inflight(d.Admin()); err != nil {
		return nil, err
	}
	if st, err := ReadProcStats(d.Pid()); err == nil {
		res.RSSAfter = st.RSS
	}

	fail := func(f string, a ...any) { res.Failures = append(res.Failures, fmt.Sprintf(f, a...)) }
	ok := l.Codes()[200]
	if ok < int64(2*o.MaxTracked) || l.Errors() > 0 {
		fail("%d checks admitted, %d errors: the flood did not pass max_tracked twice", ok, l.Errors())
	}
	// A few entries of the groups besides general, and the samples' gaps.
	if res.PeakTracked > int64(o.MaxTracked)+int64(o.Conns)+8 {
		fail("%d entries tracked, over max_tracked %d", res.PeakTracked, o.MaxTracked)
	}
	// Room is made before each check decides: checks deciding at once
	// on other connections may each pass it, a moment over the bound.
	if res.PeakFlight > int64(o.MaxTracked+o.Conns) {
		fail("%d slots held by leases, over max_tracked %d and a check a connection", res.PeakFlight, o.MaxTracked)
	}
	if res.LeasesCut == 0 && float64(ok) > float64(o.MaxTracked)*(1+o.Lease.Seconds()) {
		fail("no lease was cut by %d checks", ok)
	}
	if res.FlightAfter != 0 {
		fail("%d slots still held %v after the flood (check_lease %v)", res.FlightAfter, o.Lease+2*time.Second, o.Lease)
	}
	return res, nil
}

func firstOf(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
