package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/config"
)

// TestOlderConfigExplained: configurations the development builds before
// 0.1.0 accepted (each checked against such a build when it was written)
// are refused by check-config and at start, and under each problem the
// output says what changed in which release and the fix, as
// config.Upgrades and CHANGELOG.md's upgrade notes say.
func TestOlderConfigExplained(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "admin.token")
	os.WriteFile(token, []byte("a-token-of-thirty-characters!!\n"), 0o644)
	os.Chmod(token, 0o644)
	for _, tc := range []struct {
		name, toml string
		keys       []string // the problems' keys, in order
	}{
		{"trusted proxies, an exposed admin listener, a fast snapshot", `
[admin]
listen = "0.0.0.0:1986"

[peers]
trusted_proxies = ["127.0.0.1"]

[snapshot]
interval = "500ms"
`, []string{"admin.listen", "peers.forwarded_header", "snapshot.interval"}},
		{"forwarded_header auto", `
[peers]
trusted_proxies = ["127.0.0.1"]
forwarded_header = "auto"
`, []string{"peers.forwarded_header"}},
		{"a token file every user reads", "[admin]\ntoken_file = \"admin.token\"\n", []string{"admin.token_file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			os.WriteFile(path, []byte(tc.toml), 0o600)
			for _, cmd := range []string{"check-config", "serve"} {
				code, _, stderr := run(t, cmd, "-config", path, "-data-dir", t.TempDir())
				if code != exitUsage {
					t.Fatalf("%s: exit %d, want %d:\n%s", cmd, code, exitUsage, stderr)
				}
				lines := strings.Split(strings.TrimSpace(stderr), "\n")
				var problems []string
				for i, line := range lines {
					key, _, ok := strings.Cut(strings.TrimPrefix(line, "config: "), ": ")
					if !ok || !strings.HasPrefix(line, "config: ") {
						continue
					}
					problems = append(problems, key)
					if i+2 >= len(lines) || !strings.HasPrefix(lines[i+1], "  changed in limiterd 0.1.0: ") || !strings.HasPrefix(lines[i+2], "  fix: ") {
						t.Errorf("%s: the problem of %s is not followed by the change and the fix:\n%s", cmd, key, stderr)
					}
				}
				if strings.Join(problems, " ") != strings.Join(tc.keys, " ") {
					t.Errorf("%s: problems of %q, want %q:\n%s", cmd, problems, tc.keys, stderr)
				}
			}
		})
	}
	// A problem no release's change explains gets no note.
	path := filepath.Join(dir, "plain.toml")
	os.WriteFile(path, []byte("[server]\nlisten = \"nowhere\"\n"), 0o600)
	if _, _, stderr := run(t, "check-config", "-config", path); strings.Contains(stderr, "changed in") {
		t.Errorf("a plain problem with an upgrade note:\n%s", stderr)
	}
	if len(config.Upgrades()) < 5 {
		t.Errorf("%d upgrades", len(config.Upgrades()))
	}
}
