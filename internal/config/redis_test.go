package config_test

import (
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/config"
)

// TestRedisTLSAndSentinelKeys: the [cluster.redis] keys of TLS, the
// password file and Sentinel are read, and what does not go together is a
// problem naming the key.
func TestRedisTLSAndSentinelKeys(t *testing.T) {
	good := `[cluster]
backend = "redis"
[cluster.redis]
tls = true
ca_file = "/etc/limiterd/redis-ca.pem"
cert_file = "/etc/limiterd/client.pem"
key_file = "/etc/limiterd/client.key"
server_name = "redis.internal"
password_file = "/etc/limiterd/redis.pass"
[cluster.redis.sentinel]
master_name = "mymaster"
addrs = ["10.0.0.1:26379", "10.0.0.2:26379"]
password = "s3"
`
	c, _, err := config.Load(config.Source{Path: "limiterd.toml", Data: []byte(good)})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Cluster.Redis
	if !r.TLS || r.CAFile == "" || r.KeyFile == "" || r.ServerName != "redis.internal" || r.PasswordFile == "" ||
		r.Sentinel.MasterName != "mymaster" || len(r.Sentinel.Addrs) != 2 || r.Sentinel.Password != "s3" {
		t.Fatalf("%+v", r)
	}
	if red := c.Redacted(); red.Cluster.Redis.Sentinel.Password != "REDACTED" {
		t.Fatalf("redacted: %+v", red.Cluster.Redis.Sentinel)
	}
	for _, tc := range []struct{ body, key, want string }{
		{"[cluster.redis]\ntls = true\ninsecure_skip_verify = true\n", "cluster.redis.insecure_skip_verify", "allow_insecure_skip_verify"},
		{"[cluster.redis]\nca_file = \"/x.pem\"\n", "cluster.redis.ca_file", "needs cluster.redis.tls = true"},
		{"[cluster.redis]\ntls = true\ncert_file = \"/x.pem\"\n", "cluster.redis.key_file", "give both or neither"},
		{"[cluster.redis]\npassword = \"a\"\npassword_file = \"/p\"\n", "cluster.redis.password_file", "not both"},
		{"[cluster.redis.sentinel]\nmaster_name = \"m\"\n", "cluster.redis.sentinel.addrs", "at least one sentinel"},
		{"[cluster.redis.sentinel]\naddrs = [\"127.0.0.1:26379\"]\n", "cluster.redis.sentinel.master_name", "master's name"},
	} {
		_, _, err := config.Load(config.Source{Path: "limiterd.toml", Data: []byte(tc.body)})
		var hit bool
		for _, fe := range config.Errors(err) {
			if fe.Field == tc.key && strings.Contains(fe.Error(), tc.want) {
				hit = true
			}
		}
		if !hit {
			t.Errorf("%q: want a problem of %s saying %q, got %v", tc.body, tc.key, tc.want, err)
		}
	}
	// With the allowance, insecure_skip_verify is taken.
	ok := "[cluster.redis]\ntls = true\ninsecure_skip_verify = true\nallow_insecure_skip_verify = true\n"
	if _, _, err := config.Load(config.Source{Path: "limiterd.toml", Data: []byte(ok)}); err != nil {
		t.Fatal(err)
	}
}
