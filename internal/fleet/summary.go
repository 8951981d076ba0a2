// Package fleet is what the instances of limiterd sharing one Redis
// (cluster mode, docs/cluster.md) tell each other for people
// (docs/dashboard.md, "The fleet"): each publishes a bounded Summary of
// itself — its groups' rates, its top offenders, its node's and its own
// health, its version, its configuration's fingerprint — every Every to a
// Board, with a time to live; any instance reads them all back as a View:
// the fleet's totals, who is hammering across it, one row per instance.
// A summary that is not of this Schema, or not within its bounds, is
// skipped and counted, never shown. Outside cluster mode the View is the
// instance's own summary alone.
package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Schema is the version of the summary's JSON this build writes and reads;
// a summary of another is skipped (SkipSchema).
const Schema = 1

// The bounds of the fleet.
const (
	// MaxBytes bounds a summary's JSON: Encode drops offenders until it
	// fits, Decode skips a larger one.
	MaxBytes = 16 << 10
	// MaxGroups and MaxTop bound a summary's lists.
	MaxGroups = 64
	MaxTop    = 20
	// MaxText bounds a summary's strings (names, versions, messages), in
	// bytes.
	MaxText = 300
	// MaxInstances bounds the summaries a View reads.
	MaxInstances = 64
	// Every is how often an instance publishes: at most one write to the
	// Board per Every.
	Every = 2 * time.Second
	// TTL is how long a summary lives on the Board: an instance that
	// stopped publishing drops out of the fleet after it.
	TTL = 10 * time.Second
	// Stale is how old a summary may be for its instance to count as up:
	// two missed publications.
	Stale = 3 * Every
	// MaxClockOffset is the difference from Redis's clock beyond which an
	// instance's clock is shown as off.
	MaxClockOffset = time.Second
	// MaxFuture is how far ahead of Redis's clock a summary may be dated
	// and still be shown (with its clock off); beyond, it is skipped.
	MaxFuture = time.Hour
)

// Summary is what one instance publishes of itself. Rates are per second
// over Window seconds; times are Unix milliseconds by the instance's
// clock (0: never).
type Summary struct {
	Schema int `json:"schema"`
	// Instance names the instance (cluster mode's instance name).
	Instance string `json:"instance"`
	// Version is limiterd's version, Config the fingerprint of the
	// limiter's configuration in force (groups, routes, peers): two
	// instances with different ones decide differently.
	Version string `json:"version"`
	Config  string `json:"config"`
	// At is when the summary was made; ClockOffset the instance's clock
	// minus Redis's, in ms, as the instance measured it at its last write.
	At          int64 `json:"at"`
	ClockOffset int64 `json:"clock_offset_ms"`
	// Started is when the instance started serving.
	Started int64 `json:"started"`
	// Window is the seconds the rates cover (admin.now_window, or less
	// since the start).
	Window float64 `json:"window_s"`
	// Groups are the instance's groups, by name.
	Groups []Group `json:"groups"`
	// Top are its (peer, group)s with the most rejections over the window,
	// most first, at most MaxTop.
	Top []Offender `json:"top"`
	// Node is the health of the node it proxies to; Daemon its own.
	Node   Node   `json:"node"`
	Daemon Daemon `json:"daemon"`
}

// Group is one group's rates on one instance.
type Group struct {
	Name string `json:"name"`
	// Requests, Rejected (429: concurrency, rate limit, and dry run's
	// would-be) and Denied (403) per second.
	Requests float64 `json:"requests"`
	Rejected float64 `json:"rejected"`
	Denied   float64 `json:"denied"`
	// Inflight is the requests in flight as the summary was made.
	Inflight int64 `json:"inflight"`
}

// Offender is one (peer, group)'s rates on one instance.
type Offender struct {
	Peer     string  `json:"peer"`
	Group    string  `json:"group"`
	Requests float64 `json:"requests"`
	Rejected float64 `json:"rejected"`
}

// Node is the health of the node an instance proxies to, over the last
// minute (docs/dashboard.md, "Health").
type Node struct {
	// Up is false while the node does not accept connections; Error is
	// then why.
	Up    bool   `json:"up"`
	Error string `json:"error,omitempty"`
	// Requests are the exchanges per second the node answered (or failed:
	// 5xx), limiterd's own 429s, 403s and 503s aside; Errors5xx those of status
	// 5xx.
	Requests  float64 `json:"requests"`
	Errors5xx float64 `json:"errors_5xx"`
	// P50 and P99 are the exchanges' latency quantiles in milliseconds;
	// -1 without an exchange.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	// LastError is the last upstream error (502, 504) and LastErrorAt
	// when it happened.
	LastError   string `json:"last_error,omitempty"`
	LastErrorAt int64  `json:"last_error_at,omitempty"`
}

// Daemon is an instance's own health.
type Daemon struct {
	// ReloadAt is the last reload tried (SIGHUP), ReloadError why it was
	// refused ("" when it was not).
	ReloadAt    int64  `json:"reload_at,omitempty"`
	ReloadError string `json:"reload_error,omitempty"`
	// SnapshotAt is the last snapshot written, SnapshotFailedAt the last
	// that failed and SnapshotError why; SnapshotEvery is snapshot.interval
	// in ms (0: no snapshots).
	SnapshotAt       int64  `json:"snapshot_at,omitempty"`
	SnapshotFailedAt int64  `json:"snapshot_failed_at,omitempty"`
	SnapshotError    string `json:"snapshot_error,omitempty"`
	SnapshotEvery    int64  `json:"snapshot_every_ms,omitempty"`
	// DBBytes is the database file's size.
	DBBytes int64 `json:"db_bytes"`
	// Backend is "local" or "redis"; BackendUp is false while Redis is
	// not used, since BackendSince, for BackendReason.
	Backend       string `json:"backend"`
	BackendUp     bool   `json:"backend_up"`
	BackendSince  int64  `json:"backend_since,omitempty"`
	BackendReason string `json:"backend_reason,omitempty"`
	// BackendSlotsDown is how many hash slots of a Redis Cluster are
	// decided as on_failure says while BackendUp (their master does not
	// answer), since BackendSlotsSince, for BackendSlotsReason.
	BackendSlotsDown   int    `json:"backend_slots_down,omitempty"`
	BackendSlotsSince  int64  `json:"backend_slots_since,omitempty"`
	BackendSlotsReason string `json:"backend_slots_reason,omitempty"`
}

// Encode returns s as JSON of at most MaxBytes, dropping its least
// offenders until it fits; an error when it cannot fit (too many groups or
// too long a text, which Decode would skip).
func Encode(s Summary) ([]byte, error) {
	s.Schema = Schema
	s.Top = s.Top[:min(len(s.Top), MaxTop)]
	for {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		if len(b) <= MaxBytes {
			return b, nil
		}
		if len(s.Top) == 0 {
			return nil, fmt.Errorf("fleet: a summary of %d bytes without offenders, over %d", len(b), MaxBytes)
		}
		s.Top = s.Top[:len(s.Top)-1]
	}
}

// The reasons a summary is skipped: the values of the reason label of
// limiterd_fleet_summaries_skipped_total.
const (
	SkipSize   = "size"   // over MaxBytes
	SkipSchema = "schema" // another version's, or not a summary
	SkipShape  = "shape"  // a value of the wrong type, a list or a text beyond its bound, a negative rate
	SkipTime   = "time"   // dated more than MaxFuture ahead, or not dated
	SkipName   = "name"   // the instance it names is not the one its key names
)

// SkipReasons lists every reason, for metrics.
var SkipReasons = [...]string{SkipSize, SkipSchema, SkipShape, SkipTime, SkipName}

// Skipped is why a summary was not shown: a reason of SkipReasons and the
// detail in words.
type Skipped struct {
	Reason, Detail string
}

func (e *Skipped) Error() string { return e.Reason + ": " + e.Detail }

func skip(reason, format string, args ...any) error {
	return &Skipped{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Decode reads the summary the Board holds for instance id, checking it
// is of this Schema and within its bounds, and dated at most MaxFuture
// after now (Redis's clock). The error is a *Skipped.
func Decode(id string, b []byte, now time.Time) (Summary, error) {
	var s Summary
	if len(b) > MaxBytes {
		return s, skip(SkipSize, "%d bytes, over %d", len(b), MaxBytes)
	}
	var head struct {
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return s, skip(SkipSchema, "not JSON of an object: %v", err)
	}
	if !bytes.Equal(head.Schema, []byte("1")) {
		return s, skip(SkipSchema, "schema %s, this build reads %d", clip(string(head.Schema), 20), Schema)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return s, skip(SkipShape, "%s: a JSON %s where this version writes another type", clip(te.Field, 60), te.Value)
		}
		return s, skip(SkipShape, "%v", err)
	}
	if err := s.check(); err != nil {
		return s, err
	}
	if s.Instance != id {
		return s, skip(SkipName, "names instance %q", clip(s.Instance, 40))
	}
	if s.At <= 0 {
		return s, skip(SkipTime, "no time")
	}
	if ahead := time.Duration(s.At-now.UnixMilli()) * time.Millisecond; ahead > MaxFuture {
		return s, skip(SkipTime, "dated %s ahead of Redis's clock", ahead.Round(time.Second))
	}
	return s, nil
}

// check reports the first bound s breaks, as a *Skipped.
func (s *Summary) check() error {
	if len(s.Groups) > MaxGroups || len(s.Top) > MaxTop {
		return skip(SkipShape, "%d groups and %d offenders, at most %d and %d", len(s.Groups), len(s.Top), MaxGroups, MaxTop)
	}
	texts := []string{s.Instance, s.Version, s.Config, s.Node.Error, s.Node.LastError, s.Daemon.ReloadError,
		s.Daemon.SnapshotError, s.Daemon.Backend, s.Daemon.BackendReason}
	nums := []float64{s.Window, s.Node.Requests, s.Node.Errors5xx}
	for _, g := range s.Groups {
		texts = append(texts, g.Name)
		nums = append(nums, g.Requests, g.Rejected, g.Denied, float64(g.Inflight))
	}
	for _, o := range s.Top {
		texts = append(texts, o.Peer, o.Group)
		nums = append(nums, o.Requests, o.Rejected)
	}
	for _, t := range texts {
		if len(t) > MaxText || !utf8.ValidString(t) {
			return skip(SkipShape, "a text of %d bytes (at most %d, UTF-8)", len(t), MaxText)
		}
	}
	if s.Instance == "" {
		return skip(SkipShape, "no instance name")
	}
	for _, n := range nums {
		if n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return skip(SkipShape, "a negative number (%v)", n)
		}
	}
	for _, n := range []float64{s.Node.P50, s.Node.P99} {
		if n < -1 {
			return skip(SkipShape, "a latency of %v ms", n)
		}
	}
	return nil
}

// clip returns s cut to n bytes at most, for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
