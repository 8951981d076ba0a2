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
)

// MaxBody is the largest request body Read accepts, in bytes.
const MaxBody = 64 << 10

// ErrBadBody marks a request body that cannot be read or is not the JSON
// the API expects (a 400).
var ErrBadBody = errors.New("bad request")

// UnknownFieldError is a field of a JSON body the API does not know (a
// 422 naming it).
type UnknownFieldError struct {
	Field string
}

// Error returns "<field>: unknown field".
func (e *UnknownFieldError) Error() string { return e.Field + ": unknown field" }

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
// strictly: an unknown field is an *UnknownFieldError, anything else
// wrong an error wrapping ErrBadBody.
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
			return &UnknownFieldError{Field: strings.Trim(f, `"`)}
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

// WriteError answers status with the error body {"error": msg, "field":
// field}; an empty field is left out.
func WriteError(w http.ResponseWriter, status int, msg, field string) {
	Write(w, status, Error{Error: msg, Field: field})
}
