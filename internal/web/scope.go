package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Scope is what a bearer token may do on the admin listener (docs/api.md,
// "Authentication and scopes"; decision 106). The order matters only for
// display; Allows says what a scope permits.
type Scope uint8

// The scopes.
const (
	// ScopeData may make the data-plane calls a node and its proxies make
	// (dataRoutes), nothing else.
	ScopeData Scope = iota + 1
	// ScopeRead may read: every GET and HEAD but the backup and the
	// data-plane calls, and the dashboard without changing anything.
	ScopeRead
	// ScopeAdmin may do everything.
	ScopeAdmin
)

// String returns the scope's name as config.toml spells it.
func (s Scope) String() string {
	switch s {
	case ScopeData:
		return "data"
	case ScopeRead:
		return "read"
	case ScopeAdmin:
		return "admin"
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// ParseScope returns the scope named s: "admin", "read" or "data".
func ParseScope(s string) (Scope, error) {
	switch s {
	case "admin":
		return ScopeAdmin, nil
	case "read":
		return ScopeRead, nil
	case "data":
		return ScopeData, nil
	}
	return 0, fmt.Errorf("scope %q: must be admin, read or data", s)
}

// Token is a bearer token the admin listener accepts.
type Token struct {
	// Name names the token in the audit log ("token:<name>") and the
	// logs; "" is the main admin token ([admin] token), whose actor stays
	// "api-token".
	Name   string
	Scope  Scope
	Secret string
}

// actor is the audit actor of requests made with t.
func (t Token) actor() string {
	if t.Name == "" {
		return actorToken
	}
	return "token:" + t.Name
}

// label names t in messages: "the admin token" or `token "nginx"`.
func (t Token) label() string {
	if t.Name == "" {
		return "the admin token"
	}
	return fmt.Sprintf("token %q", t.Name)
}

// dataRoutes are the calls a data token may make, by method and path (the
// throttle's observe arrives with the adaptive throttle; listed here so
// that it has its scope whenever it is mounted).
var dataRoutes = map[string]bool{
	"POST /api/v1/check":            true,
	"POST /api/v1/release":          true,
	"GET /api/v1/check/auth":        true,
	"POST /api/v1/throttle":         true,
	"GET /api/v1/throttle":          true,
	"POST /api/v1/throttle/observe": true,
}

// adminReads are the GETs a read token may not make: the backup is a
// copy of everything, sessions included. The Go runtime's profiles
// (pprofPrefix) are admin's too.
var adminReads = map[string]bool{
	"GET /api/v1/backup": true,
}

// requiredScope returns the scope a request needs besides admin: data for
// the data-plane calls, read for the other GETs and HEADs (the backup
// aside), admin for everything else.
func requiredScope(method, path string) Scope {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	key := method + " " + path
	switch {
	case dataRoutes[key]:
		return ScopeData
	case adminReads[key], strings.HasPrefix(path, pprofPrefix):
		return ScopeAdmin
	case method == http.MethodGet:
		return ScopeRead
	}
	return ScopeAdmin
}

// Allows reports whether a token of scope s may make a request needing
// need: admin may do everything, the others exactly their own kind.
func (s Scope) Allows(need Scope) bool { return s == ScopeAdmin || s == need }

// tokenSet is the tokens in force; SetTokens replaces it whole.
type tokenSet struct {
	list []Token
	// byPrint finds a token by its fingerprint (a dashboard session's).
	byPrint map[string]Token
}

// fingerprint identifies a token without holding it: the first 128 bits
// of its SHA-256, in hex. Sessions keep it (in the database too) to end
// when their token is rotated or removed; "" for no token.
func fingerprint(secret string) string {
	if secret == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:16])
}

// tokenOf returns the token in force whose fingerprint is print.
func (s *Server) tokenOf(print string) (Token, bool) {
	set := s.tokens.Load()
	if set == nil || print == "" {
		return Token{}, false
	}
	t, ok := set.byPrint[print]
	return t, ok
}

// errTokens are the problems SetTokens refuses.
var errTokens = errors.New("tokens")

// SetTokens replaces the tokens the admin listener accepts (at start and
// on SIGHUP): admin is the main admin token, named the others. It refuses
// what CheckTokens refuses; then the tokens in force stay.
func (s *Server) SetTokens(admin string, named []Token) error {
	set, err := newTokenSet(admin, named)
	if err != nil {
		return err
	}
	s.tokens.Store(set)
	return nil
}

// CheckTokens reports whether SetTokens would take these tokens: it
// refuses an empty secret, a name given twice, a secret given twice (the
// scope of a request would be ambiguous), a scope that is not one of the
// three, and no token at all.
func CheckTokens(admin string, named []Token) error {
	_, err := newTokenSet(admin, named)
	return err
}

func newTokenSet(admin string, named []Token) (*tokenSet, error) {
	list := make([]Token, 0, len(named)+1)
	if admin != "" {
		list = append(list, Token{Scope: ScopeAdmin, Secret: admin})
	}
	names := map[string]bool{}
	for _, t := range named {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("%w: a named token without a name", errTokens)
		case names[t.Name]:
			return nil, fmt.Errorf("%w: two tokens named %q", errTokens, t.Name)
		case t.Secret == "":
			return nil, fmt.Errorf("%w: token %q has no secret", errTokens, t.Name)
		case t.Scope < ScopeData || t.Scope > ScopeAdmin:
			return nil, fmt.Errorf("%w: token %q has no valid scope", errTokens, t.Name)
		}
		names[t.Name] = true
		list = append(list, t)
	}
	for i := range list {
		for j := range i {
			if list[i].Secret == list[j].Secret {
				return nil, fmt.Errorf("%w: %s and %s have the same secret", errTokens, list[j].label(), list[i].label())
			}
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: no token at all", errTokens)
	}
	set := &tokenSet{list: list, byPrint: make(map[string]Token, len(list))}
	for _, t := range list {
		set.byPrint[fingerprint(t.Secret)] = t
	}
	return set, nil
}

// match returns the token whose secret got is, comparing with every token
// in constant time (no early exit: the time says nothing of which matched
// or how much of a secret was right).
func (s *Server) match(got string) (Token, bool) {
	got = strings.TrimSpace(got)
	set := s.tokens.Load()
	if set == nil || got == "" {
		return Token{}, false
	}
	found := -1
	for i, t := range set.list {
		if subtle.ConstantTimeCompare([]byte(got), []byte(t.Secret)) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return set.list[found], true
}

// bearer returns the token of a request's Authorization: Bearer header;
// present says whether the request had one at all.
func (s *Server) bearer(r *http.Request) (tok Token, present, ok bool) {
	got, present := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !present {
		return Token{}, false, false
	}
	tok, ok = s.match(got)
	return tok, true, ok
}

// tokenOfRequest returns the name of the token of r's Authorization
// header ("" for the main admin token) and its scope, for the API's answer
// of who is asking.
func (s *Server) tokenOfRequest(r *http.Request) (name, scope string) {
	tok, _, _ := s.bearer(r)
	return tok.Name, tok.Scope.String()
}

type actorKey struct{}

// requestActor is the audit actor of r: its token's, or the session's on
// the dashboard. Handlers behind requireToken always have one.
func requestActor(r *http.Request) string {
	if a, ok := r.Context().Value(actorKey{}).(string); ok {
		return a
	}
	return actorToken
}

// withActor returns r carrying actor for requestActor.
func withActor(r *http.Request, actor string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), actorKey{}, actor))
}

// requireToken admits requests carrying a token whose scope allows them:
// 401 without a known token, 403 outside its scope. A wrong token is
// counted and, past a few a minute from one address, answered after a
// delay; a right one is never refused for its address (decision 192): the
// callers of the check and throttle APIs share their address with
// whatever else runs there.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, present, ok := s.bearer(r)
		if !ok {
			if present {
				s.wait(r.Context(), s.fails.failed(clientIP(r), true))
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="limiterd"`)
			writeError(w, http.StatusUnauthorized, "a valid token is required (Authorization: Bearer <token>)", "")
			return
		}
		if need := requiredScope(r.Method, r.URL.Path); !tok.Scope.Allows(need) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s has scope %s, which does not allow %s %s (it needs scope %s or admin)", tok.label(), tok.Scope, r.Method, r.URL.Path, need), "")
			return
		}
		next.ServeHTTP(w, withActor(r, tok.actor()))
	})
}

// allowed checks a dashboard request against the viewer's scope: a read
// token (or its session) sees every page and may log out, but changes
// nothing; a data token sees nothing. It answers 403 itself and returns
// false when the request is refused.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, v viewer) bool {
	sc := v.scope()
	switch {
	case sc == ScopeAdmin:
		return true
	case sc == ScopeRead && (r.Method == http.MethodGet || r.Method == http.MethodHead || r.URL.Path == "/logout"):
		return true
	case sc == ScopeRead:
		s.ui.Error(w, r, http.StatusForbidden, "This login is read-only (a token of scope read): it may look at every page but change nothing.")
	default:
		s.ui.Error(w, r, http.StatusForbidden, "A data token may make the data-plane calls only (check, release, check/auth, throttle), not open the dashboard.")
	}
	return false
}
