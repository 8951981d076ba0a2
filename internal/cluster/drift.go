package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// keyFingerprints is the hash where each instance publishes the
// fingerprints of its groups' file-level settings (docs/cluster.md,
// "Drift"): field = the instance, value = JSON {"at": Redis ms,
// "groups": {group: fingerprint}}. Other programs (a fleet page) may read
// it; an entry older than driftStale is an instance gone.
const keyFingerprints = keyPrefix + "{fleet}:fingerprints"

const (
	driftEvery = 5 * time.Second
	driftStale = 30 * time.Second
)

// Fingerprint returns the fingerprint of a group's settings: the first 16
// hex digits of the SHA-256 of their JSON.
func Fingerprint(s limiter.GroupSettings) string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Drift is one group whose file-level settings differ between this
// instance and others.
type Drift struct {
	Group string
	// Mine is this instance's fingerprint; Others the other instances'
	// that differ, by instance.
	Mine   string
	Others map[string]string
}

type fingerprints struct {
	At     int64             `json:"at"`
	Groups map[string]string `json:"groups"`
}

// RunDrift publishes the fingerprints of the groups' file-level settings
// (groups returns them) every few seconds, compares them with the other
// instances', and keeps the groups that differ (Drifts), logging each
// change, until ctx ends.
func (b *Backend) RunDrift(ctx context.Context, groups func() map[string]limiter.GroupSettings) {
	t := time.NewTicker(driftEvery)
	defer t.Stop()
	for {
		b.checkDrift(ctx, groups())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Drifts returns the groups whose file-level settings differ from another
// living instance's, as last compared.
func (b *Backend) Drifts() []Drift {
	if d := b.drift.Load(); d != nil {
		return *d
	}
	return nil
}

func (b *Backend) checkDrift(ctx context.Context, groups map[string]limiter.GroupSettings) {
	if !b.h.up.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, max(b.opts.Timeout, time.Second))
	defer cancel()
	now, err := b.redisNow(ctx)
	if err != nil {
		return
	}
	mine := fingerprints{At: now, Groups: map[string]string{}}
	for name, s := range groups {
		mine.Groups[name] = Fingerprint(s)
	}
	raw, _ := json.Marshal(mine)
	b.t.roundTrips.Add(1)
	b.t.commands.Add(2)
	pipe := b.rdb.Pipeline()
	pipe.HSet(ctx, keyFingerprints, b.inst, raw)
	all := pipe.HGetAll(ctx, keyFingerprints)
	if _, err := pipe.Exec(ctx); err != nil {
		return
	}
	var drifts []Drift
	var stale []string
	for inst, v := range all.Val() {
		if inst == b.inst {
			continue
		}
		var fp fingerprints
		if json.Unmarshal([]byte(v), &fp) != nil || now-fp.At > driftStale.Milliseconds() {
			stale = append(stale, inst)
			continue
		}
		for g, f := range fp.Groups {
			m, ok := mine.Groups[g]
			if !ok || m == f {
				continue
			}
			i := slices.IndexFunc(drifts, func(d Drift) bool { return d.Group == g })
			if i < 0 {
				drifts = append(drifts, Drift{Group: g, Mine: m, Others: map[string]string{}})
				i = len(drifts) - 1
			}
			drifts[i].Others[inst] = f
		}
	}
	if len(stale) > 0 {
		b.rdb.HDel(ctx, keyFingerprints, stale...)
	}
	slices.SortFunc(drifts, func(a, c Drift) int { return strings.Compare(a.Group, c.Group) })
	prev := b.Drifts()
	b.drift.Store(&drifts)
	if !sameDrifts(prev, drifts) {
		for _, d := range drifts {
			b.log.Warn("cluster: this instance's file settings for a shared group differ from other instances' (each applies its own limits)",
				"group", d.Group, "mine", d.Mine, "instances", strings.Join(slices.Sorted(maps.Keys(d.Others)), ","))
		}
		if len(drifts) == 0 && len(prev) > 0 {
			b.log.Info("cluster: the instances' file settings agree again")
		}
	}
}

func sameDrifts(a, b []Drift) bool {
	return slices.EqualFunc(a, b, func(x, y Drift) bool { return x.Group == y.Group && x.Mine == y.Mine && maps.Equal(x.Others, y.Others) })
}

// String says d for people: "general (instances a1b2, c3d4)".
func (d Drift) String() string {
	return fmt.Sprintf("%s (instances %s)", d.Group, strings.Join(slices.Sorted(maps.Keys(d.Others)), ", "))
}
