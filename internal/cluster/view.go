package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/algo"
	"github.com/limiterd/limiterd/limiter/peer"
)

// ErrNotShown is the answer of SharedEntry for a (peer, group) whose shared
// state it does not read: local_first mode.
var ErrNotShown = errors.New("the shared state is not read for this view")

// SharedEntry reads peer k's state in group name (of settings s) as the
// strict mode's decision script keeps it in Redis, shared by every
// instance, without writing anything: the tokens with the leaky ticks due
// now on the group's shared schedule applied, the window's timestamps
// (held, and still in the window), and the requests in flight of every
// instance whose lease holds. ok is false when Redis holds no state of it.
// The other algorithms' state is given in their own terms (v.Algo), as a
// decision would read it: of the group's generation and algorithm, and
// rescaled to its limits when a live edit changed them. A value no
// decision can have written answers a *KeyError saying "corrupt";
// local_first mode answers ErrNotShown.
func (b *Backend) SharedEntry(ctx context.Context, k peer.Key, name string, s *limiter.GroupSettings) (v limiter.EntryView, ok bool, err error) {
	if b.opts.Mode != Strict {
		return v, false, fmt.Errorf("%w: %s mode keeps each instance's part of the tokens apart", ErrNotShown, b.opts.Mode)
	}
	b.t.roundTrips.Add(1)
	b.t.commands.Add(1)
	raw, err := b.rdb.HGet(ctx, keySchedules, name).Result()
	if errors.Is(err, redis.Nil) {
		return v, false, nil // no instance has decided in this group yet
	}
	if err != nil {
		return v, false, err
	}
	sc, err := decodeSched(raw)
	if err != nil {
		return v, false, err
	}
	if sc.algo != s.Algorithm.String() {
		return v, false, nil // the state in Redis is of another algorithm's generation
	}
	now, err := b.redisNow(ctx)
	if err != nil {
		return v, false, err
	}
	if s.Algorithm != algo.Hybrid {
		return b.sharedAlgo(ctx, k, name, s, sc, now)
	}
	lk := limiter.KeyOf(&k)
	tk := stableKey(lk, name, sufTokens)
	wk := genKey(lk, name, sc, sufHybridWin)
	st, err := b.readState(ctx, tk, sc, now)
	if err != nil {
		return v, false, err
	}
	if st.fields != nil && len(st.fields) != 2 {
		return v, false, corruptKey(tk, fmt.Errorf("tokens of %d fields", len(st.fields)))
	}
	v = limiter.EntryView{Peer: k, Group: name, Inflight: st.inflight, Algorithm: algo.Hybrid}
	if st.fields != nil {
		kn := sc.Leaky.IndexAt(now)
		if v.Tokens, err = agedTokens(st.fields, kn, s.LeakyTickReduction); err != nil {
			return v, false, corruptKey(tk, err)
		}
	}
	if s.SlidingWindowLimit > 0 {
		// What the cleanup tick in force has not dropped is held; what is
		// newer than now - duration counts (lua/decide.lua's hybrid).
		cut := sc.Cleanup.TimeOf(sc.Cleanup.IndexAt(now)) - (&limiter.Group{GroupSettings: *s}).CleanupAge()
		lo := max(cut, now-s.SlidingWindowDuration+1)
		ts, err := b.readStamps(ctx, wk, cut, "window timestamp", false)
		if err != nil {
			return v, false, err
		}
		for _, t := range ts {
			v.Window++
			if t >= lo {
				v.WindowActive++
			}
		}
	}
	return v, st.fields != nil || st.inflight > 0 || v.Window > 0, nil
}

// sharedAlgo reads peer k's state in group name of an algorithm other
// than the hybrid for SharedEntry, as of Redis's now.
func (b *Backend) sharedAlgo(ctx context.Context, k peer.Key, name string, s *limiter.GroupSettings, sc *sharedSched, now int64) (v limiter.EntryView, ok bool, err error) {
	lk := limiter.KeyOf(&k)
	keys := algoKeys(lk, &limiter.Group{Name: name, GroupSettings: *s}, sc)
	ck := countsKey(keys)
	st, err := b.readState(ctx, ck, sc, now)
	if err != nil {
		return v, false, err
	}
	v = limiter.EntryView{Peer: k, Group: name, Inflight: st.inflight, Algorithm: s.Algorithm}
	p := s.Params()
	if s.Algorithm == algo.SlidingLog {
		// The log's timestamps that count now (t + period > now); the
		// gate is the limit-th newest of them (slog's entry).
		ts, err := b.readStamps(ctx, keys[0], now-p.Period+1, "log timestamp", true)
		if err != nil {
			return v, false, err
		}
		h := algo.Held{Count: int64(len(ts))}
		if h.Count >= p.Limit {
			h.Mark = ts[h.Count-p.Limit]
		}
		l := s.Limits()
		v.Algo = algo.View{Quota: algo.QuotaOf(s.Algorithm, algo.State{}, h, &l, now, 0), Count: h.Count}
		return v, h.Count > 0 || st.inflight > 0, nil
	}
	if st.fields == nil {
		// No state of this generation: a fresh one, as a decision reads it.
		v.Algo = algo.ViewOf(s.Algorithm, algo.Fresh(s.Algorithm, p, now), p, now)
		return v, st.inflight > 0, nil
	}
	if len(st.fields) != 7 {
		return v, false, corruptKey(ck, fmt.Errorf("state of %d fields", len(st.fields)+1))
	}
	// The fields after the generation: the kind, A, B, C and the limits
	// (limit, period, burst) they are measured in.
	var f [7]int64
	for i, what := range []string{"k", "A", "B", "C", "l", "p", "u"} {
		if f[i], err = wholeMS(st.fields[i], what, i > 0); err != nil {
			return v, false, corruptKey(ck, err)
		}
	}
	if f[4] < 1 || f[5] < 1 {
		return v, false, corruptKey(ck, fmt.Errorf("limits %d/%d", f[4], f[5]))
	}
	state := algo.Fresh(s.Algorithm, p, now)
	if f[0] == int64(s.Algorithm) {
		state = stateOf(s.Algorithm, f[1], f[2], f[3])
		if from := (algo.Params{Limit: f[4], Period: f[5], Burst: f[6]}); from != p {
			state = algo.Rescale(s.Algorithm, state, from, p)
		}
	}
	v.Algo = algo.ViewOf(s.Algorithm, state, p, now)
	return v, true, nil
}

// readState reads the packed state string at key as of now, for the
// generation of sc: a value no decision can have written, or a key of
// another type, is that key's *KeyError.
func (b *Backend) readState(ctx context.Context, key string, sc *sharedSched, now int64) (packed, error) {
	b.t.roundTrips.Add(1)
	b.t.commands.Add(1)
	str, err := b.rdb.Get(ctx, key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return packed{}, keyTypeErr(err, key)
	}
	gen, _ := strconv.ParseInt(sc.gen, 10, 64)
	st, err := readPacked(str, gen, now)
	if err != nil {
		return packed{}, corruptKey(key, err)
	}
	return st, nil
}

// readStamps returns the timestamps (ms, oldest first) of the ZSET at key
// from min on, each checked as the scripts check what (not negative when
// nonNeg).
func (b *Backend) readStamps(ctx context.Context, key string, min int64, what string, nonNeg bool) ([]int64, error) {
	b.t.roundTrips.Add(1)
	b.t.commands.Add(1)
	zs, err := b.rdb.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: strconv.FormatInt(min, 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, keyTypeErr(err, key)
	}
	ts := make([]int64, len(zs))
	for i, z := range zs {
		if ts[i], err = wholeMS(z.Score, what, nonNeg); err != nil {
			return nil, corruptKey(key, err)
		}
	}
	return ts, nil
}

// corruptKey is the failure of key, which holds a value no decision can
// have written.
func corruptKey(key string, err error) error {
	return &KeyError{Keys: []string{key}, Msg: corruptPrefix + err.Error()}
}

// keyTypeErr is err of a command on key: a WRONGTYPE answer is that key's
// failure.
func keyTypeErr(err error, key string) error {
	if strings.Contains(err.Error(), "WRONGTYPE") {
		return &KeyError{Keys: []string{key}, Msg: err.Error()}
	}
	return err
}

// packed is a strict state string as lua/decide.lua's load reads it: the
// fields after the generation (nil when none, or of another generation)
// and the requests in flight of the instances whose lease holds.
type packed struct {
	fields   []float64
	inflight int64
}

// readPacked reads a packed state string (a byte nf, the key's expiry and
// nf fields — the generation first — as little-endian doubles, then per
// instance a byte len, its id, its count and its lease, two doubles;
// decision 220) as of now, for generation gen, checking every value as the
// script does.
func readPacked(raw string, gen, now int64) (packed, error) {
	var st packed
	if raw == "" {
		return st, nil
	}
	b := []byte(raw)
	nf := int(b[0])
	if nf > 8 || 9+8*nf > len(b) {
		return st, fmt.Errorf("state of %d bytes", len(b))
	}
	dbl := func(p int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[p:])) }
	if _, err := wholeMS(dbl(1), "expiry", true); err != nil {
		return st, err
	}
	if nf > 0 {
		g := dbl(9)
		if _, err := wholeMS(g, "generation", true); err != nil {
			return st, err
		}
		if int64(g) == gen {
			st.fields = make([]float64, nf-1)
			for i := range st.fields {
				st.fields[i] = dbl(17 + 8*i)
			}
		}
	}
	for p := 9 + 8*nf; p < len(b); {
		q := p + int(b[p]) + 17
		if q > len(b) {
			return packed{}, fmt.Errorf("in-flight part of %d bytes", len(b)-p)
		}
		n, err := wholeMS(dbl(q-16), "in-flight count", true)
		if err != nil {
			return packed{}, err
		}
		e, err := wholeMS(dbl(q-8), "lease", true)
		if err != nil {
			return packed{}, err
		}
		if e > now {
			st.inflight += n
		}
		p = q
	}
	return st, nil
}

// agedTokens returns the tokens of a hybrid state's fields (tok, tk) aged
// to leaky tick kn, tr a tick.
func agedTokens(f []float64, kn, tr int64) (int64, error) {
	tok, err := wholeMS(f[0], "tok", true)
	if err != nil {
		return 0, err
	}
	tk, err := wholeMS(f[1], "tk", false)
	if err != nil {
		return 0, err
	}
	if kn > tk {
		tok = max(0, tok-(kn-tk)*tr)
	}
	return tok, nil
}

// wholeMS reads v as the scripts' int does: an integer within ±2⁵³, not
// negative when nonNeg.
func wholeMS(v float64, what string, nonNeg bool) (int64, error) {
	if v != math.Trunc(v) || math.Abs(v) > 1<<53 || (nonNeg && v < 0) {
		return 0, fmt.Errorf("%s holds %v", what, v)
	}
	return int64(v), nil
}
