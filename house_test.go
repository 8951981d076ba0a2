package limiterd_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is this module's path.
const module = "github.com/limiterd/limiterd"

// arrows is the house (CONTRIBUTING.md, "The house"): for every package of
// the module, the packages of the module it may import (its own
// sub-packages aside). A package missing here is an error, so a new one
// must take its place in the house. "*" is for the programs, which wire
// everything.
var arrows = map[string][]string{
	"": {}, // the module's root: the shipped config.toml

	// The public core: the limiter's API and policy, who the peer is, the
	// algorithms, the rate-limit header fields. Standard library only
	// (pure, below).
	"limiter":      {"limiter/algo", "limiter/peer", "limiter/ratelimit"},
	"limiter/algo": {},
	"limiter/peer": {},
	// The Backend of one process's memory: an implementation of the seam
	// the core declares, pure like it.
	"limiter/memory":    {"limiter", "limiter/algo", "limiter/peer"},
	"limiter/ratelimit": {},
	// The public Go client of the outbound throttle.
	"throttleclient": {},

	// The daemon's packages, private to this module.
	"internal/throttle":   {"limiter"},
	"internal/live":       {"limiter"},
	"internal/insight":    {"limiter", "internal/ticker"},
	"internal/migrations": {},
	"internal/store":      {"limiter", "internal/live", "internal/migrations"},
	"internal/persist":    {"limiter", "internal/store", "internal/ticker"},
	"internal/proxy":      {"limiter", "internal/insight", "internal/ticker", "internal/jsonbody"},
	// The admin listener: auth, bounds, errors, health, metrics; it
	// mounts its sub-packages api and ui, which never import it.
	"internal/web": {"limiter", "internal/throttle", "internal/live", "internal/insight", "internal/ticker", "internal/jsonbody", "internal/fleet"},
	// The admin listener's JSON API, the outbound throttle's calls among
	// its routes; who asks and how an error is answered come from web.
	"internal/web/api": {"limiter", "internal/throttle", "internal/live", "internal/insight", "internal/jsonbody", "internal/fleet"},
	// The dashboard's pages and forms; who looks at them and how an error
	// maps to a status come from web. Its templ components take plain
	// view data; its assets are embedded files.
	"internal/web/ui":           {"limiter", "internal/throttle", "internal/live", "internal/insight", "internal/jsonbody", "internal/fleet"},
	"internal/web/ui/templates": {"limiter"},
	"internal/web/ui/static":    {},
	// The admin listener for the tests of web, api and ui, as httptest is
	// for HTTP: a Server on the real store, with the data plane.
	"internal/webtest": {"limiter", "internal/limitertest", "internal/throttle", "internal/live", "internal/insight", "internal/store", "internal/proxy", "internal/web"},
	// The Prometheus collectors read the limiter, the proxy's counters
	// (insight) and the throttle.
	"internal/metrics":  {"limiter", "internal/insight", "internal/throttle"},
	"internal/config":   {"", "limiter", "internal/throttle"},
	"internal/ticker":   {},
	"internal/jsonbody": {"limiter"},
	// The daemon's clock: the wall clock's start, the monotonic clock's pace.
	"internal/clock": {},
	// Cluster mode: a limiter.Backend on Redis.
	"internal/cluster": {"limiter"},
	// Cluster mode's Replicator wired to the live state and its database.
	"internal/livereplica": {"limiter", "internal/cluster", "internal/live", "internal/store"},
	// What the tests share to drive a limiter: a fake clock, configs,
	// peers, a Limiter on the memory backend; for tests only.
	"internal/limitertest": {"limiter"},
	// What the instances of a cluster tell each other for people: their
	// summaries, on a board in Redis, read back as the fleet.
	"internal/fleet": {},
	// Tests' redis-server, as httptest is for HTTP.
	"internal/redistest": {},
	// The reliability suite's drivers run the built binary and Redis, and
	// read the bbolt file between kills: they wire everything.
	"internal/chaos": {"*"},
	"cmd/limiterd":   {"*"},
}

// pure are the packages of the core: the standard library only, plus the
// other pure packages of the core.
var pure = []string{"limiter", "limiter/algo", "limiter/memory", "limiter/peer", "limiter/ratelimit", "internal/throttle"}

// never are arrows the house forbids, checked on the full dependency
// closure (not only direct imports).
var never = [][2]string{
	{"internal/store", "internal/web"}, {"internal/web", "internal/store"},
	{"internal/proxy", "internal/web"}, {"internal/web", "internal/proxy"},
	{"internal/web/api", "internal/store"}, {"internal/web/api", "internal/proxy"},
	{"internal/web/ui", "internal/store"}, {"internal/web/ui", "internal/proxy"},
	{"internal/web/ui/templates", "internal/web"},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rel returns the module-relative name of a package path, ok false for a
// package outside the module.
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// house returns the arrows entry of the package p (internal/chaos/cmd/chaos
// counts as internal/chaos).
func house(p string) (string, bool) {
	for q := p; ; {
		if _, ok := arrows[q]; ok {
			return q, true
		}
		i := strings.LastIndexByte(q, '/')
		if i < 0 {
			return "", false
		}
		q = q[:i]
	}
}

// TestHouse checks every package's imports against the house, the core's
// purity on its whole dependency closure, and the forbidden arrows.
func TestHouse(t *testing.T) {
	for _, p := range listPackages(t) {
		name, _ := rel(p.ImportPath)
		entry, ok := house(name)
		if !ok {
			t.Errorf("package %q has no place in the house (add it to arrows in house_test.go, and to CONTRIBUTING.md)", name)
			continue
		}
		allowed := arrows[entry]
		for _, imp := range p.Imports {
			r, in := rel(imp)
			if !in || slices.Contains(allowed, "*") || r == entry || strings.HasPrefix(r, entry+"/") {
				continue
			}
			// A package may import the sub-packages of one it may import
			// (limiter → limiter/peer), whatever their own place.
			if !slices.ContainsFunc(allowed, func(a string) bool { return r == a || a != "" && strings.HasPrefix(r, a+"/") }) {
				t.Errorf("%s imports %s: not an arrow of the house (allowed: %v)", name, r, allowed)
			}
		}
		if slices.Contains(pure, name) {
			for _, d := range p.Deps {
				first, _, _ := strings.Cut(d, "/")
				if r, in := rel(d); in {
					if r != name && !slices.Contains(pure, r) {
						t.Errorf("core package %s depends on %s of the module", name, d)
					}
				} else if strings.Contains(first, ".") {
					t.Errorf("core package %s depends on %s: the core is standard library only", name, d)
				}
			}
		}
		for _, n := range never {
			if name != n[0] {
				continue
			}
			for _, d := range p.Deps {
				if r, in := rel(d); in && r == n[1] {
					t.Errorf("%s depends on %s: the house forbids that arrow", n[0], n[1])
				}
			}
		}
	}
}

// TestPrivateByDefault: the packages other programs may import are the
// ones the house names public (decision 182, "What is public"); every
// other package lives under internal/ or is a program.
func TestPrivateByDefault(t *testing.T) {
	public := []string{"limiter", "limiter/algo", "limiter/memory", "limiter/peer", "limiter/ratelimit", "throttleclient", ""}
	for _, p := range listPackages(t) {
		name, _ := rel(p.ImportPath)
		if name == "internal" || strings.HasPrefix(name, "internal/") || strings.HasPrefix(name, "cmd/") || slices.Contains(public, name) {
			continue
		}
		t.Errorf("package %s is importable by other programs: move it under internal/, or make it public in the house and in a decision record", name)
	}
}
