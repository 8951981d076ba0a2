package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/throttle"
	"github.com/limiterd/limiterd/limiter"
)

// observeRequest is the body of POST /api/v1/throttle/observe: the reply
// the node got from peer for path.
type observeRequest struct {
	Peer    string         `json:"peer"`
	Path    string         `json:"path"`
	Status  int            `json:"status"`
	Headers observeHeaders `json:"headers"`
}

// observeHeaders are a reply's header fields: each value a string, a
// number, or a list of strings (several lines of one field: the last one
// counts, as in the node's client).
type observeHeaders map[string]string

// UnmarshalJSON reads the headers object.
func (h *observeHeaders) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		return fmt.Errorf("headers must be an object")
	}
	out := make(observeHeaders, len(raw))
	for k, v := range raw {
		v = bytes.TrimSpace(v)
		switch {
		case len(v) > 0 && v[0] == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			out[k] = s
		case len(v) > 0 && v[0] == '[':
			var list []string
			if err := json.Unmarshal(v, &list); err != nil {
				return fmt.Errorf("headers.%s: a list of strings expected", k)
			}
			if len(list) > 0 {
				out[k] = list[len(list)-1]
			}
		default:
			var n json.Number
			if err := json.Unmarshal(v, &n); err != nil {
				return fmt.Errorf("headers.%s: a string, a number or a list of strings expected", k)
			}
			out[k] = n.String()
		}
	}
	*h = out
	return nil
}

// observeResponse is the answer of POST /api/v1/throttle/observe.
type observeResponse struct {
	Mode    string `json:"mode"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Header  string `json:"header,omitempty"`
	Group   string `json:"group,omitempty"`
}

// HandleObserve serves POST /api/v1/throttle/observe
// {"peer","path","status","headers":{…}} (docs/throttle.md, "Adaptive mode"): the adaptive
// throttle learns the peer's quota from the reply's ratelimit-* fields.
// It answers 200 {"mode","outcome","reason","header","group"}: outcome
// "learned", "skipped" (tx/*), "incompatible" (a field missing: the peer is
// no longer throttled) or "refused" (bad fields, counted, nothing
// changed; reason says why, as the node's client names it). A bad body is
// 400, a bad or missing field 422 naming it.
func (a *Throttle) HandleObserve(w http.ResponseWriter, r *http.Request) {
	var req observeRequest
	err := jsonbody.Decode(r, &req)
	if err == nil {
		err = checkThrottleArgs(req.Peer, req.Path)
	}
	if err == nil && (req.Status < 100 || req.Status > 599) {
		err = &limiter.FieldError{Field: "status", Problem: fmt.Sprintf("must be an HTTP status from 100 to 599, got %d", req.Status)}
	}
	if err == nil && req.Headers == nil {
		err = &limiter.FieldError{Field: "headers", Problem: "required (an object; {} for a reply without header fields)"}
	}
	if err != nil {
		jsonbody.Fail(w, err)
		return
	}
	o := a.t.Observe(a.now(), req.Peer, req.Path, req.Headers)
	jsonbody.Write(w, http.StatusOK, observeResponse{Mode: a.t.Mode().String(), Outcome: o.Outcome, Reason: o.Reason, Header: o.Header, Group: o.Group})
}

// waitAdaptive is HandleWait in the adaptive mode: the call goes at once
// when the throttle says so, else it waits for its quota (woken by a
// reply or by the refill) at most until its timeout (408) or
// throttle.AdaptiveMaxWait (then it goes, as the node's does: 200 with
// "gave_up").
func (a *Throttle) waitAdaptive(w http.ResponseWriter, r *http.Request, req throttleWaitRequest, timeout time.Duration) {
	start := a.now()
	res := a.t.TryAdaptive(start, req.Peer, req.Path)
	if res.Admitted {
		jsonbody.Write(w, http.StatusOK, throttleWaitResponse{Type: res.Group, Outcome: res.Outcome,
			Exempt: res.Outcome == throttle.OutcomeExempt, Off: res.Outcome == throttle.OutcomeOff})
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.closed, cancel)()
	tk := res.Ticket
	admitted := false
	defer func() {
		if !admitted {
			a.t.CancelAdaptive(tk)
		}
	}()
	limit := throttle.AdaptiveMaxWait
	if timeout > 0 && timeout < limit {
		limit = timeout
	}
	deadline := start.Add(limit)
	var timer *time.Timer
	if a.sleep == nil {
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	for now := start; ; {
		wait := deadline.Sub(now)
		if res.WaitIn > 0 && res.WaitIn < wait {
			wait = res.WaitIn
		}
		if err := a.waitWake(ctx, timer, res.Wake, max(wait, 0)); err != nil {
			if a.closed.Err() != nil {
				jsonbody.WriteError(w, http.StatusServiceUnavailable, "throttle_unavailable", "")
				return
			}
			jsonbody.WriteError(w, http.StatusServiceUnavailable, "throttle_canceled", "")
			return
		}
		now = a.now()
		res = a.t.PollAdaptive(now, tk)
		waited := now.Sub(start).Milliseconds()
		switch {
		case res.Admitted:
			admitted = true
			jsonbody.Write(w, http.StatusOK, throttleWaitResponse{WaitedMS: waited, Type: res.Group, Outcome: res.Outcome})
			return
		case !now.Before(deadline) && timeout > 0 && timeout <= throttle.AdaptiveMaxWait:
			jsonbody.Write(w, http.StatusRequestTimeout, throttleWaitResponse{Error: "throttle_timeout", WaitedMS: waited, Type: res.Group})
			return
		case !now.Before(deadline):
			jsonbody.Write(w, http.StatusOK, throttleWaitResponse{WaitedMS: waited, Type: res.Group, Outcome: "gave_up"})
			return
		}
	}
}

// waitWake waits d, or until wake is closed, or ctx ends (its error).
// With an injected sleep (tests), it sleeps d on it.
func (a *Throttle) waitWake(ctx context.Context, timer *time.Timer, wake <-chan struct{}, d time.Duration) error {
	if a.sleep != nil {
		return a.sleep(ctx, d)
	}
	timer.Reset(d)
	select {
	case <-wake:
		if !timer.Stop() {
			<-timer.C
		}
		return nil
	case <-timer.C:
		return nil
	case <-ctx.Done():
		if !timer.Stop() {
			<-timer.C
		}
		return ctx.Err()
	}
}
