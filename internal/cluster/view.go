package cluster

import (
	"context"
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
// state it does not read: local_first mode, or an algorithm other than the
// hybrid.
var ErrNotShown = errors.New("the shared state is not read for this view")

// SharedEntry reads peer k's state in group name (of settings s) as the
// strict mode's decision script keeps it in Redis, shared by every
// instance, without writing anything: the tokens with the leaky ticks due
// now on the group's shared schedule applied, the window's timestamps
// (held, and still in the window), and the requests in flight of every
// instance whose lease holds. ok is false when Redis holds no state of it.
// A value no decision can have written answers a *KeyError saying
// "corrupt"; local_first mode and the other algorithms answer ErrNotShown.
func (b *Backend) SharedEntry(ctx context.Context, k peer.Key, name string, s *limiter.GroupSettings) (v limiter.EntryView, ok bool, err error) {
	if b.opts.Mode != Strict {
		return v, false, fmt.Errorf("%w: %s mode keeps each instance's part of the tokens apart", ErrNotShown, b.opts.Mode)
	}
	if s.Algorithm != algo.Hybrid {
		return v, false, fmt.Errorf("%w: the %s algorithm's shared state is not read here", ErrNotShown, s.Algorithm)
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
	if sc.algo != algo.Hybrid.String() {
		return v, false, nil // the state in Redis is of another algorithm's generation
	}
	now, err := b.redisNow(ctx)
	if err != nil {
		return v, false, err
	}
	lk := limiter.KeyOf(&k)
	tk := stableKey(lk, name, sufTokens)
	wk := baseKey(lk, name, sc) + sufHybridWin
	b.t.roundTrips.Add(1)
	b.t.commands.Add(1)
	str, err := b.rdb.Get(ctx, tk).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return v, false, keyTypeErr(err, tk)
	}
	head, inflight, err := readTokens(str, sc.gen, now)
	if err != nil {
		return v, false, &KeyError{Keys: []string{tk}, Msg: "corrupt: " + err.Error()}
	}
	v = limiter.EntryView{Peer: k, Group: name, Inflight: inflight, Algorithm: algo.Hybrid}
	if head != "" {
		kn := sc.Leaky.IndexAt(now)
		if v.Tokens, err = agedTokens(head, kn, s.LeakyTickReduction); err != nil {
			return v, false, &KeyError{Keys: []string{tk}, Msg: "corrupt: " + err.Error()}
		}
	}
	if s.SlidingWindowLimit > 0 {
		// What the cleanup tick in force has not dropped is held; what is
		// newer than now - duration counts (lua/decide.lua's hybrid).
		cut := sc.Cleanup.TimeOf(sc.Cleanup.IndexAt(now)) - (&limiter.Group{GroupSettings: *s}).CleanupAge()
		lo := max(cut, now-s.SlidingWindowDuration+1)
		b.t.roundTrips.Add(1)
		b.t.commands.Add(1)
		zs, err := b.rdb.ZRangeByScoreWithScores(ctx, wk, &redis.ZRangeBy{Min: strconv.FormatInt(cut, 10), Max: "+inf"}).Result()
		if err != nil {
			return v, false, keyTypeErr(err, wk)
		}
		for _, z := range zs {
			if z.Score != math.Trunc(z.Score) || math.Abs(z.Score) > 1<<53 {
				return v, false, &KeyError{Keys: []string{wk}, Msg: fmt.Sprintf("corrupt: window timestamp holds %v", z.Score)}
			}
			v.Window++
			if int64(z.Score) >= lo {
				v.WindowActive++
			}
		}
	}
	return v, head != "" || inflight > 0 || v.Window > 0, nil
}

// keyTypeErr is err of a command on key: a WRONGTYPE answer is that key's
// failure.
func keyTypeErr(err error, key string) error {
	if strings.Contains(err.Error(), "WRONGTYPE") {
		return &KeyError{Keys: []string{key}, Msg: err.Error()}
	}
	return err
}

// readTokens reads a strict state string "<generation> <fields>;<instance>
// <n> <lease>;…" as lua/decide.lua's load does: the fields of generation
// gen ("" when none or of another generation) and the requests in flight
// of the instances whose lease holds at now.
func readTokens(raw, gen string, now int64) (head string, inflight int64, err error) {
	head, tail, counts := strings.Cut(raw, ";")
	if head != "" {
		g, rest, found := strings.Cut(head, " ")
		if _, err := scriptInt(g, "generation", true); err != nil || !found {
			return "", 0, fmt.Errorf("generation holds %q", g)
		}
		head = ""
		if g == gen {
			head = rest
		}
	}
	if !counts {
		return head, 0, nil
	}
	for _, seg := range strings.Split(tail, ";") {
		f := strings.Split(seg, " ")
		if len(f) != 3 || f[0] == "" {
			return "", 0, fmt.Errorf("in-flight part holds %q", seg)
		}
		n, err := scriptInt(f[1], "in-flight count", true)
		if err != nil {
			return "", 0, err
		}
		e, err := scriptInt(f[2], "lease", true)
		if err != nil {
			return "", 0, err
		}
		if e > now {
			inflight += n
		}
	}
	return head, inflight, nil
}

// agedTokens returns the tokens of a hybrid state's fields "tok tk" aged
// to leaky tick kn, tr a tick.
func agedTokens(head string, kn, tr int64) (int64, error) {
	a, b, found := strings.Cut(head, " ")
	if !found || strings.Contains(b, " ") {
		return 0, fmt.Errorf("tokens hold %q", head)
	}
	tok, err := scriptInt(a, "tok", true)
	if err != nil {
		return 0, err
	}
	tk, err := scriptInt(b, "tk", false)
	if err != nil {
		return 0, err
	}
	if kn > tk {
		tok = max(0, tok-(kn-tk)*tr)
	}
	return tok, nil
}

// scriptInt reads s as the scripts' num does: an integer within ±2⁵³,
// not negative when nonNeg.
func scriptInt(s, what string, nonNeg bool) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 || (nonNeg && f < 0) {
		return 0, fmt.Errorf("%s holds %q", what, s)
	}
	return int64(f), nil
}
