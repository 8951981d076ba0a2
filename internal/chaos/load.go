package chaos

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Load sends requests to a limiterd public listener over keep-alive
// connections, one sender per connection, as fast as it answers or at a
// rate. Its counters are safe for concurrent use.
type Load struct {
	// Addr is the public listener's host:port.
	Addr string
	// Conns is the number of connections and senders.
	Conns int
	// Rate is the requests per second of all senders together (0: as
	// fast as they are answered).
	Rate float64
	// Next fills the n-th request of sender w (method, URI path, headers,
	// body; the Host is set), or returns false to stop that sender.
	Next func(w int, n int64, req *fasthttp.Request) bool

	sent     atomic.Int64
	errors   atomic.Int64
	firstErr atomic.Value
	mu       sync.Mutex
	codes    map[int]int64
}

// Run sends until ctx ends.
func (l *Load) Run(ctx context.Context) {
	hc := &fasthttp.HostClient{Addr: l.Addr, MaxConns: l.Conns, MaxConnWaitTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, MaxIdleConnDuration: time.Minute}
	var wg sync.WaitGroup
	for w := range l.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.sender(ctx, hc, w)
		}()
	}
	wg.Wait()
	hc.CloseIdleConnections()
}

func (l *Load) sender(ctx context.Context, hc *fasthttp.HostClient, w int) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	var gap time.Duration
	if l.Rate > 0 {
		gap = time.Duration(float64(l.Conns) / l.Rate * float64(time.Second))
	}
	due := time.Now()
	codes := map[int]int64{}
	defer func() {
		l.mu.Lock()
		if l.codes == nil {
			l.codes = map[int]int64{}
		}
		for c, n := range codes {
			l.codes[c] += n
		}
		l.mu.Unlock()
	}()
	for n := int64(0); ctx.Err() == nil; n++ {
		if gap > 0 {
			due = due.Add(gap)
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			} else if d < -time.Second {
				due = time.Now() // behind by more than a second: do not burst
			}
		}
		req.Reset()
		if !l.Next(w, n, req) {
			return
		}
		req.SetHost(l.Addr)
		l.sent.Add(1)
		if err := hc.Do(req, resp); err != nil {
			if l.errors.Add(1) == 1 {
				l.firstErr.Store(err.Error())
			}
			// A daemon being killed: do not spin.
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		codes[resp.StatusCode()]++
	}
}

// Sent returns the requests sent so far.
func (l *Load) Sent() int64 { return l.sent.Load() }

// Errors returns the requests that got no answer (connection refused or
// cut: a killed daemon).
func (l *Load) Errors() int64 { return l.errors.Load() }

// Codes returns the answers by status, once Run has returned.
func (l *Load) Codes() map[int]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]int64{}
	for c, n := range l.codes {
		out[c] = n
	}
	return out
}

// CodesString formats Codes as "200:n 429:m …, errors e".
func (l *Load) CodesString() string { return codesString([]*Load{l}) }

// codesString sums the loads' answers and formats them as
// "200:n 429:m … errors:e", with the first error met.
func codesString(ls []*Load) string {
	codes := map[int]int64{}
	var first string
	for _, l := range ls {
		for c, n := range l.Codes() {
			codes[c] += n
		}
		if e, ok := l.firstErr.Load().(string); ok && first == "" {
			first = e
		}
	}
	var keys []int
	for c := range codes {
		keys = append(keys, c)
	}
	sort.Ints(keys)
	var b strings.Builder
	for _, c := range keys {
		fmt.Fprintf(&b, "%d:%d ", c, codes[c])
	}
	fmt.Fprintf(&b, "errors:%d", loadErrors(ls))
	if first != "" {
		fmt.Fprintf(&b, " (the first: %s)", first)
	}
	return b.String()
}

// IPv4 returns the i-th address of a block of 2²⁴·k addresses from
// 11.0.0.0 (public space, as a flood's would be; never the test's fixed
// peers of 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24).
func IPv4(i int64) string {
	v := uint32(11<<24) + uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

// IPv6 returns an address in the i-th /64 of 2a0b::/32, its interface
// bits from salt: distinct i are distinct peers under ipv6_prefix = 64.
func IPv6(i int64, salt uint64) string {
	var b [16]byte
	b[0], b[1], b[2], b[3] = 0x2a, 0x0b, 0, 0
	u := uint32(i)
	b[4], b[5], b[6], b[7] = byte(u>>24), byte(u>>16), byte(u>>8), byte(u)
	for k := range 8 {
		b[8+k] = byte(salt >> (8 * k))
	}
	return netip.AddrFrom16(b).String()
}
