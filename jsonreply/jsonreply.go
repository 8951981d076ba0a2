// Package jsonreply writes the JSON replies of limiterd's HTTP APIs (the
// admin API and the data plane's check API): a value with a status, or the
// error body of SPEC §7, {"error": "…", "field": "…"}.
package jsonreply

import (
	"encoding/json"
	"net/http"
)

// Error is the body of every API error (SPEC §7). Field names the request
// field at fault, when one is.
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
