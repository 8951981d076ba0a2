package chaos

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestAbortsShort: four seconds of waves of aborting clients (four peers,
// concurrency_limit 3, six requests a wave each, hung up on after 200 ms)
// against a node that works 1.5 s on each and does not notice: the node
// never works on more than 3 of one peer's requests.
func TestAbortsShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Aborts(ctx, AbortOptions{Bin: limiterd(t), Dir: t.TempDir(), Duration: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	if !r.OK() {
		t.Errorf("failures: %v", r.Failures)
	}
	if r.NodeMost < r.Limit {
		t.Errorf("the node never worked on %d of one peer's requests: the waves did not fill the limit", r.Limit)
	}
}

// TestCheckFloodShort: four seconds of distinct peers through POST
// /api/v1/check, none releasing, against max_tracked = 1000 and leases
// of 3 s: the table and the slots held stay within max_tracked, the
// oldest leases are cut, and none is held once they end.
func TestCheckFloodShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := CheckFlood(ctx, CheckFloodOptions{Bin: limiterd(t), Dir: t.TempDir(), Duration: 4 * time.Second,
		Conns: 4, Rate: 1500, MaxTracked: 1000, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	if !r.OK() {
		t.Errorf("failures: %v", r.Failures)
	}
	if r.LeasesCut == 0 {
		t.Errorf("no lease cut by %d checks in %v against max_tracked 1000 and leases of 3 s", r.Checks, r.Duration)
	}
	// Not a benchmark: a bound far above a table of 1000, that a table
	// growing with the flood would break.
	if r.HWM > 256<<20 {
		t.Errorf("VmHWM %s for a table of 1000", MiB(r.HWM))
	}
}

// TestSlowReadersShort: a round or two of 1 s, the victim alone then while
// eight slow readers hold 8 MiB answers against upstream_max_conns = 4:
// the victim is always answered 200 (never 504) and the answers held go
// to limiterd's buffers and temporary files. The latency ratio is
// printed, judged by the long variant only: medians of a few hundred
// requests on a machine other tests share are not a test.
func TestSlowReadersShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := SlowReaders(ctx, SlowReadersOptions{Bin: limiterd(t), Dir: t.TempDir(), Duration: 2 * time.Second, Phase: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	for _, f := range r.Failures {
		if !strings.Contains(f, "median") {
			t.Error(f)
		}
	}
	if r.Rounds < 1 || r.Held != int64(2*r.Rounds*r.Pool) {
		t.Errorf("%d rounds, %d answers held: the readers did not hold twice the pool each round", r.Rounds, r.Held)
	}
}

// TestCrowdShort: twelve seconds (five of warm-up) of a crowd of 16 peers, each inside its
// per-peer limits, offering about 3× what a node of 200 answers a second
// serves, and a polite peer: with adaptive concurrency on, the node never
// holds more than the adaptive maximum, the crowd's shed requests are 503s
// the metric counts, every crowd peer gets a fair share, the polite peer
// gets through, and nothing is left in flight.
func TestCrowdShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts limiterd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Crowd(ctx, CrowdOptions{Bin: limiterd(t), Dir: t.TempDir(), Duration: 12 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	if !r.OK() {
		t.Errorf("failures: %v", r.Failures)
	}
}
