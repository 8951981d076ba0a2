package api

import (
	"net/http"

	"github.com/limiterd/limiterd/internal/jsonbody"
	"github.com/limiterd/limiterd/internal/live"
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
	e.Expires, err = live.ParseExpiry(in.Expires, a.now())
	return e, err
}
