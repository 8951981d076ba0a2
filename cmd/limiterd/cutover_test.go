package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// docBlock returns the first ```lang block of a document that contains
// marker.
func docBlock(t *testing.T, doc, lang, marker string) string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	rest := string(b)
	for {
		_, block, ok := strings.Cut(rest, "```"+lang+"\n")
		if !ok {
			t.Fatalf("%s has no ```%s block with %q", doc, lang, marker)
		}
		block, rest, _ = strings.Cut(block, "```")
		if strings.Contains(block, marker) {
			return block
		}
	}
}

// replaceAll applies each replacement, failing when its text is not in s:
// the document and the test cannot drift apart.
func replaceAll(t *testing.T, s string, repl ...[2]string) string {
	t.Helper()
	for _, r := range repl {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("the block no longer contains %q:\n%s", r[0], s)
		}
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

// selfSigned writes a certificate for 127.0.0.1 and its key; it returns
// their paths and a pool trusting the certificate.
func selfSigned(t *testing.T) (certPath, keyPath string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"node.example"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "node.pem"), filepath.Join(dir, "node.key")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certPath, keyPath, pool
}

// TestCutoverNginxTLS runs layout B of docs/operations.md as written: a
// real nginx terminating TLS in front of limiterd (its [server] and
// [peers] from the document) in front of a node. A client on 127.0.0.5
// is the peer limiterd limits, whatever X-Forwarded-For it sends; its
// 429s reach it through nginx with their fields.
func TestCutoverNginxTLS(t *testing.T) {
	bin := nginxBinary(t)
	up, seen := countingUpstream(t, nil)
	const doc = "../../docs/operations.md"
	limiterdBlock := docBlock(t, doc, "toml", "# limiterd behind nginx")
	d := startDaemonWith(t, func(dataDir string) string {
		cfg := replaceAll(t, limiterdBlock,
			[2]string{`listen = "127.0.0.1:1985"`, `listen = "127.0.0.1:0"` + "\ndata_dir = " + quote(dataDir)},
			[2]string{`upstream = "http://127.0.0.1:1984"`, "upstream = " + quote(up.URL)},
		)
		return cfg + "\n[admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"test-token\"\n\n[http_api.limiter.general]\nleaky_limit = 5\nleaky_tick_interval = 3600000\n"
	})
	cert, key, pool := selfSigned(t)
	listen := freeAddr(t)
	site := replaceAll(t, docBlock(t, doc, "nginx", "limiterd_public"),
		[2]string{"listen 443 ssl;", "listen " + listen + " ssl;"},
		[2]string{"server 127.0.0.1:1985;", "server " + strings.TrimPrefix(d.PublicURL(), "http://") + ";"},
		[2]string{"/etc/ssl/certs/node.example.pem", cert},
		[2]string{"/etc/ssl/private/node.example.key", key},
	)
	startNginx(t, bin, listen, site)

	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}}).DialContext,
	}}
	var statuses []int
	var last *http.Response
	for range 7 {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "https://"+listen+"/info", nil)
		req.Header.Set("X-Forwarded-For", "198.51.100.9") // a lie nginx replaces
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		last = resp
	}
	if want := []int{200, 200, 200, 200, 200, 429, 429}; !slices.Equal(statuses, want) {
		t.Fatalf("statuses %v, want %v", statuses, want)
	}
	if last.Header.Get("Retry-After") == "" || !strings.Contains(last.Header.Get("RateLimit-Policy"), `"general";q=5`) {
		t.Errorf("the 429 through nginx lost its fields: %v", last.Header)
	}
	if n := seen.Load(); n != 5 {
		t.Errorf("%d requests reached the node, want 5", n)
	}
	_, v := d.admin("GET", "/api/v1/peers", "")
	peers, _ := v["peers"].([]any)
	if len(peers) != 1 || peers[0].(map[string]any)["peer"] != "127.0.0.5" {
		t.Errorf("limiterd's peers: %v, want 127.0.0.5 only (not nginx, not the header's lie)", v)
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
