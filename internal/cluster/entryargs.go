package cluster

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/peer"
)

// What a strict decision puts together before it is queued, made with as
// few allocations as the request path allows (docs/cluster.md,
// "Performance"): the key names in one string each, the group's shared
// arguments boxed once per settings version and schedule, the reply read
// into the caller's own array.

// entryParams are the arguments a group's entries share in a batch — its
// settings and its shared schedule — packed once for a (group, version,
// schedule) as the batch script reads them (packNums); a batch numbers
// them by this pointer.
type entryParams struct {
	g      *limiter.Group
	ver    uint64
	sc     *sharedSched
	packed []byte
}

// paramsCache holds the last entryParams of each group.
type paramsCache [limiter.MaxGroups]atomic.Pointer[entryParams]

// get returns g's shared arguments under sc, made by build when the ones
// held are of another group version or schedule.
func (pc *paramsCache) get(g *limiter.Group, sc *sharedSched, build func(*limiter.Group, *sharedSched) []any) *entryParams {
	if p := pc[g.ID].Load(); p != nil && p.g == g && p.ver == g.Version && p.sc == sc {
		return p
	}
	p := &entryParams{g: g, ver: g.Version, sc: sc, packed: packNums(nil, build(g, sc))}
	pc[g.ID].Store(p)
	return p
}

// appendNum appends v as the batch script reads a number of an entry: a
// little-endian double (struct's '<d'), exact within ±2⁵³ as every
// number the script computes with is.
func appendNum(b []byte, v int64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(v)))
}

// packNums appends args to b as appendArg does: numbers (int, int64; a
// generation's text goes through numArg first).
func packNums(b []byte, args []any) []byte {
	for _, a := range args {
		b = appendArg(b, a)
	}
	return b
}

// appendArg appends one argument of an entry: a number as appendNum
// does, a string as it is (the member of a window, the last argument);
// anything else (never passed) as NaN rather than as a number it is not.
func appendArg(b []byte, a any) []byte {
	switch v := a.(type) {
	case int:
		return appendNum(b, int64(v))
	case int64:
		return appendNum(b, v)
	case string:
		return append(b, v...)
	}
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(math.NaN()))
}

// numArg is a number given as its decimal text (a generation) as a
// number for packNums.
func numArg(s string) any {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return math.NaN()
	}
	return n
}

// appendPeer appends k's text (peer.Key.String) to b.
func appendPeer(b []byte, k *peer.Key) []byte {
	if k.IsOpaque() {
		b = append(b, "opaque:"...)
		return hex.AppendEncode(b, k[1:])
	}
	p, ok := k.Prefix()
	if !ok {
		return append(b, "invalid"...)
	}
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().AppendTo(b)
	}
	return p.AppendTo(b)
}

// tagChars are the bytes escaper changes.
const tagChars = "%{}|"

// appendTag appends ld:{<peer>|<group>} to b: the prefix and tagOf's hash
// tag, escaped as it escapes it.
func appendTag(b []byte, k limiter.Key, g string) []byte {
	b = append(b, keyPrefix+"{"...)
	p := k.Peer()
	start := len(b)
	b = appendPeer(b, &p)
	if strings.ContainsAny(string(b[start:]), tagChars) { // (never, for the texts peer.Key has)
		txt := escaper.Replace(string(b[start:]))
		b = append(b[:start], txt...)
	}
	b = append(b, '|')
	if strings.ContainsAny(g, tagChars) {
		g = escaper.Replace(g)
	}
	b = append(b, g...)
	return append(b, '}')
}

// genKey returns baseKey(k, g, sc) + suf in one allocation.
func genKey(k limiter.Key, g string, sc *sharedSched, suf string) string {
	var buf [128]byte
	b := appendTag(buf[:0], k, g)
	b = append(b, ':')
	b = append(b, sc.gen...)
	return string(append(b, suf...))
}

// replyInts reads a script's reply of at most len(out) integers into out
// and returns how many it holds (ints without the allocation).
func replyInts(v any, out []int64) (int, error) {
	a, ok := v.([]any)
	if !ok {
		return 0, fmt.Errorf("%w: %T, want an array of integers", ErrReply, v)
	}
	if len(a) > len(out) {
		return 0, fmt.Errorf("%w: %d integers, want at most %d", ErrReply, len(a), len(out))
	}
	for i, x := range a {
		n, ok := x.(int64)
		if !ok {
			return 0, fmt.Errorf("%w: element %d is %T, want an integer", ErrReply, i, x)
		}
		out[i] = n
	}
	return len(a), nil
}
