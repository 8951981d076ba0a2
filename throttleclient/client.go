// Package throttleclient is the Go client of limiterd's outbound throttle
// (docs/throttle.md): a node written in Go calls Throttle before each request
// it sends to a peer, and Throttle returns once limiterd says the request may
// go, exactly as the Arweave node's ar_rate_limiter:throttle/2 does.
//
// Like ar_rate_limiter when its server is not running, the client never
// stands in the node's way when limiterd is down: if limiterd cannot be
// reached (connection refused, connect timeout, unknown host) Throttle
// returns nil at once, and Check reports no wait.
//
// With limiterd's throttle.mode = "adaptive" (Arweave 2.9.7's client
// throttle), limiterd learns each peer's quota from the replies the node
// reports (Observe). Transport does both around every request of an
// http.Client, throttling before and reporting after:
//
//	lc := throttleclient.New("http://127.0.0.1:1986", token)
//	hc := &http.Client{Transport: &throttleclient.Transport{Client: lc}}
//	resp, err := hc.Get("http://1.2.3.4:1984/chunk/123") // waits if 1.2.3.4:1984's quota is spent
//
// (see the Transport example).
package throttleclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultConnectTimeout bounds how long a call waits for a TCP connection
// to limiterd before taking it as not running.
const DefaultConnectTimeout = 250 * time.Millisecond

// throttlePath is the outbound throttle's endpoint on the admin listener.
const throttlePath = "/api/v1/throttle"

// Errors of this package.
var (
	// ErrUnauthorized is returned when limiterd refuses the token (401).
	ErrUnauthorized = errors.New("throttleclient: limiterd refused the token")
)

// Error is an error answer of limiterd's API other than 401: a bad request
// (400, 422 with the offending Field), a timeout (408), and so on.
type Error struct {
	Status  int    // the HTTP status
	Message string // the body's "error"
	Field   string // the body's "field", if any
}

// Error returns "throttleclient: limiterd answered <status>: <message>".
func (e *Error) Error() string {
	msg := fmt.Sprintf("throttleclient: limiterd answered %d: %s", e.Status, e.Message)
	if e.Field != "" {
		msg += " (field " + e.Field + ")"
	}
	return msg
}

// Client calls one limiterd's outbound throttle. It is safe for concurrent
// use by any number of goroutines; it holds one HTTP connection per call
// waiting at the time, reused afterwards.
type Client struct {
	base           string // the admin listener's URL, without a trailing "/"
	token          string
	hc             *http.Client
	connectTimeout time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client use hc, as is: its transport then decides
// the connect timeout, and WithConnectTimeout has no effect. hc should have
// no overall Timeout, since a throttled call may wait for a long time.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithConnectTimeout sets how long to wait for a connection to limiterd
// before taking it as not running (default DefaultConnectTimeout).
func WithConnectTimeout(d time.Duration) Option { return func(c *Client) { c.connectTimeout = d } }

// New returns a Client of the limiterd whose admin listener is at baseURL
// ("http://127.0.0.1:1986"), authenticating with token: give it a token of
// scope data (an [[admin.tokens]] entry of limiterd's config), which may
// make the throttle calls and nothing else; the admin token works too, but
// a node holding it could change every limit. A token of another scope
// gets a 403 *Error.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, connectTimeout: DefaultConnectTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		d := &net.Dialer{Timeout: c.connectTimeout, KeepAlive: 30 * time.Second}
		c.hc = &http.Client{Transport: &http.Transport{
			Proxy:               nil, // limiterd is local: never through a proxy
			DialContext:         d.DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	return c
}

// Throttle blocks while limiterd says a call of path to peer must wait,
// and returns nil when it may go (at once for an exempt peer or path, or
// while the throttle is off). It returns nil at once, too, when limiterd
// cannot be reached or is shutting down: the throttle is then not running.
// When ctx ends first it returns ctx.Err(). A connection lost while waiting
// is retried (limiterd restarting: the new one is asked, or, if it is not
// up, the call goes). Other failures are an *Error or ErrUnauthorized.
func (c *Client) Throttle(ctx context.Context, peer, path string) error {
	body, err := json.Marshal(struct {
		Peer string `json:"peer"`
		Path string `json:"path"`
	}{peer, path})
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+throttlePath, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("throttleclient: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.do(req)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case unreachable(err):
				return nil
			case attempt < 3:
				continue
			}
			return fmt.Errorf("throttleclient: %w", err)
		}
		err = answer(resp, nil)
		var e *Error
		if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable && e.Message == "throttle_unavailable" {
			return nil // shutting down
		}
		return err
	}
}

// Check asks, without waiting and without counting a call, how long a call
// of path to peer would have to wait now: 0 when it could go at once. When
// limiterd cannot be reached it returns 0 and no error.
func (c *Client) Check(ctx context.Context, peer, path string) (time.Duration, error) {
	q := url.Values{"peer": {peer}, "path": {path}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+throttlePath+"?"+q.Encode(), nil)
	if err != nil {
		return 0, fmt.Errorf("throttleclient: %w", err)
	}
	resp, err := c.do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case unreachable(err):
			return 0, nil
		}
		return 0, fmt.Errorf("throttleclient: %w", err)
	}
	var out struct {
		WouldWait bool  `json:"would_wait"`
		WaitMS    int64 `json:"wait_ms"`
	}
	if err := answer(resp, &out); err != nil {
		return 0, err
	}
	if !out.WouldWait {
		return 0, nil
	}
	return time.Duration(out.WaitMS) * time.Millisecond, nil
}

func (c *Client) do(req *http.Request) (*http.Response, error) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	return c.hc.Do(req)
}

// answer reads resp: a 200 body into out (if not nil), an error answer
// into an *Error or ErrUnauthorized.
func answer(resp *http.Response, out any) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("throttleclient: reading the answer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return ErrUnauthorized
	case resp.StatusCode != http.StatusOK:
		e := &Error{Status: resp.StatusCode}
		var body struct {
			Error string `json:"error"`
			Field string `json:"field"`
		}
		if json.Unmarshal(b, &body) == nil && body.Error != "" {
			e.Message, e.Field = body.Error, body.Field
		} else {
			e.Message = strings.TrimSpace(string(b))
		}
		return e
	case out != nil:
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("throttleclient: the answer is not the expected JSON: %w", err)
		}
	}
	return nil
}

// unreachable reports whether err means no connection to limiterd could be
// made: refused, timed out, unknown host, no route.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
