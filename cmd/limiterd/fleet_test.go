package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/redistest"
)

// overviewJSON is the part of GET /api/v1/overview the tests read.
type overviewJSON struct {
	Cluster   bool    `json:"cluster"`
	Window    float64 `json:"window_s"`
	Instances []struct {
		ID         string  `json:"id"`
		Self       bool    `json:"self"`
		Version    string  `json:"version"`
		Up         bool    `json:"up"`
		Rejected   float64 `json:"rejected"`
		ClockOffMS int64   `json:"clock_off_ms"`
		Node       struct {
			Up        bool    `json:"up"`
			Errors5xx float64 `json:"errors_5xx"`
			LastError string  `json:"last_error"`
		} `json:"node"`
	} `json:"instances"`
	TopRejected []struct {
		Peer, Group string
		Rate        float64
		Instances   []string
	} `json:"top_rejected"`
	Problems []struct {
		Severity, Instance, Title, Text string
	} `json:"problems"`
}

func (d *daemon) overview() overviewJSON {
	d.t.Helper()
	var o overviewJSON
	d.adminJSON("/api/v1/overview", &o)
	return o
}

// within polls cond every 200 ms for up to limit.
func within(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("waited %s for %s", limit, what)
}

// TestFleetInBrowser: two instances share a real Redis; a peer hammers
// the second. The first one's dashboard shows the fleet — both instances,
// the peer at the top of who is hammering with the instance that sees
// it, the peer's page saying it is limited, from the shared state in
// Redis, and seen there — and so does its
// /api/v1/overview. A hostile summary and an instance whose clock is 30 s
// ahead, written to Redis beside them, are skipped (counted, logged) and
// shown with a warning; the page stands. Stopped, the second instance is
// shown silent, then leaves. Every page is looked at in cluster mode at
// 1400 and 420 px.
func TestFleetInBrowser(t *testing.T) {
	srv := redistest.Start(t)
	up, _ := countingUpstream(t, nil)
	cfg := clusterConfig(up.URL, srv.Addr(), "mode = \"strict\"\non_failure = \"local\"\ntimeout = \"1s\"")
	a, b := startDaemonWith(t, cfg), startDaemonWith(t, cfg)
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	loginShot(t, ctx, a.AdminURL(), "cluster")
	login(t, ctx, a)

	// The attack, on b only, for the rest of the test.
	const attacker = "198.51.100.9"
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				b.as(attacker, "/info")
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	a.as("192.0.2.10", "/info") // a little traffic of a's own

	var ids [2]string
	within(t, 15*time.Second, "the fleet on a's API", func() bool {
		o := a.overview()
		if !o.Cluster || len(o.Instances) != 2 || len(o.TopRejected) == 0 {
			return false
		}
		ids = [2]string{o.Instances[0].ID, o.Instances[1].ID}
		tr := o.TopRejected[0]
		return o.Instances[0].Self && tr.Peer == attacker && tr.Group == "general" && len(tr.Instances) == 1 && tr.Instances[0] == ids[1] && tr.Rate > 10
	})
	if o := b.overview(); o.Instances[0].ID != ids[1] {
		t.Fatalf("b's own id %q, a sees %q", o.Instances[0].ID, ids[1])
	}
	t.Logf("instances %v; b is %s", ids, ids[1])

	// a's overview: both instances, the attacker at the top, seen by b.
	waitText(t, ctx, "two instances on a's overview", "#fleet h2", func(s string) bool { return strings.Contains(s, "2 instances") })
	waitText(t, ctx, "the attacker at the top of a's overview", `#top-rejected tbody tr:first-child td code`, func(s string) bool { return s == attacker })
	waitText(t, ctx, "seen by b", `#top-rejected tbody tr:first-child td[data-col="instances"]`, func(s string) bool { return s == ids[1] })
	waitText(t, ctx, "b's row", chromedp.CSS(`#fleet-instances tr[data-instance="`+ids[1]+`"] td[data-col="reject_rate"]`), func(s string) bool { return !strings.HasPrefix(s, "0/s") })
	waitText(t, ctx, "the health strip's instances", `[data-health="instances"] .hv`, func(s string) bool { return s == "2" })
	// a's peer page: limited in the shared state in Redis, though only b
	// saw it (a leaky tick may just have given a token back: look again).
	within(t, 15*time.Second, "the attacker limited in the shared state on a's peer page", func() bool {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := chromedp.Do(qctx, chromedp.Navigate(a.AdminURL()+"/peer?key="+attacker), chromedp.WaitVisible(chromedp.ID("peer-fleet"))); err != nil {
			return false
		}
		st, err := chromedp.Run(qctx, chromedp.AttributeValue(chromedp.CSS(`#peer-shared-table tr[data-group="general"]`), "data-status"))
		return err == nil && st.Value == "limited"
	})
	waitText(t, ctx, "the attacker's rejections across the fleet", `#peer-fleet-table tr[data-group="general"] td[data-col="reject_rate"]`, func(s string) bool { return s != "" && s != "0/s" })
	waitText(t, ctx, "where", `#peer-fleet-table tr[data-group="general"] td[data-col="instances"]`, func(s string) bool { return s == ids[1] })
	// No notice that its state is not shown, or one naming the groups whose
	// state is not read, never "idle".
	if s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("peer-untracked") || {textContent: ""}).textContent`)); err != nil || strings.Contains(s, "idle") || s != "" && !strings.Contains(s, "cluster mode") {
		t.Errorf("the peer's notice on a: %q %v", s, err)
	}

	// a's group page: the fleet's rejections beside its own, and its chart
	// says it draws a's history only.
	if err := chromedp.Do(ctx, chromedp.Navigate(a.AdminURL()+"/groups/general"), chromedp.WaitVisible(chromedp.ID("group-now"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "the fleet's rejections on a's group page", `#group-now-table tr[data-row="fleet"] [data-col="rejected"]`, func(s string) bool { return !strings.HasPrefix(s, "0/s") })
	waitText(t, ctx, "the group chart's title", `#history-charts .u-title`, func(s string) bool { return s == "Requests of general on this instance, last hour" })

	// A hostile summary, and an instance whose clock is 30 s ahead.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	bg := context.Background()
	rdb.Set(bg, "ld:{fleet}:i:evil", `{"schema":1,"instance":"evil","groups":"every one","top":[`+strings.Repeat(`{"peer":"x"},`, 50)+`{}]}`, time.Minute)
	skewed := fleet.Summary{Schema: fleet.Schema, Instance: "skewed", Version: "v0.9.0", Config: "other", At: time.Now().Add(30 * time.Second).UnixMilli(),
		Window: 30, Groups: []fleet.Group{{Name: "general", Requests: 1}}, Node: fleet.Node{Up: true, P50: -1, P99: -1}, Daemon: fleet.Daemon{Backend: "redis", BackendUp: true}}
	sb, _ := json.Marshal(skewed)
	rdb.Set(bg, "ld:{fleet}:i:skewed", sb, time.Minute)
	rdb.SAdd(bg, "ld:{fleet}:ids", "evil", "skewed")
	within(t, 10*time.Second, "the skipped summary and the clock off among a's problems", func() bool {
		var skipped, clock, drift bool
		for _, p := range a.overview().Problems {
			skipped = skipped || p.Instance == "evil" && p.Title == "summary skipped"
			clock = clock || p.Instance == "skewed" && p.Title == "clock off"
			drift = drift || p.Instance == "skewed" && p.Title == "configuration differs"
		}
		return skipped && clock && drift
	})
	if n := a.metricInt(`limiterd_fleet_summaries_skipped_total{reason="shape"}`); n < 1 {
		t.Errorf("skipped counter %d", n)
	}
	if !strings.Contains(a.stderr.String(), "summary in Redis was skipped") || !strings.Contains(a.stderr.String(), "instance=evil") {
		t.Errorf("no log line for the skipped summary")
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(a.AdminURL()+"/"), chromedp.WaitVisible(chromedp.ID("fleet"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "the skewed instance's clock", `#fleet-instances tr[data-instance="skewed"] [data-col="clock"]`, func(s string) bool { return strings.Contains(s, "ahead") })
	waitText(t, ctx, "the problems", "#problems", func(s string) bool {
		return strings.Contains(s, "evil: summary skipped") && strings.Contains(s, "skewed: clock off")
	})
	tour(t, ctx, a.AdminURL(), "cluster", attacker)
	rdb.Del(bg, "ld:{fleet}:i:evil", "ld:{fleet}:i:skewed")

	// b stops: silent after 6 s, gone after 10 s.
	close(stop)
	wg.Wait()
	stop = make(chan struct{})
	b.stop()
	within(t, 12*time.Second, "b silent on a", func() bool {
		o := a.overview()
		return len(o.Instances) == 2 && !o.Instances[1].Up
	})
	within(t, 10*time.Second, "b gone from a", func() bool { return len(a.overview().Instances) == 1 })
}

// TestNodeDownInBrowser: the node stops; every request is 502. The
// health strip says the node is down, in red, with its 5xx rate and the
// last upstream error; the overview leads with it; /api/v1/overview says
// the same. A refused reload is red too. Every page is looked at at 1400
// and 420 px with the node down.
func TestNodeDownInBrowser(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there: the node is down
	d := startDaemon(t, "http://"+addr, "")
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	loginShot(t, ctx, d.AdminURL(), "node-down")
	login(t, ctx, d)
	var bad int
	for range 40 {
		if d.get("/info").StatusCode == 502 {
			bad++
		}
	}
	if bad == 0 {
		t.Fatal("no 502 with the node down")
	}
	// A refused reload: a config that does not parse.
	good, err := os.ReadFile(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.cfg, append(append([]byte{}, good...), []byte("\n[server\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Hangup <- os.Interrupt
	within(t, 10*time.Second, "the node down and the reload refused on the API", func() bool {
		o := d.overview()
		var down, reload bool
		for _, p := range o.Problems {
			down = down || p.Title == "node down" && p.Severity == "bad"
			reload = reload || p.Title == "reload refused" && p.Severity == "bad"
		}
		in := o.Instances[0]
		return down && reload && !in.Node.Up && in.Node.Errors5xx > 0 && in.Node.LastError != ""
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(d.AdminURL()+"/"), chromedp.WaitVisible(chromedp.ID("problems"))); err != nil {
		t.Fatal(err)
	}
	first := waitText(t, ctx, "what is wrong, first", "#problems li:first-child", func(s string) bool { return s != "" })
	if !strings.HasPrefix(first, "node down") && !strings.HasPrefix(first, "reload refused") {
		t.Errorf("the overview leads with %q", first)
	}
	waitText(t, ctx, "the node down in the strip", `[data-health="node"].bad .hv`, func(s string) bool { return s == "down" })
	waitText(t, ctx, "its 5xx", `[data-health="5xx"].bad .hv`, func(s string) bool { return s != "0/s" })
	waitText(t, ctx, "the last upstream error", `[data-health="last-error"] .hv`, func(s string) bool { return strings.HasSuffix(s, "ago") })
	waitText(t, ctx, "the reload refused", `[data-health="reload"].bad .hv`, func(s string) bool { return strings.HasPrefix(s, "refused") })
	if cls := attrOf(t, ctx, "#health", "class"); !strings.Contains(cls, "bad") {
		t.Errorf("the strip is not red: %q", cls)
	}
	// Every page shows it.
	for _, p := range []string{"/groups", "/peers", "/audit"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(d.AdminURL()+p), chromedp.WaitVisible(chromedp.ID("health"))); err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "the node down on "+p, `[data-health="node"] .hv`, func(s string) bool { return s == "down" })
	}
	tour(t, ctx, d.AdminURL(), "node-down", "127.0.0.1")
}
