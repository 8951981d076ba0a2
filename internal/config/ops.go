package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/limiterd/limiterd/limiter"
)

// Log is the [log] table: how limiterd logs.
type Log struct {
	Format string // "text" or "json" (log/slog's handlers)
	Level  string // "debug", "info", "warn" or "error"
	// Rejections says which 429s and 403s are logged: "off", "sampled"
	// (at most one line per peer and group a minute, with the count since
	// the last) or "all".
	Rejections string
}

// The scopes of admin tokens (docs/api.md, "Authentication and scopes").
const (
	// ScopeAdmin may do everything.
	ScopeAdmin = "admin"
	// ScopeRead may read: every GET but the backup and the data-plane
	// calls, and the dashboard read-only.
	ScopeRead = "read"
	// ScopeData may make only the data-plane calls a node and its proxies
	// make: check, release, check/auth, throttle, throttle/observe.
	ScopeData = "data"
)

// MinTokenLen is the shortest token limiterd accepts from a token file or
// an [[admin.tokens]] table: 24 characters (a generated token has 48 hex
// digits, 192 bits).
const MinTokenLen = 24

// Token is one [[admin.tokens]] table: a named bearer token with a scope.
// Exactly one of Token and TokenFile is set.
type Token struct {
	Name      string // shown in the audit log as "token:<name>"
	Scope     string // ScopeAdmin, ScopeRead or ScopeData
	Token     string // the secret, given inline
	TokenFile string // the file holding the secret (mode without access for others)
}

// tokenName is what a token's name may be: it goes into audit entries and
// log lines as it is.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// buildTokens reads and checks the [[admin.tokens]] tables.
func buildTokens(b *builder, _ string, v any) {
	list, _ := v.([]tree)
	c := b.c
	seen := map[string]int{}
	for i, tt := range list {
		key := fmt.Sprintf("admin.tokens[%d]", i)
		var tok Token
		tok.Name, _ = tt["name"].(string)
		tok.Scope, _ = tt["scope"].(string)
		tok.Token, _ = tt["token"].(string)
		tok.TokenFile, _ = tt["token_file"].(string)
		switch _, present := tt["name"]; {
		case !present:
			b.p.add(key+".name", "required: it names the token in the audit log")
		case !tokenName.MatchString(tok.Name):
			b.p.addf(key+".name", "must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit, got %q", tok.Name)
		default:
			if j, dup := seen[tok.Name]; dup {
				b.p.addf(key+".name", "%q is also admin.tokens[%d].name: each token needs its own name", tok.Name, j)
			}
			seen[tok.Name] = i
		}
		switch _, present := tt["scope"]; {
		case !present:
			b.p.add(key+".scope", "required: admin, read or data")
		case tok.Scope != ScopeAdmin && tok.Scope != ScopeRead && tok.Scope != ScopeData:
			b.p.addf(key+".scope", "must be one of admin, read, data, got %q", tok.Scope)
		}
		switch {
		case tok.Token != "" && tok.TokenFile != "":
			b.p.add(key+".token_file", "set only one of token and token_file")
		case tok.Token == "" && tok.TokenFile == "":
			b.p.add(key+".token", "set token or token_file (a file keeps the secret out of the config)")
		case tok.Token != "" && len(tok.Token) < MinTokenLen:
			b.p.addf(key+".token", "must be at least %d characters (this one has %d): use a random one, e.g. `openssl rand -hex 24`", MinTokenLen, len(tok.Token))
		case tok.Token != "" && tok.Token != strings.TrimSpace(tok.Token):
			b.p.add(key+".token", "must not begin or end with white space")
		}
		c.Admin.Tokens = append(c.Admin.Tokens, tok)
	}
}

// checkAdminExposure refuses an admin listener others can reach with a
// token nobody chose.
func checkAdminExposure(b *builder) {
	c := b.c
	if c.Admin.Listen != "" && c.Admin.Token == "" && c.Admin.TokenFile == "" && !loopbackListen(c.Admin.Listen) && !b.p.has("admin.listen") {
		b.p.addErr("admin.listen", fmt.Sprintf("%q can be reached from other machines: set admin.token or admin.token_file explicitly (a generated token is only for an admin listener on loopback)", c.Admin.Listen), upgradeExposedAdmin)
	}
}

// has reports whether a problem with key was recorded.
func (p *problems) has(key string) bool {
	for _, e := range p.errs {
		if e.Field == key {
			return true
		}
	}
	return false
}

// loopbackListen reports whether a listen address (host:port) takes
// connections from this machine only: a loopback IP or "localhost". An
// empty host (every interface) and other names are not.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// resolvePaths makes the paths of the configuration absolute:
// server.data_dir, admin.token_file and each [[admin.tokens]] token_file.
// A relative path the config file gives (or the built-in default under
// it) is relative to the file's directory (docs/config.md, "Paths"); one
// given by the environment or a flag, or with no file at all, is relative
// to the working directory, as paths typed in a shell are. Absolute paths make the logs unambiguous and
// check-config's output mean the same wherever it is saved.
func resolvePaths(c *Config, file string, origin map[string]string, dataDirFlag bool) {
	dir := ""
	if file != "" {
		dir = filepath.Dir(file)
	}
	fix := func(key string, p *string) {
		if *p == "" || filepath.IsAbs(*p) {
			return
		}
		_, fromEnv := origin[key]
		if dir != "" && !fromEnv && !(key == "server.data_dir" && dataDirFlag) {
			*p = filepath.Join(dir, *p)
		}
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	fix("server.data_dir", &c.Server.DataDir)
	fix("admin.token_file", &c.Admin.TokenFile)
	for i := range c.Admin.Tokens {
		fix("", &c.Admin.Tokens[i].TokenFile)
	}
}

// ReadTokenFile reads the token in the file at path, for the config key
// named: surrounding white space is dropped. It refuses, naming the file,
// a file that users other than its owner and group can read or change
// (chmod 600 or 640 it) and a token shorter than MinTokenLen. The error is
// the problem of that key, "config: <key>: token file <path>: …".
func ReadTokenFile(key, path string) (string, error) {
	failWith := func(u *Upgrade, format string, args ...any) (string, error) {
		fe := &limiter.FieldError{Field: key, Problem: fmt.Sprintf("token file %s: ", path) + fmt.Sprintf(format, args...)}
		if u != nil {
			fe.Err = u
		}
		return "", wrap(fe)
	}
	fail := func(format string, args ...any) (string, error) { return failWith(nil, format, args...) }
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fail("%v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail("%v", err)
	}
	if !fi.Mode().IsRegular() {
		return fail("not a regular file")
	}
	if perm := fi.Mode().Perm(); perm&0o007 != 0 {
		return failWith(upgradeTokenFiles, "every user of this machine can access it (mode %04o): chmod 600 it (or 640 with the group limiterd runs as)", perm)
	}
	b := make([]byte, 4096)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return fail("empty: it must hold the token")
	}
	t := strings.TrimSpace(string(b[:n]))
	switch {
	case t == "":
		return fail("empty: it must hold the token")
	case strings.ContainsAny(t, "\r\n"):
		return fail("holds more than one line: it must hold the token alone")
	case len(t) < MinTokenLen:
		return failWith(upgradeTokenFiles, "the token has %d characters, fewer than %d: use a random one, e.g. `openssl rand -hex 24 > %s`", len(t), MinTokenLen, path)
	}
	return t, nil
}

// TokenSecrets returns the [[admin.tokens]] with the secret of each in
// Token, read from its token_file when it has one (ReadTokenFile). The
// daemon calls it at start and on every SIGHUP; the errors join one problem
// per bad file.
func (c *Config) TokenSecrets() ([]Token, error) {
	var errs []error
	out := make([]Token, 0, len(c.Admin.Tokens))
	for i, t := range c.Admin.Tokens {
		if t.TokenFile != "" {
			s, err := ReadTokenFile(fmt.Sprintf("admin.tokens[%d].token_file", i), t.TokenFile)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			t.Token = s
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}
