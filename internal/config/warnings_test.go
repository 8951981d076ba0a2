package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/config"
)

// TestRouteTableWarnings: a table of many regular expressions or of very
// many patterns is valid but said at load; the shipped one is not.
func TestRouteTableWarnings(t *testing.T) {
	shipped, _, err := config.Load(config.Source{})
	if err != nil {
		t.Fatal(err)
	}
	if w := shipped.Warnings(); len(w) != 0 {
		t.Fatalf("the shipped config: %q", w)
	}
	var b strings.Builder
	b.WriteString("[routes]\n")
	for i := range 150 {
		fmt.Fprintf(&b, "[[routes.rule]]\ngroup = \"chunk\"\npaths = [\"re:^/r%d/\"]\n", i)
	}
	cfg, _, err := config.Load(config.Source{Data: []byte(b.String())})
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "150 regular-expression patterns") {
		t.Fatalf("150 regexps: %q", w)
	}
}
