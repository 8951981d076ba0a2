package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/config"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// load is mustLoad without the Info.
func load(t *testing.T, src config.Source) *config.Config {
	t.Helper()
	c, _ := mustLoad(t, src)
	return c
}

// problems returns the lines of a Load error.
func problems(err error) []string {
	var out []string
	for _, e := range config.Errors(err) {
		out = append(out, "config: "+e.Error())
	}
	return out
}

func TestLogAndTokensErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"log values", "[log]\nformat = \"xml\"\nlevel = \"loud\"\nrejections = \"some\"\n", []string{
			`config: log.format: must be one of text, json, got "xml"`,
			`config: log.level: must be one of debug, info, warn, error, got "loud"`,
			`config: log.rejections: must be one of off, sampled, all, got "some"`,
		}},
		{"unknown scope", "[[admin.tokens]]\nname = \"grafana\"\nscope = \"write\"\ntoken = \"0123456789abcdef0123456789abcdef\"\n", []string{
			`config: admin.tokens[0].scope: must be one of admin, read, data, got "write"`,
		}},
		{"unknown key in a token", "[[admin.tokens]]\nname = \"x\"\nscope = \"read\"\ntoken = \"0123456789abcdef0123456789abcdef\"\nscopes = [\"read\"]\n", []string{
			`config: admin.tokens[0].scopes: unknown key`,
		}},
		{"missing fields", "[[admin.tokens]]\ntoken_file = \"/x\"\n", []string{
			`config: admin.tokens[0].name: required: it names the token in the audit log`,
			`config: admin.tokens[0].scope: required: admin, read or data`,
		}},
		{"both secrets, none, short, duplicate", `
[[admin.tokens]]
name = "a"
scope = "data"
token = "0123456789abcdef0123456789abcdef"
token_file = "/etc/limiterd/a.token"
[[admin.tokens]]
name = "b"
scope = "read"
[[admin.tokens]]
name = "a"
scope = "admin"
token = "short"
[[admin.tokens]]
name = "bad name!"
scope = "read"
token = "0123456789abcdef0123456789abcdef"
`, []string{
			`config: admin.tokens[0].token_file: set only one of token and token_file`,
			`config: admin.tokens[1].token: set token or token_file (a file keeps the secret out of the config)`,
			`config: admin.tokens[2].name: "a" is also admin.tokens[0].name: each token needs its own name`,
			"config: admin.tokens[2].token: must be at least 24 characters (this one has 5): use a random one, e.g. `openssl rand -hex 24`",
			`config: admin.tokens[3].name: must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit, got "bad name!"`,
		}},
		{"exposed admin listener", "[admin]\nlisten = \"0.0.0.0:1986\"\n", []string{
			`config: admin.listen: "0.0.0.0:1986" can be reached from other machines: set admin.token or admin.token_file explicitly (a generated token is only for an admin listener on loopback)`,
		}},
		{"exposed by name", "[admin]\nlisten = \"admin.example:1986\"\n[[admin.tokens]]\nname = \"ops\"\nscope = \"admin\"\ntoken = \"0123456789abcdef0123456789abcdef\"\n", []string{
			`config: admin.listen: "admin.example:1986" can be reached from other machines: set admin.token or admin.token_file explicitly (a generated token is only for an admin listener on loopback)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFile(t, tc.file)
			if got := problems(err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestAdminListenExposure(t *testing.T) {
	for _, tc := range []struct {
		file string
		ok   bool
	}{
		{"[admin]\nlisten = \"127.0.0.1:1986\"\n", true},
		{"[admin]\nlisten = \"[::1]:1986\"\n", true},
		{"[admin]\nlisten = \"localhost:1986\"\n", true},
		{"[admin]\nlisten = \"127.8.9.10:1986\"\n", true},
		{"[admin]\nlisten = \":1986\"\n", false},
		{"[admin]\nlisten = \"[::]:1986\"\n", false},
		{"[admin]\nlisten = \"192.0.2.7:1986\"\n", false},
		{"[admin]\nlisten = \"0.0.0.0:1986\"\ntoken = \"anything-the-operator-chose\"\n", true},
		{"[admin]\nlisten = \"0.0.0.0:1986\"\ntoken_file = \"/etc/limiterd/admin.token\"\n", true},
	} {
		_, err := loadFile(t, tc.file)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err = %v, want ok %v", tc.file, err, tc.ok)
		}
	}
	// The environment is explicit too.
	if _, err := loadFile(t, "[admin]\nlisten = \"0.0.0.0:1986\"\n", "LIMITERD_ADMIN__TOKEN=from-the-environment"); err != nil {
		t.Errorf("token from the environment: %v", err)
	}
}

func TestPathsRelativeToTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "etc", "config.toml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	file := `
[server]
data_dir = "state"
[admin]
token_file = "secrets/admin.token"
[[admin.tokens]]
name = "nginx"
scope = "data"
token_file = "nginx.token"
[[admin.tokens]]
name = "abs"
scope = "read"
token_file = "/etc/limiterd/abs.token"
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c := load(t, config.Source{Path: path, Required: true})
	etc := filepath.Dir(path)
	if c.Server.DataDir != filepath.Join(etc, "state") {
		t.Errorf("data_dir = %q, want it in %s", c.Server.DataDir, etc)
	}
	if c.Admin.TokenFile != filepath.Join(etc, "secrets/admin.token") {
		t.Errorf("admin.token_file = %q", c.Admin.TokenFile)
	}
	if c.Admin.Tokens[0].TokenFile != filepath.Join(etc, "nginx.token") || c.Admin.Tokens[1].TokenFile != "/etc/limiterd/abs.token" {
		t.Errorf("tokens = %+v", c.Admin.Tokens)
	}

	// The default data_dir too: "data" beside the file.
	if err := os.WriteFile(path, []byte("[log]\nlevel = \"debug\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c = load(t, config.Source{Path: path, Required: true})
	if c.Server.DataDir != filepath.Join(etc, "data") {
		t.Errorf("default data_dir = %q, want %s", c.Server.DataDir, filepath.Join(etc, "data"))
	}

	// The environment and the flag: relative to the working directory.
	wd := must(os.Getwd())
	c = load(t, config.Source{Path: path, Required: true, Env: []string{"LIMITERD_SERVER__DATA_DIR=envdir"}})
	if c.Server.DataDir != filepath.Join(wd, "envdir") {
		t.Errorf("data_dir from the environment = %q, want %s", c.Server.DataDir, filepath.Join(wd, "envdir"))
	}
	c = load(t, config.Source{Path: path, Required: true, DataDir: "flagdir"})
	if c.Server.DataDir != filepath.Join(wd, "flagdir") {
		t.Errorf("data_dir from -data-dir = %q", c.Server.DataDir)
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "  0123456789abcdef0123456789abcdef\n", 0o600)
	if tok, err := config.ReadTokenFile("k", good); err != nil || tok != "0123456789abcdef0123456789abcdef" {
		t.Errorf("good file: %q, %v", tok, err)
	}
	group := write("group", "0123456789abcdef0123456789abcdef\n", 0o640)
	if _, err := config.ReadTokenFile("k", group); err != nil {
		t.Errorf("a group-readable file: %v", err)
	}
	for _, tc := range []struct{ path, want string }{
		{write("world", "0123456789abcdef0123456789abcdef", 0o644), "config: admin.token_file: token file " + filepath.Join(dir, "world") + ": every user of this machine can access it (mode 0644): chmod 600 it (or 640 with the group limiterd runs as)"},
		{write("short", "tooshort\n", 0o600), "config: admin.token_file: token file " + filepath.Join(dir, "short") + ": the token has 8 characters, fewer than 24: use a random one, e.g. `openssl rand -hex 24 > " + filepath.Join(dir, "short") + "`"},
		{write("empty", "\n\n", 0o600), "config: admin.token_file: token file " + filepath.Join(dir, "empty") + ": empty: it must hold the token"},
		{write("lines", "0123456789abcdef0123456789abcdef\nsecond\n", 0o600), "config: admin.token_file: token file " + filepath.Join(dir, "lines") + ": holds more than one line: it must hold the token alone"},
		{filepath.Join(dir, "absent"), "config: admin.token_file: token file " + filepath.Join(dir, "absent") + ": no such file or directory"},
		{dir, "config: admin.token_file: token file " + dir + ": not a regular file"},
	} {
		_, err := config.ReadTokenFile("admin.token_file", tc.path)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.path, err, tc.want)
		}
	}

	c, err := loadFile(t, `
[[admin.tokens]]
name = "inline"
scope = "read"
token = "0123456789abcdef0123456789abcdef"
[[admin.tokens]]
name = "nginx"
scope = "data"
token_file = "`+good+`"
[[admin.tokens]]
name = "leaky"
scope = "admin"
token_file = "`+filepath.Join(dir, "world")+`"
`)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := c.TokenSecrets()
	if err == nil || !strings.Contains(err.Error(), "config: admin.tokens[2].token_file: token file "+filepath.Join(dir, "world")+": every user") {
		t.Errorf("TokenSecrets error = %v", err)
	}
	if len(toks) != 2 || toks[1].Token != "0123456789abcdef0123456789abcdef" || toks[1].Name != "nginx" || toks[1].Scope != "data" {
		t.Errorf("tokens = %+v", toks)
	}
	// Redacted hides inline secrets; the TOML output keeps the tokens.
	r := c.Redacted()
	if r.Admin.Tokens[0].Token != "REDACTED" || c.Admin.Tokens[0].Token == "REDACTED" {
		t.Errorf("redacted %+v, original %+v", r.Admin.Tokens, c.Admin.Tokens)
	}
	b := must(r.TOML())
	if !strings.Contains(string(b), "[[admin.tokens]]\nname = 'nginx'\nscope = 'data'\ntoken_file = '"+good+"'") {
		t.Errorf("TOML output:\n%s", b)
	}
}
