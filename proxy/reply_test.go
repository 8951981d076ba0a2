package proxy

import (
	"net/http"
	"testing"

	"github.com/limiterd/limiterd/limiter"
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

func TestRateLimitHeaders(t *testing.T) {
	h := http.Header{}
	setRateLimitHeaders(h, "general", &limiter.Quota{BucketLimit: 450, BucketRemaining: 12, BucketWindow: 30000, BucketReset: 6001})
	if got := h.Get("RateLimit-Policy"); got != `"general";q=450;w=30` {
		t.Errorf("policy %q", got)
	}
	if got := h.Get("RateLimit"); got != `"general";r=12;t=7` {
		t.Errorf("ratelimit %q", got)
	}
	h = http.Header{}
	setRateLimitHeaders(h, "chunk", &limiter.Quota{BucketLimit: 6000, BucketRemaining: 6000, BucketWindow: 30000, BucketReset: 1,
		WindowLimit: 100, WindowRemaining: 99, WindowDuration: 1000, WindowReset: 1000})
	if got := h.Get("RateLimit-Policy"); got != `"chunk";q=6000;w=30, "chunk-window";q=100;w=1` {
		t.Errorf("policy %q", got)
	}
	if got := h.Get("RateLimit"); got != `"chunk";r=6000;t=1, "chunk-window";r=99;t=1` {
		t.Errorf("ratelimit %q", got)
	}
}
