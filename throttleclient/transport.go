package throttleclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// observePath is the adaptive throttle's endpoint on the admin listener.
const observePath = "/api/v1/throttle/observe"

// ObserveTimeout bounds how long Transport waits for limiterd to take a
// reply's report.
const ObserveTimeout = 2 * time.Second

// Observe reports to limiterd the reply the node got from peer for path
// (POST /api/v1/throttle/observe): its status and its ratelimit-* header
// fields, from which limiterd's adaptive throttle learns the peer's quota
// (docs/throttle.md, "Adaptive mode"). Only those four fields are sent, each
// field's last line; a reply without them marks the peer as not pacing (never
// throttled). When limiterd cannot be reached it returns nil.
func (c *Client) Observe(ctx context.Context, peer, path string, status int, h http.Header) error {
	fields := make(map[string]string, 4)
	for name, vs := range h {
		if len(vs) > 0 && len(name) > 10 && strings.EqualFold(name[:10], "ratelimit-") {
			fields[strings.ToLower(name)] = vs[len(vs)-1]
		}
	}
	body, err := json.Marshal(struct {
		Peer    string            `json:"peer"`
		Path    string            `json:"path"`
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
	}{peer, path, status, fields})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+observePath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("throttleclient: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.do(req)
	if err != nil {
		if ctx.Err() == nil && unreachable(err) {
			return nil
		}
		return fmt.Errorf("throttleclient: %w", err)
	}
	return answer(resp, nil)
}

// Transport is an http.RoundTripper for a node's own requests to its
// peers: it asks limiterd's outbound throttle before every request
// (Client.Throttle, which may wait) and reports every reply after it
// (Client.Observe), so that with throttle.mode = "adaptive" limiterd paces
// each peer by the quota its replies announce, as an Arweave 2.9.7 node
// paces itself. A Transport is safe for concurrent use if Base is.
//
// The throttle never stands in the way: when limiterd cannot be reached,
// refuses the token or answers an error, the request goes anyway, as the
// node's own throttle lets it (Errors, if set, hears of it). Only the end
// of the request's context stops it.
type Transport struct {
	// Client is the limiterd to ask.
	Client *Client
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Peer names a request's peer for the throttle; nil means its host
	// (req.URL.Host, "1.2.3.4:1984").
	Peer func(*http.Request) string
	// Errors, if not nil, is called with each error of limiterd's that
	// the Transport went past.
	Errors func(error)
}

// RoundTrip throttles req, sends it with Base, and reports the reply.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	peer := req.URL.Host
	if t.Peer != nil {
		peer = t.Peer(req)
	}
	path := req.URL.Path
	if err := t.Client.Throttle(req.Context(), peer, path); err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, err
		}
		t.report(err)
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), ObserveTimeout)
	defer cancel()
	t.report(t.Client.Observe(ctx, peer, path, resp.StatusCode, resp.Header))
	return resp, nil
}

func (t *Transport) report(err error) {
	if err != nil && t.Errors != nil {
		t.Errors(err)
	}
}
