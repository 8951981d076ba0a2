package proxy

import (
	"testing"
)

func TestPrefersJSON(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                   false,
		"*/*":                                false,
		"text/plain":                         false,
		"application/json":                   true,
		"application/problem+json":           true,
		"text/html, application/json":        true,
		"application/json;q=0.5, text/plain": false,
		"text/plain;q=0.2, application/json": true,
		"application/json;q=0":               false,
		"APPLICATION/JSON":                   true,
	} {
		if got := prefersJSON(accept); got != want {
			t.Errorf("prefersJSON(%q) = %v, want %v", accept, got, want)
		}
	}
}
