package limiterd_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is this module's path.
const module = "github.com/limiterd/limiterd"

// arrows is the house of STYLE.md: for every package of the module, the
// packages of the module it may import (its own sub-packages aside). A
// package missing here is an error, so a new one must take its place in
// the house. "*" is cmd/limiterd and the benchmarks, which wire
// everything.
var arrows = map[string][]string{
	"":        {}, // the module's root: the shipped config.toml
	"limiter": {},
	// The algorithms of SPEC §6.2 as pure step functions: the core's own
	// sub-package, pure like it (limiter and a cluster backend run them).
	"limiter/algo": {},
	// Peer identity and address lists, split off the core for its size;
	// pure like it (peerid uses peerkey and prefixset).
	"limiter/peerid":    {"limiter/peerkey", "limiter/prefixset"},
	"limiter/peerkey":   {},
	"limiter/prefixset": {},
	"limiter/schedule":  {},
	// A limiter group's counters and gauges, split off the core for its
	// size; pure like it.
	"limiter/groupstats": {},
	// The names of arweave.version and concurrency_scope, split off the
	// core for its size; pure like it.
	"limiter/arweavenames": {},
	// The in-flight counts of worker shards (SPEC §6.3, concurrency_scope
	// "shard"), split off the core for its size; pure like it.
	"limiter/shardcount": {},
	// The timestamp ring of the local backend's sliding windows, split off
	// the core for its size; pure like it.
	"limiter/tsring": {},
	// The Arweave 2.9.7 rate-limit header fields as a pure function of a
	// decision's numbers; pure like the core.
	"limiter/ratelimit": {},
	// The throttle imports nothing of the module: it takes its path
	// patterns compiled (Config.Compile) and owns its snapshot.
	"throttle":   {},
	"live":       {"limiter"},
	"insight":    {"limiter", "ticker"},
	"migrations": {},
	"store":      {"limiter", "live", "migrations"},
	"persist":    {"limiter", "store", "ticker"},
	"proxy":      {"limiter", "live", "insight", "ticker", "jsonbody"},
	"web":        {"limiter", "throttle", "live", "insight", "templates", "static", "ticker", "jsonbody"},
	// The outbound throttle's HTTP API, split off web for its size: the
	// throttle and JSON bodies only.
	"web/throttleapi": {"throttle", "jsonbody"},
	// The Prometheus collectors, split off web for its size: they read the
	// limiter, the proxy's counters (insight) and the throttle.
	"web/metrics": {"limiter", "insight", "throttle"},
	// The admin listener's connection cap (admin.max_conns), split off
	// web for its size: net/http's connection states only.
	"web/conncap":    {},
	"templates":      {"limiter", "insight"},
	"static":         {},
	"config":         {"", "limiter", "throttle"},
	"ticker":         {},
	"jsonbody":       {},
	"throttleclient": {},
	"cluster":        {"limiter"}, // SPEC §12: a limiter.Backend on Redis
	"redistest":      {},          // tests' redis-server, as httptest is for HTTP
	"cmd/limiterd":   {"*"},
	"bench":          {"*"},
	// The chaos drivers (issue 18) run the built binary and Redis, and
	// read the bbolt file between kills: they wire everything, as bench.
	"chaos": {"*"},
}

// pure are the packages of the core: the standard library only, plus (for
// a sub-package of limiter) the other pure sub-packages of its own core.
var pure = []string{"limiter", "limiter/algo", "limiter/arweavenames", "limiter/groupstats", "limiter/shardcount", "limiter/peerid", "limiter/peerkey", "limiter/prefixset", "limiter/schedule", "limiter/tsring", "limiter/ratelimit", "throttle"}

// never are arrows STYLE.md names as forbidden, checked on the full
// dependency closure (not only direct imports).
var never = [][2]string{{"store", "web"}, {"web", "store"}, {"proxy", "web"}, {"web", "proxy"}, {"templates", "web"}}

type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
	Deps       []string
	GoFiles    []string
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

// house returns the arrows entry of the package p (bench/cmd/x counts as
// bench).
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

// TestHouse checks every package's imports against STYLE.md's house, the
// core's purity on its whole dependency closure, and the forbidden arrows.
func TestHouse(t *testing.T) {
	for _, p := range listPackages(t) {
		name, _ := rel(p.ImportPath)
		entry, ok := house(name)
		if !ok {
			t.Errorf("package %q has no place in the house (add it to arrows in house_test.go, and to STYLE.md)", name)
			continue
		}
		allowed := arrows[entry]
		for _, imp := range p.Imports {
			r, in := rel(imp)
			if !in || slices.Contains(allowed, "*") || r == entry || strings.HasPrefix(r, entry+"/") {
				continue
			}
			// A package may import the sub-packages of one it may import
			// (limiter → limiter/algo), whatever their own place.
			if !slices.ContainsFunc(allowed, func(a string) bool { return r == a || strings.HasPrefix(r, a+"/") }) {
				t.Errorf("%s imports %s: not an arrow of the house (allowed: %v)", name, r, allowed)
			}
		}
		if slices.Contains(pure, name) {
			for _, d := range p.Deps {
				first, _, _ := strings.Cut(d, "/")
				if r, in := rel(d); in {
					// The core's packages depend on the pure packages of
					// their own core only (limiter on limiter/algo, one
					// sub-package of limiter on another): throttle, which
					// STYLE.md lets import limiter, takes its patterns
					// compiled (Config.Compile) instead, so that limiter
					// may have sub-packages without the throttle depending
					// on them.
					root, _, _ := strings.Cut(name, "/")
					if own := r == name || strings.HasPrefix(r, name+"/") ||
						(strings.HasPrefix(r, root+"/") && slices.Contains(pure, r)); !own {
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
					t.Errorf("%s depends on %s: STYLE.md forbids that arrow", n[0], n[1])
				}
			}
		}
	}
}

// Size limits of hand-written code (STYLE.md: no file over ~600 lines, no
// package over ~3k). A package's size counts its lines of code (comments
// and blank lines aside, as cloc does); a file's, all its lines.
const (
	maxFileLines   = 650
	maxPackageCode = 3300
)

// TestHouseSizes keeps files and packages within the house's sizes.
// Generated templ files are not hand-written and do not count.
func TestHouseSizes(t *testing.T) {
	for _, p := range listPackages(t) {
		code := 0
		files, _ := filepath.Glob(filepath.Join(p.Dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_templ.go") {
				continue
			}
			total, c := countLines(t, f)
			if total > maxFileLines {
				t.Errorf("%s: %d lines, over %d: split it by what it does", f, total, maxFileLines)
			}
			if !strings.HasSuffix(f, "_test.go") {
				code += c
			}
		}
		if code > maxPackageCode {
			t.Errorf("%s: %d lines of code, over %d", p.ImportPath, code, maxPackageCode)
		}
	}
}

// countLines returns a file's lines and its lines of code.
func countLines(t *testing.T, path string) (total, code int) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		total++
		if s := strings.TrimSpace(sc.Text()); s != "" && !strings.HasPrefix(s, "//") {
			code++
		}
	}
	return total, code
}
