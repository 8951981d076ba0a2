// Package livereplica connects cluster mode's Replicator to the live state
// and its database: the operators' live edits carried between instances
// through Redis, their stamped records kept with each edit (decision 221).
// It is the one wiring of the three, for the daemon and for the tests that
// play it.
package livereplica

import (
	"context"
	"time"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/store"
)

// New returns the Replicator that carries lv's edits to the other
// instances through b's Redis and theirs to lv, with its records kept in
// db: loaded now, before the first edit is stamped, and kept with each
// edit from now on. now stamps the edits (nil: time.Now). Run it until
// the daemon stops. An error says the records could not be read; the
// Replicator is returned all the same, the fields of the live state then
// of unknown age (the lowest stamp), as without records.
func New(ctx context.Context, b *cluster.Backend, lv *live.Live, db *store.DB, now func() time.Time) (*cluster.Replicator, error) {
	r := b.NewReplicator(cluster.ReplicatorOptions{
		Local: func() map[string]string { return live.EncodeFields(lv.State()) },
		Apply: func(ctx context.Context, merge func(map[string]string) map[string]string) error {
			return lv.ApplyRemote(ctx, "redis", func(cur live.LiveState) (live.LiveState, error) {
				return live.DecodeFields(merge(live.EncodeFields(cur)))
			})
		},
		Now:     now,
		Records: recordStore{db},
		Check:   live.CheckField,
	})
	err := r.Load(ctx)
	db.SetRecorder(recorder{r})
	lv.SetPublisher(publisher{r})
	return r, err
}

// recordStore is the database as a Replicator's cluster.RecordStore.
type recordStore struct{ db *store.DB }

func (s recordStore) LoadRecords(ctx context.Context) (map[string]cluster.Record, string, error) {
	recs, clock, err := s.db.LoadRecords(ctx)
	out := make(map[string]cluster.Record, len(recs))
	for f, rec := range recs {
		out[f] = cluster.Record(rec)
	}
	return out, clock, err
}

func (s recordStore) SaveRecords(ctx context.Context, recs map[string]cluster.Record, clock string) error {
	in := make(map[string]live.Record, len(recs))
	for f, rec := range recs {
		in[f] = live.Record(rec)
	}
	return s.db.SaveRecords(ctx, in, clock)
}

// recorder is a Replicator as the store's live.Recorder: it stamps each
// live edit, which the store keeps in the edit's transaction.
type recorder struct{ r *cluster.Replicator }

func (c recorder) Stamp(field, value string, removed bool) (live.Record, string) {
	rec, clock := c.r.Stamp(field, value, removed)
	return live.Record(rec), clock
}

func (c recorder) Stamped(field string, rec live.Record) { c.r.Stamped(field, cluster.Record(rec)) }

// publisher tells a Replicator of live's edits.
type publisher struct{ r *cluster.Replicator }

func (p publisher) Publish(old, new live.LiveState) {
	p.r.Publish(live.EncodeFields(old), live.EncodeFields(new))
}
