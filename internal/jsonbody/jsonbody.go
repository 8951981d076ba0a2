// Package jsonbody reads and writes the JSON bodies of limiterd's HTTP APIs
// (the admin API and the data plane's check API): a request body read
// bounded and decoded strictly, a value answered with a status, or the
// error body of docs/api.md ("Errors"), {"error": "…", "field": "…"}.
package jsonbody

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/limiterd/limiterd/limiter"
)

// MaxBody is the largest request body Read accepts, in bytes.
const MaxBody = 64 << 10

// ErrBadBody marks a request body that cannot be read or is not the JSON
// the API expects (a 400).
var ErrBadBody = errors.New("bad request")

// Read reads r's body, at most MaxBody bytes; a longer one is an error
// wrapping ErrBadBody.
func Read(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", ErrBadBody, err)
	}
	if len(b) > MaxBody {
		return nil, fmt.Errorf("%w: the body is larger than %d bytes", ErrBadBody, MaxBody)
	}
	return b, nil
}

// Decode reads r's body (bounded, see Read) and decodes it into v
// strictly: an unknown field is a *limiter.FieldError naming it ("<field>:
// unknown field"), anything else wrong an error wrapping ErrBadBody.
func Decode(r *http.Request, v any) error {
	b, err := Read(r)
	if err != nil {
		return err
	}
	return DecodeBytes(b, v)
}

// DecodeBytes is Decode for a body already read.
func DecodeBytes(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return &limiter.FieldError{Field: strings.Trim(f, `"`), Problem: "unknown field"}
		}
		return fmt.Errorf("%w: the body is not the expected JSON object: %v", ErrBadBody, err)
	}
	return nil
}

// Error is the body of every API error (docs/api.md, "Errors"). Field names the
// request field at fault, when one is.
type Error struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// Write answers status with v as JSON, never cached.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// StatusOf returns the status an API answers the error of a request with,
// and the request's field at fault when one is named: 422 for a
// *limiter.FieldError (a field that is wrong, missing or unknown), 400 for
// a body or query that cannot be read (ErrBadBody, a JSON syntax or type
// error). It is the one mapping of a bad request to HTTP (docs/api.md,
// "Errors"); ok is false for any other error, which the caller maps
// (package web: its not-found and conflict errors, else 500).
func StatusOf(err error) (status int, field string, ok bool) {
	var fe *limiter.FieldError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &fe):
		return http.StatusUnprocessableEntity, fe.Field, true
	case errors.Is(err, ErrBadBody), errors.As(err, &syn), errors.As(err, &typ):
		return http.StatusBadRequest, "", true
	}
	return 0, "", false
}

// BodyField is the name a request gives a field an error names: a
// group's setting by its key ("leaky_limit" of
// "http_api.limiter.general.leaky_limit"), as a live edit's body does;
// any other field as it is.
func BodyField(field string) string {
	if _, key, ok := limiter.SplitGroupField(field); ok {
		return key
	}
	return field
}

// Fail answers the error of a request that cannot be taken as StatusOf
// says, 400 for an error it does not know: for the handlers whose only
// errors are their request's.
func Fail(w http.ResponseWriter, err error) {
	status, field, ok := StatusOf(err)
	if !ok {
		status = http.StatusBadRequest
	}
	WriteError(w, status, err.Error(), field)
}

// WriteError answers status with the error body {"error": msg, "field":
// field}; an empty field is left out.
func WriteError(w http.ResponseWriter, status int, msg, field string) {
	Write(w, status, Error{Error: msg, Field: field})
}
