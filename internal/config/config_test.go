package config_test

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd"
	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/memory"
)

// writeFile writes content to a config file in a new temporary directory
// and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mustLoad loads src and fails the test on error.
func mustLoad(t *testing.T, src config.Source) (*config.Config, config.Info) {
	t.Helper()
	c, info, err := config.Load(src)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c, info
}

// loadFile loads content as a required config file, with env.
func loadFile(t *testing.T, content string, env ...string) (*config.Config, error) {
	t.Helper()
	c, _, err := config.Load(config.Source{Path: writeFile(t, content), Required: true, Env: env})
	return c, err
}

// arweaveThrottle is the outbound throttle table (docs/arweave-reference.md).
func arweaveThrottle() []config.ThrottleRule {
	return []config.ThrottleRule{
		{Type: "chunk", RPM: 12000, Paths: []string{"/chunk/**", "/chunk2/**"}},
		{Type: "data_sync_record", RPM: 40, Paths: []string{"/data_sync_record/**"}},
		{Type: "footprints", RPM: 200, Paths: []string{"/footprints/**"}},
		{Type: "recent_hash_list_diff", RPM: 240, Paths: []string{"/recent_hash_list_diff/**"}},
		{Type: "block_index", RPM: 2, Paths: []string{
			"/hash_list", "/hash_list2", "/block_index", "/block_index2", "/block/*/*/hash_list"}},
		{Type: "wallet_list", RPM: 2, Paths: []string{"/wallet_list", "/block/*/*/wallet_list"}},
		{Type: "get_vdf", RPM: 180, Paths: []string{"/vdf"}},
		{Type: "get_vdf_session", RPM: 60, Paths: []string{
			"/vdf/session", "/vdf2/session", "/vdf3/session", "/vdf4/session"}},
		{Type: "get_previous_vdf_session", RPM: 60, Paths: []string{
			"/vdf/previous_session", "/vdf2/previous_session", "/vdf4/previous_session"}},
	}
}

func TestEmbeddedDefaultIsTheArweaveReference(t *testing.T) {
	c, info := mustLoad(t, config.Source{})
	if info != (config.Info{EmbeddedOnly: true}) {
		t.Errorf("info = %+v, want embedded only", info)
	}
	if want := limiter.ArweaveGroups(); !reflect.DeepEqual(c.Groups, want) {
		t.Errorf("groups:\n got %+v\nwant %+v", c.Groups, want)
	}
	if len(c.Groups) != 10 {
		t.Errorf("%d groups, want the ten of docs/arweave-reference.md", len(c.Groups))
	}
	if want := limiter.ArweaveRoutes(); !reflect.DeepEqual(c.Routes.Rules, want) {
		t.Errorf("routes:\n got %+v\nwant %+v", c.Routes.Rules, want)
	}
	want := config.Config{
		Server: config.Server{Listen: "0.0.0.0:1985", Upstream: "http://127.0.0.1:1984", DataDir: must(filepath.Abs("data")), ShutdownTimeout: 15 * time.Second,
			MaxRequestBody: 64 << 20, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
			ClientBodyTimeout: 60 * time.Second, SendTimeout: 60 * time.Second, UpstreamConnectTimeout: 5 * time.Second,
			UpstreamHeaderTimeout: 60 * time.Second, UpstreamReadTimeout: 60 * time.Second, UpstreamMaxConns: 1024,
			MaxConns: 16384, MaxConnsPerIP: 512, HTTP2: true, HTTP2MaxConcurrentStreams: 100, HTTP2MaxHeaderListSize: 64 << 10,
			HTTP2ConnStreamRate: 1000, HTTP2PeerStreamRate: 2000, UpstreamProtocol: "http1",
			AnswerMemory: 512 << 10, AnswerMemoryTotal: 128 << 20, AnswerDisk: 1 << 30, AnswerDiskTotal: 4 << 30},
		Log:      config.Log{Format: "text", Level: "info", Rejections: "sampled"},
		Admin:    config.Admin{Listen: "127.0.0.1:1986", CheckLease: 30 * time.Second, AuditMaxEntries: 1_000_000, MaxConns: 1024, ExpensiveCallTimeout: 10 * time.Second, NowWindow: 30 * time.Second},
		Peers:    config.Peers{IPv6Prefix: 64, Exempt: []string{"127.0.0.1"}, MaxTracked: 1000000},
		Snapshot: config.Snapshot{Interval: 5 * time.Second},
		Routes:   config.Routes{Rules: limiter.ArweaveRoutes()},
		Groups:   limiter.ArweaveGroups(),
		Throttle: config.Throttle{
			Period: 30 * time.Second, RetryInterval: time.Second,
			DefaultType: "default", DefaultRPM: 900, Rules: arweaveThrottle(),
		},
		Cluster: config.Cluster{
			Backend: "local", Mode: "strict", OnFailure: "local", SyncInterval: 100 * time.Millisecond,
			Timeout: 50 * time.Millisecond, Lease: 10 * time.Second,
			Redis: config.Redis{Addrs: []string{"127.0.0.1:6379"}},
		},
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("default config:\n got %+v\nwant %+v", *c, want)
	}

	lc, err := c.Limiter()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := limiter.New(memory.New(), time.Unix(1700000000, 0), lc); err != nil {
		t.Errorf("the limiter refuses the default config: %v", err)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}; !reflect.DeepEqual(lc.Exempt, want) {
		t.Errorf("limiter exempt = %v, want %v", lc.Exempt, want)
	}
}

// TestShippedFileIsCommented checks that every key = value line of the
// tables that hold one key per line carries a comment (the route and
// throttle rules are documented in the comment block above them).
func TestShippedFileIsCommented(t *testing.T) {
	sc := bufio.NewScanner(bytes.NewReader(limiterd.DefaultConfig))
	inRule := false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "[["):
			inRule = true
		case strings.HasPrefix(line, "["):
			inRule = false
		case line == "" || strings.HasPrefix(line, "#") || inRule:
		case !strings.Contains(line, "#"):
			t.Errorf("config.toml:%d: key without a comment: %s", n, line)
		}
	}
}

func TestMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.toml")

	c, info := mustLoad(t, config.Source{Path: path})
	if info != (config.Info{EmbeddedOnly: true}) {
		t.Errorf("info = %+v, want embedded only", info)
	}
	if !reflect.DeepEqual(c.Groups, limiter.ArweaveGroups()) {
		t.Error("a missing optional file does not give the embedded default")
	}

	_, _, err := config.Load(config.Source{Path: path, Required: true})
	if err == nil {
		t.Fatal("a missing required file loads")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v is not fs.ErrNotExist", err)
	}
	errs := config.Errors(err)
	if len(errs) != 1 || errs[0].Field != path {
		t.Fatalf("errors = %v, want one naming %s", errs, path)
	}
	if want := "config: " + path + ": cannot read the config file: no such file or directory"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

func TestUnreadableFile(t *testing.T) {
	dir := t.TempDir() // a directory cannot be read as a file
	for _, required := range []bool{false, true} {
		_, _, err := config.Load(config.Source{Path: dir, Required: required})
		errs := config.Errors(err)
		if len(errs) != 1 || errs[0].Field != dir || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("required %v: err = %v", required, err)
		}
	}
}

func TestFileUsed(t *testing.T) {
	path := writeFile(t, "[server]\nlisten = \"127.0.0.1:2000\"\n")
	for _, required := range []bool{false, true} {
		c, info := mustLoad(t, config.Source{Path: path, Required: required})
		if info != (config.Info{UsedFile: path}) {
			t.Errorf("info = %+v, want the file", info)
		}
		if c.Server.Listen != "127.0.0.1:2000" {
			t.Errorf("listen = %q", c.Server.Listen)
		}
	}
}

func TestPrecedence(t *testing.T) {
	path := writeFile(t, `
[server]
upstream = "http://10.0.0.2:1984"
data_dir = "/from/file"
listen = "0.0.0.0:8000"

[http_api.limiter.general]
leaky_limit = 600
concurrency_limit = 10
`)
	env := []string{
		"LIMITERD_SERVER__UPSTREAM=http://10.0.0.3:1984",
		"LIMITERD_SERVER__DATA_DIR=/from/env",
		"LIMITERD_HTTP_API__LIMITER__GENERAL__LEAKY_LIMIT=900",
		"PATH=/usr/bin",          // not ours
		"SERVER__LISTEN=1.2.3.4", // no prefix
	}

	c, _ := mustLoad(t, config.Source{Path: path})
	if c.Server.Upstream != "http://10.0.0.2:1984" || c.Server.DataDir != "/from/file" ||
		c.Groups["general"].LeakyLimit != 600 || c.Server.ShutdownTimeout != 15*time.Second {
		t.Errorf("file over default: %+v, general %+v", c.Server, c.Groups["general"])
	}

	c, _ = mustLoad(t, config.Source{Path: path, Env: env})
	if c.Server.Upstream != "http://10.0.0.3:1984" || c.Server.DataDir != "/from/env" ||
		c.Groups["general"].LeakyLimit != 900 {
		t.Errorf("env over file: %+v, general %+v", c.Server, c.Groups["general"])
	}
	if c.Server.Listen != "0.0.0.0:8000" || c.Groups["general"].ConcurrencyLimit != 10 {
		t.Errorf("env dropped file values it does not set: %+v, general %+v", c.Server, c.Groups["general"])
	}

	c, _ = mustLoad(t, config.Source{Path: path, Env: env, DataDir: "/from/flag"})
	if c.Server.DataDir != "/from/flag" || c.Server.Upstream != "http://10.0.0.3:1984" {
		t.Errorf("flag over env: %+v", c.Server)
	}

	// The flag over the embedded default alone, too.
	c, _ = mustLoad(t, config.Source{DataDir: "/only/flag"})
	if c.Server.DataDir != "/only/flag" {
		t.Errorf("data dir = %q", c.Server.DataDir)
	}
}

func TestEnvironmentTypes(t *testing.T) {
	c, _ := mustLoad(t, config.Source{Env: []string{
		"LIMITERD_PEERS__EXEMPT=10.0.0.0/8, ::1",
		"LIMITERD_PEERS__TRUSTED_PROXIES=",
		"LIMITERD_PEERS__IPV6_PREFIX=48",
		"LIMITERD_ADMIN__CHECK_LEASE=1m",
		"LIMITERD_HTTP_API__LIMITER__CHUNK__IS_MANUAL_REDUCTION_DISABLED=true",
		"LIMITERD_HTTP_API__LIMITER__GET_VDF__MODE=dry_run",
		"LIMITERD_HTTP_API__LIMITER__FROM_ENV__LEAKY_LIMIT=7", // a new group
		"LIMITERD_throttle__default_rpm=60",                   // names are lower-cased anyway
		"LIMITERD_CLUSTER__REDIS__ADDRS=a:1,b:2",
	}})
	if want := []string{"10.0.0.0/8", "::1"}; !reflect.DeepEqual(c.Peers.Exempt, want) {
		t.Errorf("exempt = %q, want %q", c.Peers.Exempt, want)
	}
	if c.Peers.TrustedProxies != nil || c.Peers.IPv6Prefix != 48 || c.Admin.CheckLease != time.Minute {
		t.Errorf("peers %+v, admin %+v", c.Peers, c.Admin)
	}
	if !c.Groups["chunk"].ManualReductionDisabled || c.Groups["get_vdf"].Mode != limiter.ModeDryRun {
		t.Errorf("chunk %+v, get_vdf %+v", c.Groups["chunk"], c.Groups["get_vdf"])
	}
	want := limiter.ArweaveGroups()["general"]
	want.LeakyLimit = 7
	if c.Groups["from_env"] != want {
		t.Errorf("from_env = %+v, want general's values but leaky_limit %+v", c.Groups["from_env"], want)
	}
	if c.Throttle.DefaultRPM != 60 || !reflect.DeepEqual(c.Cluster.Redis.Addrs, []string{"a:1", "b:2"}) {
		t.Errorf("throttle %+v, redis %+v", c.Throttle, c.Cluster.Redis)
	}
}

func TestListsAreReplacedWhole(t *testing.T) {
	c, err := loadFile(t, `
[peers]
exempt = []

[[routes.rule]]
group = "chunk"
paths = ["/c/**"]

[[throttle.rule]]
type = "all"
rpm = 60
paths = ["/**"]
`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Peers.Exempt != nil {
		t.Errorf("exempt = %q, want empty", c.Peers.Exempt)
	}
	if want := []limiter.RouteRule{{Group: "chunk", Paths: []string{"/c/**"}}}; !reflect.DeepEqual(c.Routes.Rules, want) {
		t.Errorf("rules = %+v, want only the file's", c.Routes.Rules)
	}
	if want := []config.ThrottleRule{{Type: "all", RPM: 60, Paths: []string{"/**"}}}; !reflect.DeepEqual(c.Throttle.Rules, want) {
		t.Errorf("throttle rules = %+v, want only the file's", c.Throttle.Rules)
	}
	// The tables that hold the lists still merge key by key.
	if c.Peers.IPv6Prefix != 64 || c.Throttle.DefaultRPM != 900 {
		t.Errorf("peers %+v, throttle %+v", c.Peers, c.Throttle)
	}

	// An empty list of rules removes every shipped rule.
	c, err = loadFile(t, "[routes]\nrule = []\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Routes.Rules != nil {
		t.Errorf("rules = %+v, want none", c.Routes.Rules)
	}
}

func TestOmittedTablesInherit(t *testing.T) {
	c, err := loadFile(t, "[cluster]\nbackend = \"redis\"\n")
	if err != nil {
		t.Fatal(err)
	}
	def, _ := mustLoad(t, config.Source{})
	def.Cluster.Backend = "redis"
	// The default data_dir, "data", is relative to the file's directory.
	if !filepath.IsAbs(c.Server.DataDir) || filepath.Base(c.Server.DataDir) != "data" || c.Server.DataDir == def.Server.DataDir {
		t.Errorf("data_dir = %q, want data in the config file's directory", c.Server.DataDir)
	}
	def.Server.DataDir = c.Server.DataDir
	if !reflect.DeepEqual(c, def) {
		t.Errorf("a file setting one key changed others:\n got %+v\nwant %+v", c, def)
	}
}

func TestGroupInheritance(t *testing.T) {
	c, err := loadFile(t, `
[http_api.limiter.general]
leaky_limit = 900
leaky_tick_reduction = 300

[http_api.limiter.chunk]
leaky_limit = 7000

[http_api.limiter.uploads]
concurrency_limit = 4
mode = "dry_run"

[http_api.limiter.empty]
`)
	if err != nil {
		t.Fatal(err)
	}
	ar := limiter.ArweaveGroups()

	general := ar["general"]
	general.LeakyLimit, general.LeakyTickReduction = 900, 300
	if c.Groups["general"] != general {
		t.Errorf("general = %+v, want %+v", c.Groups["general"], general)
	}

	// A shipped group keeps its own defaults for the keys the file omits,
	// not general's.
	chunk := ar["chunk"]
	chunk.LeakyLimit = 7000
	if c.Groups["chunk"] != chunk {
		t.Errorf("chunk = %+v, want %+v", c.Groups["chunk"], chunk)
	}

	// A new group takes general's (merged) value for each omitted key.
	uploads := general
	uploads.ConcurrencyLimit, uploads.Mode = 4, limiter.ModeDryRun
	if c.Groups["uploads"] != uploads {
		t.Errorf("uploads = %+v, want %+v", c.Groups["uploads"], uploads)
	}
	if c.Groups["empty"] != general {
		t.Errorf("empty = %+v, want general's %+v", c.Groups["empty"], general)
	}
	if len(c.Groups) != 12 {
		t.Errorf("%d groups, want the ten shipped and two new", len(c.Groups))
	}
}

func TestRoundTrip(t *testing.T) {
	for _, src := range []config.Source{
		{},
		{Path: "testdata/custom.toml", Required: true},
		{Path: "testdata/custom.toml", Required: true, DataDir: "/flag", Env: []string{
			"LIMITERD_PEERS__EXEMPT=",
			"LIMITERD_HTTP_API__LIMITER__NEW__LEAKY_LIMIT=3",
			"LIMITERD_ADMIN__TOKEN=tok \"quoted\"\tand\\ more",
			"LIMITERD_ADMIN__TOKEN_FILE=",
		}},
	} {
		c, _ := mustLoad(t, src)
		b, err := c.TOML()
		if err != nil {
			t.Fatal(err)
		}
		c2, err := loadFile(t, string(b))
		if err != nil {
			t.Fatalf("%+v: the TOML output does not load: %v\n%s", src, err, b)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Errorf("%+v: round trip differs:\n got %+v\nwant %+v\n%s", src, c2, c, b)
		}
	}
}

func TestCustomFile(t *testing.T) {
	c, _ := mustLoad(t, config.Source{Path: "testdata/custom.toml", Required: true})
	if want := []limiter.RouteRule{
		{Group: "chunk", Paths: []string{"/chunk/**"}},
		{Group: "uploads", Paths: []string{"/tx", "/tx2"}, Methods: []string{"POST", "PUT"}, ReduceOnStatus: []int{200, 208}},
	}; !reflect.DeepEqual(c.Routes.Rules, want) {
		t.Errorf("rules = %+v", c.Routes.Rules)
	}
	if c.Throttle.Period != time.Minute || c.Throttle.RetryInterval != 500*time.Millisecond {
		t.Errorf("throttle = %+v", c.Throttle)
	}
	if c.Server.ShutdownTimeout != 90*time.Second || c.Admin.TokenFile != "/etc/limiterd/token" {
		t.Errorf("server %+v, admin %+v", c.Server, c.Admin)
	}

	lc, err := c.Limiter()
	if err != nil {
		t.Fatal(err)
	}
	wantTrusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	wantExempt := []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("::1/128")}
	if !reflect.DeepEqual(lc.TrustedProxies, wantTrusted) || !reflect.DeepEqual(lc.Exempt, wantExempt) ||
		lc.IPv6Prefix != 56 || lc.MaxTracked != 5000 || lc.Deny != nil ||
		!reflect.DeepEqual(lc.ExemptPaths, c.Routes.ExemptPaths) || !reflect.DeepEqual(lc.Routes, c.Routes.Rules) ||
		!reflect.DeepEqual(lc.Groups, c.Groups) {
		t.Errorf("limiter config = %+v", lc)
	}
	if _, err := limiter.New(memory.New(), time.Unix(1700000000, 0), lc); err != nil {
		t.Errorf("the limiter refuses it: %v", err)
	}
	// The limiter config shares nothing with c.
	lc.Routes[1].Paths[0] = "/changed"
	lc.Groups["uploads"] = limiter.GroupSettings{}
	if c.Routes.Rules[1].Paths[0] != "/tx" || c.Groups["uploads"].SlidingWindowLimit != 5 {
		t.Error("Limiter() shares memory with the Config")
	}
}

func TestRedacted(t *testing.T) {
	c, _ := mustLoad(t, config.Source{Path: "testdata/custom.toml", Required: true,
		Env: []string{"LIMITERD_ADMIN__TOKEN=secret-token", "LIMITERD_ADMIN__TOKEN_FILE="}})
	r := c.Redacted()
	b, err := r.TOML()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"secret-token", "s3cret"} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("redacted output holds %q", secret)
		}
	}
	if c.Admin.Token != "secret-token" || c.Cluster.Redis.Password != "s3cret" {
		t.Error("Redacted changed the original")
	}
	r.Routes.Rules[0].Paths[0] = "/x"
	if c.Routes.Rules[0].Paths[0] == "/x" {
		t.Error("Redacted shares memory with the original")
	}
}

func TestLimiterRefusesUnvalidatedPrefixes(t *testing.T) {
	c := &config.Config{Peers: config.Peers{Exempt: []string{"1.2.3.4", "10.0.0.1/8"}}}
	_, err := c.Limiter()
	if err == nil || err.Error() != `config: peers.exempt[1]: "10.0.0.1/8": host bits are set after /8; did you mean "10.0.0.0/8"?` {
		t.Errorf("err = %v", err)
	}
}

// Every key of a group table has its one-line help, its values' included.
func TestGroupKeyHelp(t *testing.T) {
	help := config.GroupKeyHelp()
	for _, k := range limiter.GroupKeys {
		if help[k] == "" {
			t.Errorf("no help for %s", k)
		}
	}
	if got := help["sliding_window_duration"]; got != "ms; length of the sliding window" {
		t.Errorf("sliding_window_duration: %q", got)
	}
	// A key's values are part of its help.
	if got := help["algorithm"]; !strings.HasPrefix(got, "what decides after the concurrency check (docs/limiting.md, \"Other algorithms\"): \"hybrid\": the Arweave node's") ||
		!strings.Contains(got, "; \"gcra\": the same admissions, kept as one time (TAT);") {
		t.Errorf("algorithm: %q", got)
	}
	if got := help["concurrency_scope"]; !strings.HasSuffix(got, "; \"shard\": those of every peer of its worker shard (2.9.7)") {
		t.Errorf("concurrency_scope: %q", got)
	}
	for k := range help {
		if !slices.Contains(limiter.GroupKeys, k) && k != limiter.KeyNumberOfWorkers && k != limiter.KeyConcurrencyScope {
			t.Errorf("help for %s, which is not a group key", k)
		}
	}
}
