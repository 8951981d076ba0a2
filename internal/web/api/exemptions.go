package api

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/limiter"
)

// exemptionInput is the body of POST and DELETE /api/v1/exemptions.
type exemptionInput struct {
	Kind  live.ExemptionKind `json:"kind"`
	Value string             `json:"value"`
	Note  string             `json:"note"`
	// Expires is an RFC 3339 time or a duration from now ("24h").
	Expires string `json:"expires"`
}

// exemptionBody reads an exemption from the request's JSON body, or, for
// a DELETE without one, from ?kind=&value=.
func (a *API) exemptionBody(r *http.Request) (live.Exemption, error) {
	b, err := jsonbody.Read(r)
	if err != nil {
		return live.Exemption{}, err
	}
	if len(b) == 0 {
		q := r.URL.Query()
		return live.Exemption{Kind: live.ExemptionKind(q.Get("kind")), Value: q.Get("value")}, nil
	}
	var in exemptionInput
	if err := jsonbody.DecodeBytes(b, &in); err != nil {
		return live.Exemption{}, err
	}
	e := live.Exemption{Kind: in.Kind, Value: in.Value, Note: in.Note}
	e.Expires, err = parseExpiry(in.Expires, a.now())
	return e, err
}

// parseExpiry reads an expiry: "" (none), an RFC 3339 time, or a Go
// duration from now ("24h", "90m"), which must be positive.
func parseExpiry(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return time.Time{}, &limiter.FieldError{Field: "expires", Problem: fmt.Sprintf(`must be an RFC 3339 time ("2026-12-01T00:00:00Z") or a duration from now ("24h"), got %q`, v)}
	}
	if d <= 0 {
		return time.Time{}, &limiter.FieldError{Field: "expires", Problem: fmt.Sprintf("the duration must be positive, got %s", v)}
	}
	return now.Add(d), nil
}
