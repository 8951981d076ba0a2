package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/limiter"
)

// TestFileShapeBounded: a file nested deeper than MaxNesting or larger than
// MaxFileBytes is refused before the parser walks it (64 000 levels made
// check-config run for minutes and take gigabytes), naming the file and
// the bound; brackets in strings and comments do not count.
func TestFileShapeBounded(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deep := write("deep.toml", "[peers]\nexempt = "+strings.Repeat("[", 64_000)+strings.Repeat("]", 64_000)+"\n")
	_, _, err := config.Load(config.Source{Path: deep, Required: true})
	var fe *limiter.FieldError
	if !errors.As(err, &fe) || fe.Field != deep || !strings.Contains(fe.Problem, "nest over 32 deep") || !strings.Contains(fe.Problem, "line 2") {
		t.Fatalf("64 000 levels: %v", err)
	}
	inline := write("inline.toml", "[server]\nx = "+strings.Repeat("{a=", 100)+"1"+strings.Repeat("}", 100)+"\n")
	if _, _, err := config.Load(config.Source{Path: inline, Required: true}); err == nil || !strings.Contains(err.Error(), "nest over 32 deep") {
		t.Fatalf("inline tables 100 deep: %v", err)
	}
	big := write("big.toml", "# "+strings.Repeat("x", config.MaxFileBytes)+"\n")
	if _, _, err := config.Load(config.Source{Path: big, Required: true}); err == nil || !strings.Contains(err.Error(), "over 16 MiB") {
		t.Fatalf("a file over the bound: %v", err)
	}
	// Brackets in strings (every kind) and comments are not nesting.
	quiet := write("quiet.toml", "# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n"+
		"[routes]\nexempt_paths = [\"/a/"+strings.Repeat("[", 40)+"\", '"+strings.Repeat("{", 40)+"', \"\"\"\n"+strings.Repeat("[", 40)+"\n\"\"\"]\n")
	if _, _, err := config.Load(config.Source{Path: quiet, Required: true}); err != nil && strings.Contains(err.Error(), "nest over") {
		t.Fatalf("brackets in strings and comments counted: %v", err)
	}
}
