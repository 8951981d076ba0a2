package config_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/limiter"
)

// errorLines returns the lines of a Load error, checking that each is one
// problem and reads "config: <key>: <problem>".
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	errs := config.Errors(err)
	lines := strings.Split(err.Error(), "\n")
	if len(errs) != len(lines) {
		t.Fatalf("%d problems for %d lines:\n%v", len(errs), len(lines), err)
	}
	for i, e := range errs {
		if lines[i] != "config: "+e.Field+": "+e.Problem || "config: "+e.Error() != lines[i] {
			t.Errorf("line %q is not the problem %+v", lines[i], e)
		}
	}
	return lines
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		env  []string
		want []string // exact lines, or "~regexp" for a line matching
	}{
		{
			name: "unknown key",
			file: "[server]\nupstrem = \"http://x:1\"\n",
			want: []string{"config: server.upstrem: unknown key"},
		},
		{
			name: "unknown table",
			file: "[serverr]\nlisten = \"1.2.3.4:1\"\n[http_api.limiters.general]\nleaky_limit = 1\n",
			want: []string{"config: http_api.limiters: unknown key", "config: serverr: unknown key"},
		},
		{
			// Found by FuzzLoad: the empty name gave the key "".
			name: "unknown keys that are not bare",
			file: "[\"\"]\n[server]\n\"a.b\" = 1\n",
			want: []string{`config: server."a.b": unknown key`, `config: "": unknown key`},
		},
		{
			name: "unknown group key",
			file: "[http_api.limiter.chunk]\nleaky_limt = 5\n",
			want: []string{"config: http_api.limiter.chunk.leaky_limt: unknown key"},
		},
		{
			name: "unknown key in a route rule",
			file: "[[routes.rule]]\ngroup = \"chunk\"\npaths = [\"/c\"]\npatsh = [\"/d\"]\n",
			want: []string{"config: routes.rule[0].patsh: unknown key"},
		},
		{
			name: "unknown key in a throttle rule",
			file: "[[throttle.rule]]\ntype = \"a\"\nrpm = 1\npaths = [\"/a\"]\nrmp = 2\n",
			want: []string{"config: throttle.rule[0].rmp: unknown key"},
		},
		{
			name: "wrong types",
			file: `
[server]
listen = 1985
[peers]
exempt = "127.0.0.1"
trusted_proxies = ["10.0.0.0/8", 7]
forwarded_header = "x-forwarded-for"
[snapshot]
interval = 5
[http_api.limiter.chunk]
leaky_limit = "450"
concurrency_limit = 1.5
is_manual_reduction_disabled = "no"
`,
			want: []string{
				"config: server.listen: must be a string, got integer 1985",
				"config: peers.trusted_proxies[1]: must be a string, got integer 7",
				`config: peers.exempt: must be an array of strings, got string "127.0.0.1"`,
				`config: snapshot.interval: must be a duration string such as "5s", got integer 5`,
				`config: http_api.limiter.chunk.leaky_limit: must be an integer, got string "450"`,
				"config: http_api.limiter.chunk.concurrency_limit: must be an integer, got float 1.5",
				`config: http_api.limiter.chunk.is_manual_reduction_disabled: must be true or false, got string "no"`,
			},
		},
		{
			name: "group values",
			file: `
[http_api.limiter.chunk]
leaky_limit = -1
concurrency_limit = 0
sliding_window_duration = 3000000000
mode = "enforcing"
`,
			want: []string{
				"config: http_api.limiter.chunk.sliding_window_duration: must be at most 2147483647, got 3000000000",
				"config: http_api.limiter.chunk.leaky_limit: must be an integer ≥ 0, got -1",
				"config: http_api.limiter.chunk.concurrency_limit: must be an integer > 0, got 0",
				`config: http_api.limiter.chunk.mode: "enforcing" is not one of enforce, dry_run, off`,
			},
		},
		{
			name: "group names",
			file: "[http_api.limiter.Chunk]\n[http_api.limiter.local_peers]\nleaky_limit = 1\n",
			want: []string{
				`config: http_api.limiter.Chunk: a group name uses a-z, 0-9, _ and - only, not 'C'`,
				"config: http_api.limiter.local_peers: local_peers is built in and cannot be configured",
			},
		},
		{
			name: "a group that is not a table",
			file: "[http_api.limiter]\nchunk = 5\n", // and the shipped routes name chunk
			want: []string{"config: http_api.limiter.chunk: must be a table, got integer 5"},
		},
		{
			name: "addresses",
			file: `
[server]
listen = "1985"
upstream = "127.0.0.1:1984"
[admin]
listen = "localhost:http"
[cluster.redis]
addrs = ["redis:6379", "redis"]
`,
			want: []string{
				`config: server.listen: must be host:port, such as "127.0.0.1:1986" or "[::1]:1986", got "1985"`,
				`~^config: server\.upstream: must be an absolute http:// or https:// URL, got "127\.0\.0\.1:1984": .+`,
				`config: admin.listen: port "http" of "localhost:http" is not a number from 0 to 65535`,
				`config: cluster.redis.addrs[1]: must be host:port, such as "127.0.0.1:1986" or "[::1]:1986", got "redis"`,
			},
		},
		{
			name: "upstream",
			file: "[server]\nupstream = \"ftp://node:21\"\n[admin]\nlisten = \"0.0.0.0:1985\"\n",
			want: []string{
				`config: server.upstream: must be an absolute http:// or https:// URL, got "ftp://node:21"`,
				`config: admin.listen: "0.0.0.0:1985" is also server.listen; the admin listener needs its own address`,
			},
		},
		{
			name: "upstream without host",
			file: "[server]\nupstream = \"http:///x\"\n",
			want: []string{`config: server.upstream: must be an absolute http:// or https:// URL with a host, got "http:///x"`},
		},
		{
			name: "durations",
			file: `
[server]
shutdown_timeout = "-1s"
data_dir = ""
[admin]
check_lease = "0s"
[snapshot]
interval = "5"
[cluster]
sync_interval = "-100ms"
`,
			want: []string{
				// Values that do not decode come first.
				`config: snapshot.interval: must be a duration such as "5s", "100ms" or "1m30s", got "5"`,
				"config: server.data_dir: must not be empty",
				"config: server.shutdown_timeout: must be ≥ 0, got -1s",
				"config: admin.check_lease: must be a duration > 0, got 0s",
				"config: cluster.sync_interval: must be a duration > 0, got -100ms",
			},
		},
		{
			name: "peers",
			file: `
[peers]
trusted_proxies = ["10.0.0.0/8", "::1%eth0"]
forwarded_header = "X-Real-IP"
ipv6_prefix = 121
exempt = ["127.0.0.1", "10.0.0.1/8", ""]
max_tracked = -1
`,
			want: []string{
				`config: peers.trusted_proxies[1]: "::1%eth0": an IPv6 zone (%...) cannot be used in an address list`,
				`config: peers.forwarded_header: must be x-forwarded-for or forwarded, got "X-Real-IP"`,
				"config: peers.ipv6_prefix: must be 1 to 120, or 128 for whole addresses, got 121",
				`config: peers.exempt[1]: "10.0.0.1/8": host bits are set after /8; did you mean "10.0.0.0/8"?`,
				`config: peers.exempt[2]: "": empty address`,
				"config: peers.max_tracked: must be an integer ≥ 0 (0: no cap), got -1",
			},
		},
		{
			name: "audit_max_entries",
			file: "[admin]\naudit_max_entries = 99\n",
			want: []string{"config: admin.audit_max_entries: must be 0 (keep every entry) or an integer from 100 to 1073741824, got 99"},
		},
		{
			name: "audit_max_entries negative",
			file: "[admin]\naudit_max_entries = -5\n",
			want: []string{"config: admin.audit_max_entries: must be 0 (keep every entry) or an integer from 100 to 1073741824, got -5"},
		},
		{
			name: "ipv6_prefix 0",
			file: "[peers]\nipv6_prefix = 0\n",
			want: []string{"config: peers.ipv6_prefix: must be 1 to 120, or 128 for whole addresses, got 0"},
		},
		{
			name: "routes",
			file: `
[routes]
exempt_paths = ["/ok", "/a*"]

[[routes.rule]]
group = "chunks"
paths = ["/chunk/**"]

[[routes.rule]]
group = "chunk"
paths = ["/ok", "/a/**/b"]

[[routes.rule]]
group = "general"
paths = ["/tx"]
methods = ["post"]

[[routes.rule]]
paths = ["/x"]

[[routes.rule]]
group = "general"
paths = ["/tx"]
reduce_on_status = [200, 99]

[[routes.rule]]
group = "local_peers"
paths = ["/healthz"]

[[routes.rule]]
group = "general"
paths = []
`,
			want: []string{
				`config: routes.exempt_paths[1]: "/a*": segment "a*": * and ** must be whole segments (use re: to match part of a segment)`,
				`config: routes.rule[0].group: unknown group "chunks": no [http_api.limiter.chunks] table`,
				`config: routes.rule[1].paths[1]: "/a/**/b": ** must be the last segment`,
				`config: routes.rule[2].methods[0]: "post": methods are case-sensitive and written upper-case`,
				"config: routes.rule[3].group: required",
				"config: routes.rule[4].reduce_on_status[1]: 99 is not an HTTP status (100 to 599)",
				"~^config: routes.rule\\[5\\].group: local_peers is the built-in group of exempt peers",
				"config: routes.rule[6].paths: at least one pattern",
			},
		},
		{
			name: "a route to a group whose table is invalid names the table only",
			file: "[http_api.limiter.new]\nleaky_limit = -5\n[[routes.rule]]\ngroup = \"new\"\npaths = [\"/n\"]\n",
			want: []string{"config: http_api.limiter.new.leaky_limit: must be an integer ≥ 0, got -5"},
		},
		{
			name: "throttle",
			file: `
[throttle]
period = 0
retry_interval = -5
exempt_peers = ["a", ""]
exempt_paths = ["re:("]
default_type = ""
default_rpm = -1

[[throttle.rule]]
type = "x"
rpm = -2
paths = ["/ok", "re:[z-a]"]

[[throttle.rule]]
rpm = 1
paths = ["/b"]
`,
			want: []string{
				"config: throttle.period: must be an integer number of milliseconds from 1 to 2147483647, got 0",
				"config: throttle.retry_interval: must be an integer number of milliseconds from 1 to 2147483647, got -5",
				"config: throttle.exempt_peers[1]: must not be empty",
				"~^config: throttle.exempt_paths\\[0\\]: \"re:\\(\": bad regular expression: .*missing closing \\)",
				"config: throttle.default_type: must not be empty",
				"config: throttle.default_rpm: must be an integer from 0 to 2147483647 requests per minute, got -1",
				"config: throttle.rule[0].rpm: must be an integer from 0 to 2147483647 requests per minute, got -2",
				"~^config: throttle.rule\\[0\\].paths\\[1\\]: \"re:\\[z-a\\]\": bad regular expression: ",
				"config: throttle.rule[1].type: required",
			},
		},
		{
			name: "cluster",
			file: `
[cluster]
backend = "etcd"
mode = "eventual"
on_failure = "panic"
[cluster.redis]
db = -1
`,
			want: []string{
				`config: cluster.backend: must be one of local, redis, got "etcd"`,
				`config: cluster.mode: must be one of strict, local_first, got "eventual"`,
				`config: cluster.on_failure: must be one of open, closed, local, got "panic"`,
				"config: cluster.redis.db: must be an integer from 0 to 2147483647, got -1",
			},
		},
		{
			name: "cluster durations",
			file: "[cluster]\ntimeout = \"0s\"\nlease = \"500ms\"\nmax_unsynced = -3\n",
			want: []string{
				"config: cluster.timeout: must be a duration > 0, got 0s",
				"config: cluster.lease: must be at least 1s (it is renewed every third of it), got 500ms",
				"config: cluster.max_unsynced: must be an integer from 0 to 2147483647, got -3",
			},
		},
		{
			name: "cluster timeout over the lease",
			file: "[cluster]\ntimeout = \"4s\"\nlease = \"10s\"\n",
			want: []string{"config: cluster.timeout: must be at most a third of cluster.lease (3.333333333s), got 4s"},
		},
		{
			name: "redis without addresses",
			file: "[cluster]\nbackend = \"redis\"\n[cluster.redis]\naddrs = []\n",
			want: []string{`config: cluster.redis.addrs: at least one address is needed when cluster.backend is "redis"`},
		},
		{
			name: "token and token file",
			file: "[admin]\ntoken = \"abc\"\ntoken_file = \"/etc/token\"\n",
			want: []string{"config: admin.token_file: set only one of admin.token and admin.token_file"},
		},
		{
			name: "environment",
			env: []string{
				"LIMITERD_SERVER__UPSTREM=http://x:1",
				"LIMITERD_HTTP_API__LIMITER__GENERAL__LEAKY_LIMIT=many",
				"LIMITERD_HTTP_API__LIMITER__CHUNK__IS_MANUAL_REDUCTION_DISABLED=maybe",
				"LIMITERD_ROUTES__RULE=x",
				"LIMITERD_SERVER=x",
				"LIMITERD_HTTP_API__LIMITER__GET_VDF__MODE=loud",
				"LIMITERD_PEERS__EXEMPT=1.2.3.4,10.0.0.1/8",
			},
			want: []string{
				"config: server.upstrem: unknown key (environment variable LIMITERD_SERVER__UPSTREM)",
				`config: http_api.limiter.general.leaky_limit: must be an integer (environment variable LIMITERD_HTTP_API__LIMITER__GENERAL__LEAKY_LIMIT="many")`,
				`config: http_api.limiter.chunk.is_manual_reduction_disabled: must be true or false (environment variable LIMITERD_HTTP_API__LIMITER__CHUNK__IS_MANUAL_REDUCTION_DISABLED="maybe")`,
				`config: routes.rule: is a table or a list of tables, which cannot be set from the environment; set it in the file (environment variable LIMITERD_ROUTES__RULE="x")`,
				`config: server: is a table or a list of tables, which cannot be set from the environment; set it in the file (environment variable LIMITERD_SERVER="x")`,
				`config: peers.exempt[1]: "10.0.0.1/8": host bits are set after /8; did you mean "10.0.0.0/8"? (environment variable LIMITERD_PEERS__EXEMPT)`,
				`config: http_api.limiter.get_vdf.mode: "loud" is not one of enforce, dry_run, off (environment variable LIMITERD_HTTP_API__LIMITER__GET_VDF__MODE)`,
			},
		},
		{
			name: "other types",
			file: "[server]\nlisten = 1979-05-27T07:32:00Z\ndata_dir = 1979-05-27\nupstream = \"http://node:1984/?a=b\"\n[admin]\ntoken = [\"a\"]\ntoken_file = {}\n",
			want: []string{
				"config: server.listen: must be a string, got date-time 1979-05-27T07:32:00Z",
				"config: server.data_dir: must be a string, got date or time 1979-05-27",
				"config: admin.token: must be a string, got an array",
				"config: admin.token_file: must be a string, got a table",
				`config: server.upstream: must not have a query or a fragment, got "http://node:1984/?a=b"`,
			},
		},
		{
			name: "a table defined twice",
			file: "[[throttle.rule]]\ntype = \"a\"\n[throttle]\nrule = [{type = \"b\", rpm = 1, paths = []}, 5]\n",
			want: []string{"~^config: .*config\\.toml: toml: key rule is already defined$"},
		},
		{
			name: "throttle rule fields",
			file: "[[throttle.rule]]\ntype = \"a\"\n[[throttle.rule]]\ntype = \"b\"\nrpm = 1\npaths = []\n",
			want: []string{
				"config: throttle.rule[0].rpm: required",
				"config: throttle.rule[0].paths: required",
				"config: throttle.rule[1].paths: at least one pattern",
			},
		},
		{
			name: "rules that are not tables",
			file: "[throttle]\nrule = [5]\n[routes]\nrule = \"x\"\n",
			want: []string{
				`config: routes.rule: must be an array of tables ([[routes.rule]]), got string "x"`,
				"config: throttle.rule[0]: must be a table, got integer 5",
			},
		},
		{
			name: "syntax error",
			file: "[server]\nlisten = \"a\nupstream = 1\n",
			want: []string{"~^config: .*config\\.toml:2:12: toml: basic strings cannot have new lines$"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFile(t, tc.file, tc.env...)
			lines := errorLines(t, err)
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, want := range tc.want {
				if re, ok := strings.CutPrefix(want, "~"); ok {
					if !regexp.MustCompile(re).MatchString(lines[i]) {
						t.Errorf("line %d:\n got %s\nwant match %s", i, lines[i], re)
					}
				} else if lines[i] != want {
					t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want)
				}
			}
		})
	}
}

func TestErrorsUnwrap(t *testing.T) {
	_, err := loadFile(t, `
[server]
upstrem = "x"
[http_api.limiter.chunk]
leaky_limit = -1
[[routes.rule]]
group = "general"
paths = ["/a/**/b"]
`)
	errs := config.Errors(err)
	if len(errs) != 3 {
		t.Fatalf("errors = %v", errs)
	}
	if errs[0].Field != "server.upstrem" || !errors.Is(errs[0], config.ErrUnknownKey) {
		t.Errorf("first = %+v", errs[0])
	}
	if !errors.Is(err, config.ErrUnknownKey) {
		t.Error("the joined error is not ErrUnknownKey")
	}
	var fe *limiter.FieldError
	if errs[1].Field != "http_api.limiter.chunk.leaky_limit" || !errors.As(errs[1], &fe) || fe.Field != errs[1].Field {
		t.Errorf("second = %+v", errs[1])
	}
	var pe *limiter.PatternError
	if errs[2].Field != "routes.rule[0].paths[0]" || !errors.As(errs[2], &pe) {
		t.Errorf("third = %+v", errs[2])
	}
	if config.Errors(nil) != nil {
		t.Error("Errors(nil) is not nil")
	}
	one := &limiter.FieldError{Field: "k", Problem: "p"}
	if got := config.Errors(one); len(got) != 1 || got[0] != one || one.Error() != "k: p" {
		t.Errorf("Errors(one) = %v", got)
	}
}

func TestTooManyGroups(t *testing.T) {
	var b strings.Builder
	for i := range limiter.MaxGroups {
		b.WriteString("[http_api.limiter.g")
		b.WriteString(strings.Repeat("x", i%3))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString(string(rune('a' + i/26)))
		b.WriteString("]\n")
	}
	_, err := loadFile(t, b.String())
	lines := errorLines(t, err)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "config: http_api.limiter: too many groups") {
		t.Errorf("err = %v", err)
	}
}
