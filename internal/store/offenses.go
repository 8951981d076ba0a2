package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter/peer"
)

// MaxOffenders bounds the record of offenders: beyond it, the (peer,
// group)s rejected longest ago are dropped.
const MaxOffenders = 10000

// offenseHours is how many hourly counts a record keeps (live.OffenseSpan).
const offenseHours = int(live.OffenseSpan / time.Hour)

// offenseRec is one (peer, group) of the record: its first and last
// rejection (Unix ms), and its rejections per hour, counts[0] those of
// hour (Unix hours), counts[i] those of hour − i.
type offenseRec struct {
	first, last int64
	hour        int64
	counts      [offenseHours]uint64
}

// shiftTo moves the counts so that counts[0] is hour's, dropping those
// older than offenseHours.
func (r *offenseRec) shiftTo(hour int64) {
	d := hour - r.hour
	if d <= 0 {
		return
	}
	if d >= int64(offenseHours) {
		r.counts = [offenseHours]uint64{}
	} else {
		copy(r.counts[d:], r.counts[:int64(offenseHours)-d])
		clear(r.counts[:d])
	}
	r.hour = hour
}

func (r *offenseRec) total() uint64 {
	var n uint64
	for _, c := range r.counts {
		n += c
	}
	return n
}

// offenseV1 is the encoding of an offenseRec:
//
//	byte     1
//	varint   first, last (Unix ms)
//	varint   hour (Unix hours)
//	uvarint  n ≤ 24, then n counts, counts[0] first (trailing zeros cut)
const offenseV1 = 1

var errBadOffense = errors.New("undecodable offense record")

func appendOffense(b []byte, r *offenseRec) []byte {
	b = append(b, offenseV1)
	b = binary.AppendVarint(b, r.first)
	b = binary.AppendVarint(b, r.last)
	b = binary.AppendVarint(b, r.hour)
	n := offenseHours
	for n > 0 && r.counts[n-1] == 0 {
		n--
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, c := range r.counts[:n] {
		b = binary.AppendUvarint(b, c)
	}
	return b
}

func decodeOffense(b []byte) (offenseRec, error) {
	var r offenseRec
	if len(b) == 0 || b[0] != offenseV1 {
		return r, errBadOffense
	}
	b = b[1:]
	var vals [3]int64
	for i := range vals {
		v, k := binary.Varint(b)
		if k <= 0 {
			return r, errBadOffense
		}
		vals[i], b = v, b[k:]
	}
	r.first, r.last, r.hour = vals[0], vals[1], vals[2]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(offenseHours) {
		return r, errBadOffense
	}
	b = b[k:]
	for i := range n {
		c, k := binary.Uvarint(b)
		if k <= 0 {
			return r, errBadOffense
		}
		r.counts[i], b = c, b[k:]
	}
	if len(b) != 0 {
		return r, errBadOffense
	}
	return r, nil
}

func offenseKey(peer peer.Key, group string) []byte {
	return append(peer[:len(peer):len(peer)], group...)
}

func unixHour(t time.Time) int64 { return t.Unix() / 3600 }

// offense returns the record under k as of hour, ok false when it has no
// rejection left in the span (or does not decode).
func offense(k, v []byte, hour int64) (live.Offense, bool) {
	var peer peer.Key
	if len(k) <= len(peer) {
		return live.Offense{}, false
	}
	r, err := decodeOffense(v)
	if err != nil {
		return live.Offense{}, false
	}
	r.shiftTo(hour)
	n := r.total()
	copy(peer[:], k)
	return live.Offense{Peer: peer, Group: string(k[len(peer):]), Rejections: n, First: time.UnixMilli(r.first), Last: time.UnixMilli(r.last)}, n > 0
}

// AddOffenses adds batch to the record of offenders as of now, durably:
// each offense's rejections count in the hour of its Last. Then it drops
// the (peer, group)s with no rejection in the last live.OffenseSpan and,
// beyond MaxOffenders, those rejected longest ago. A record that does not
// decode is replaced.
func (db *DB) AddOffenses(ctx context.Context, now time.Time, batch []live.Offense) error {
	hour := unixHour(now)
	return db.update(ctx, "add offenses", func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketOffenders)
		if err != nil {
			return err
		}
		for _, o := range batch {
			if o.Rejections == 0 || checkGroupName(o.Group) != nil {
				continue
			}
			k := offenseKey(o.Peer, o.Group)
			r, err := decodeOffense(b.Get(k))
			if err != nil {
				r = offenseRec{hour: hour}
			}
			r.shiftTo(hour)
			first, last := o.First.UnixMilli(), o.Last.UnixMilli()
			if r.total() == 0 || first < r.first {
				r.first = first
			}
			r.last = max(r.last, last)
			ago := min(max(hour-unixHour(o.Last), 0), int64(offenseHours-1))
			r.counts[ago] += o.Rejections
			// A new slice each: bbolt keeps the value until the commit.
			if err := b.Put(k, appendOffense(nil, &r)); err != nil {
				return err
			}
		}
		return pruneOffenses(b, hour)
	})
}

// pruneOffenses deletes the records with no rejection left as of hour and,
// beyond MaxOffenders, those whose last rejection is the oldest.
func pruneOffenses(b *bbolt.Bucket, hour int64) error {
	type kept struct {
		k    []byte
		last int64
	}
	var drop [][]byte
	var all []kept
	err := b.ForEach(func(k, v []byte) error {
		o, ok := offense(k, v, hour)
		if !ok {
			drop = append(drop, bytes.Clone(k))
			return nil
		}
		all = append(all, kept{bytes.Clone(k), o.Last.UnixMilli()})
		return nil
	})
	if err != nil {
		return err
	}
	if len(all) > MaxOffenders {
		slices.SortFunc(all, func(a, b kept) int { return cmp.Compare(a.last, b.last) })
		for _, x := range all[:len(all)-MaxOffenders] {
			drop = append(drop, x.k)
		}
	}
	for _, k := range drop {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Offenses returns the record of peer, one Offense per group it was
// rejected in over the last live.OffenseSpan as of now, by group name.
func (db *DB) Offenses(ctx context.Context, now time.Time, peer peer.Key) ([]live.Offense, error) {
	var out []live.Offense
	hour := unixHour(now)
	err := db.view(ctx, "offenses", func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketOffenders)
		if err != nil {
			return err
		}
		c := b.Cursor()
		for k, v := c.Seek(peer[:]); k != nil && bytes.HasPrefix(k, peer[:]); k, v = c.Next() {
			if o, ok := offense(k, v, hour); ok {
				out = append(out, o)
			}
		}
		return nil
	})
	return out, err
}

// RecentOffenses returns the n (peer, group)s of the record rejected most
// recently as of now, the latest first, and how many the record holds.
func (db *DB) RecentOffenses(ctx context.Context, now time.Time, n int) ([]live.Offense, int, error) {
	var all []live.Offense
	hour := unixHour(now)
	err := db.view(ctx, "recent offenses", func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketOffenders)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			if o, ok := offense(k, v, hour); ok {
				all = append(all, o)
			}
			return nil
		})
	})
	slices.SortFunc(all, func(a, b live.Offense) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return cmp.Compare(b.Rejections, a.Rejections)
	})
	return all[:min(n, len(all))], len(all), err
}
