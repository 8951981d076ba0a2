package cluster_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/redistest"
	"github.com/limiterd/limiterd/limiter"
)

// TestTLS: cluster mode over redis-server's own TLS port with
// certificates the test makes — verified against ca_file, with a client
// certificate (mutual TLS) — and every way it can be wrong: another CA, no
// client certificate, an expired server certificate, a name that does not
// match, an expired client certificate, a wrong password (from
// password_file, fixed by a Reload). Each is a clear error naming the key,
// decisions answered as on_failure says, and nothing panics.
func TestTLS(t *testing.T) {
	if !redistest.Available(t) {
		t.Skip("redis-server not installed")
	}
	pki := redistest.NewPKI(t)
	srv := redistest.StartTLS(t, pki, true, "", "", "--requirepass", "s3cret")
	cc, ck := pki.Issue("limiterd", false, time.Now().Add(time.Hour))
	passFile := filepath.Join(t.TempDir(), "redis.pass")
	if err := os.WriteFile(passFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := cluster.TLSOptions{CAFile: pki.CAFile, CertFile: cc, KeyFile: ck}

	t.Run("verified, mutual, password file", func(t *testing.T) {
		tl := good
		b, lim, _ := open(t, cluster.Options{Addrs: []string{srv.Addr()}, TLS: &tl, PasswordFile: passFile, OnFailure: cluster.FailClosed})
		if !b.Status().Up {
			t.Fatalf("%+v", b.Status())
		}
		if d := decide(lim, "192.0.2.1"); !d.Allowed {
			t.Fatalf("%+v", d)
		}
	})

	down := func(t *testing.T, o cluster.Options, key string) {
		t.Helper()
		o.Addrs, o.OnFailure = []string{srv.Addr()}, cluster.FailClosed
		if o.PasswordFile == "" {
			o.Password = "s3cret"
		}
		b, lim, logs := open(t, o)
		st := b.Status()
		if st.Up || !strings.Contains(st.Reason, key) {
			t.Fatalf("status %+v, want down naming %s", st, key)
		}
		if !strings.Contains(logs.String(), key) {
			t.Fatalf("the log does not name %s:\n%s", key, logs)
		}
		if d := decide(lim, "192.0.2.1"); d.Allowed || d.Reason != limiter.ReasonUnavailable {
			t.Fatalf("%+v", d)
		}
	}
	t.Run("another CA", func(t *testing.T) {
		tl := good
		tl.CAFile = redistest.NewPKI(t).CAFile
		down(t, cluster.Options{TLS: &tl}, "cluster.redis.ca_file")
	})
	t.Run("no client certificate", func(t *testing.T) {
		tl := good
		tl.CertFile, tl.KeyFile = "", ""
		down(t, cluster.Options{TLS: &tl}, "cluster.redis.cert_file")
	})
	t.Run("name mismatch", func(t *testing.T) {
		tl := good
		tl.ServerName = "redis.elsewhere"
		down(t, cluster.Options{TLS: &tl}, "cluster.redis.server_name")
	})
	t.Run("plain to a TLS port", func(t *testing.T) {
		o := cluster.Options{Addrs: []string{srv.Addr()}, OnFailure: cluster.FailClosed, Timeout: 50 * time.Millisecond, Lease: time.Second, SyncInterval: time.Second}
		b, err := cluster.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.Status().Up {
			t.Fatal("up without TLS on a TLS port")
		}
	})
	t.Run("expired server certificate", func(t *testing.T) {
		ec, ek := pki.Issue("localhost", true, time.Now().Add(-time.Hour))
		old := redistest.StartTLS(t, pki, false, ec, ek)
		tl := good
		o := cluster.Options{Addrs: []string{old.Addr()}, TLS: &tl, OnFailure: cluster.FailClosed}
		b, _, _ := open(t, o)
		if st := b.Status(); st.Up || !strings.Contains(st.Reason, "expired") {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("expired client certificate", func(t *testing.T) {
		ec, ek := pki.Issue("limiterd-old", false, time.Now().Add(-time.Minute))
		tl := good
		tl.CertFile, tl.KeyFile = ec, ek
		_, err := cluster.Open(cluster.Options{Addrs: []string{srv.Addr()}, TLS: &tl, OnFailure: cluster.FailClosed, Timeout: time.Second, Lease: time.Second, SyncInterval: time.Second})
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != "cluster.redis.cert_file" || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("wrong password, then fixed on reload", func(t *testing.T) {
		pf := filepath.Join(t.TempDir(), "redis.pass")
		if err := os.WriteFile(pf, []byte("wrong\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		tl := good
		o := cluster.Options{TLS: &tl, PasswordFile: pf}
		down(t, o, "cluster.redis.password_file")
		o.Addrs, o.OnFailure = []string{srv.Addr()}, cluster.FailClosed
		b, lim, _ := open(t, o)
		err := b.Reload(time.Second)
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != "cluster.redis.password_file" {
			t.Fatalf("reload with the wrong password: %v", err)
		}
		if err := os.WriteFile(pf, []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := b.Reload(time.Second); err != nil {
			t.Fatalf("reload with the right password: %v", err)
		}
		waitFor(t, "redis up after the reload", func() bool { return b.Status().Up })
		if d := decide(lim, "192.0.2.3"); !d.Allowed {
			t.Fatalf("%+v", d)
		}
	})
}
