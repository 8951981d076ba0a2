package config

import (
	"strings"
	"testing"
)

func TestEditTOML(t *testing.T) {
	const file = `# my limiterd
[server]
listen = "127.0.0.1:1985"   # nginx in front
upstream = "http://127.0.0.1:1984"

[peers]
trusted_proxies = [
  "127.0.0.1",  # nginx
  "10.1.2.3",
]
forwarded_header = "x-forwarded-for"
exempt = ["127.0.0.1"]

# the node's general group
[http_api.limiter.general]
leaky_rate_limit = 450 # the node's name
mode = "dry_run"

[[admin.tokens]]
name = "nginx"
scope = "data"
token = "0123456789abcdef0123456789abcdef"
`
	edits := []Edit{
		{Table: "arweave", Forms: []KeyValue{{"version", `"2.9.7"`}}},
		{Table: "peers", Forms: []KeyValue{{"exempt", `["127.0.0.1", "10.0.0.0/8"]`}}},
		{Table: "http_api.limiter.general", Forms: []KeyValue{{"leaky_limit", "900"}, {"leaky_rate_limit", "900"}}},
		{Table: "http_api.limiter.general", Forms: []KeyValue{{"concurrency_limit", "300"}}},
		{Table: "http_api.limiter.chunk", Forms: []KeyValue{{"leaky_rate_limit", "12000"}, {"leaky_limit", "12000"}}},
		{Table: "http_api.limiter.chunk", Forms: []KeyValue{{"tick_reduction", "60"}}},
	}
	got, err := EditTOML([]byte(file), edits)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(strings.Replace(file,
		`exempt = ["127.0.0.1"]`, `exempt = ["127.0.0.1", "10.0.0.0/8"]`, 1),
		"leaky_rate_limit = 450 # the node's name\nmode = \"dry_run\"\n", "leaky_rate_limit = 900 # the node's name\nmode = \"dry_run\"\nconcurrency_limit = 300\n", 1),
		"", "", 1) + "\n[arweave]\nversion = \"2.9.7\"\n\n[http_api.limiter.chunk]\nleaky_rate_limit = 12000\ntick_reduction = 60\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, _, err := Load(Source{Path: "edited.toml", Data: got}); err != nil {
		t.Errorf("the edited file does not load: %v", err)
	}

	// A value over several lines becomes one; a key of the top level
	// table's sub-table is added after its last key.
	got, err = EditTOML([]byte(file), []Edit{{Table: "peers", Forms: []KeyValue{{"trusted_proxies", `["10.9.9.9"]`}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "[peers]\ntrusted_proxies = [\"10.9.9.9\"]\nforwarded_header") {
		t.Errorf("a value over several lines:\n%s", got)
	}

	for _, bad := range []struct{ file, want string }{
		{"http_api.limiter.general.leaky_limit = 5\n", "line 1 sets http_api.limiter.general.concurrency_limit in a form"},
		{"[http_api.limiter]\ngeneral = { leaky_limit = 5 }\n", "line 2 sets http_api.limiter.general.concurrency_limit in a form"},
		{"[[http_api.limiter.general]]\nleaky_limit = 5\n", "is an array of tables"},
	} {
		_, err := EditTOML([]byte(bad.file), []Edit{{Table: "http_api.limiter.general", Forms: []KeyValue{{"concurrency_limit", "3"}}}})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.file, err, bad.want)
		}
	}
	// A dotted key that is exactly the edited one is edited in place.
	got, err = EditTOML([]byte("[http_api.limiter]\ngeneral.leaky_limit = 5 # mine\n"), []Edit{{Table: "http_api.limiter.general", Forms: []KeyValue{{"leaky_limit", "7"}}}})
	if err != nil || string(got) != "[http_api.limiter]\ngeneral.leaky_limit = 7 # mine\n" {
		t.Errorf("a dotted key: %q, %v", got, err)
	}
	// Strings holding # and = are not comments or keys.
	got, err = EditTOML([]byte("[server]\nupstream = \"http://h/#x=1\" # c\n"), []Edit{{Table: "server", Forms: []KeyValue{{"upstream", `"http://n"`}}}})
	if err != nil || string(got) != "[server]\nupstream = \"http://n\" # c\n" {
		t.Errorf("a string with # and =: %q, %v", got, err)
	}
}
