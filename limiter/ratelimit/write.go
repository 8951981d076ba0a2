package ratelimit

import "strconv"

// IETFItem is one quota of the IETF fields:
// `"<Name><Suffix>";q=<Quota>;w=<Window>` in RateLimit-Policy and
// `"<Name><Suffix>";r=<Remaining>;t=<Reset>` in RateLimit. Window and Reset
// are whole seconds. (The suffix is apart so that a "<group>-window" item
// costs no string made per reply.)
type IETFItem struct {
	Name      string
	Suffix    string
	Quota     int64
	Window    int64
	Remaining int64
	Reset     int64
}

// AppendIETFPolicy appends the value of RateLimit-Policy for items to dst.
func AppendIETFPolicy(dst []byte, items []IETFItem) []byte {
	for i := range items {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendItem(dst, items[i].Name, items[i].Suffix, "q", items[i].Quota, "w", items[i].Window)
	}
	return dst
}

// AppendIETF appends the value of RateLimit for items to dst.
func AppendIETF(dst []byte, items []IETFItem) []byte {
	for i := range items {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendItem(dst, items[i].Name, items[i].Suffix, "r", items[i].Remaining, "t", items[i].Reset)
	}
	return dst
}

func appendItem(b []byte, name, suffix, k1 string, v1 int64, k2 string, v2 int64) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, suffix...)
	b = append(b, `";`...)
	b = append(b, k1...)
	b = append(b, '=')
	b = strconv.AppendInt(b, v1, 10)
	b = append(b, ';')
	b = append(b, k2...)
	b = append(b, '=')
	return strconv.AppendInt(b, v2, 10)
}

// Write emits the rate-limit fields of set for one limited reply of group:
// RateLimit-Policy and RateLimit from ietf when the set has them and ietf
// is not empty, the four Arweave fields from arweave when the set has them
// and arweave is not nil. Each value is formatted into scratch (which
// grows as needed and is returned for reuse) and handed to emit, valid
// only during that call: emit must copy it (fasthttp's SetBytesV does;
// net/http needs string(value)). With a scratch of 256 bytes and an emit
// that copies into a reused buffer, Write does not allocate.
//
// Retry-After is not among them: the data plane writes it on every 429
// whatever the set (docs/replies.md).
func Write(set Set, group string, ietf []IETFItem, arweave *Fields, scratch []byte, emit func(name string, value []byte)) []byte {
	if set.IETF() && len(ietf) > 0 {
		scratch = AppendIETFPolicy(scratch[:0], ietf)
		emit(NameIETFPolicy, scratch)
		scratch = AppendIETF(scratch[:0], ietf)
		emit(NameIETFRateLimit, scratch)
	}
	if set.Arweave() && arweave != nil {
		scratch = arweave.AppendLimit(scratch[:0], group)
		emit(NameLimit, scratch)
		scratch = strconv.AppendInt(scratch[:0], arweave.Remaining, 10)
		emit(NameRemaining, scratch)
		scratch = strconv.AppendInt(scratch[:0], arweave.Reset, 10)
		emit(NameReset, scratch)
		scratch = strconv.AppendInt(scratch[:0], arweave.ResetAmount, 10)
		emit(NameResetAmount, scratch)
	}
	return scratch
}
