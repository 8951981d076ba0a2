package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a certificate authority a test makes, and the files of the
// certificates it issues (PEM, in the test's temporary directory).
type PKI struct {
	tb     testing.TB
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	CAFile string
	serial int64
}

// NewPKI makes a new certificate authority.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()
	p := &PKI{tb: tb, dir: tb.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "limiterd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	p.cert, _ = x509.ParseCertificate(der)
	p.key = key
	p.serial = 1
	p.CAFile = filepath.Join(p.dir, "ca.pem")
	writePEM(tb, p.CAFile, "CERTIFICATE", der)
	return p
}

// Issue issues a certificate for name (the server's: IP 127.0.0.1 and the
// DNS name "localhost" as well; or a client's), valid until notAfter, and
// returns its certificate and key files.
func (p *PKI) Issue(name string, server bool, notAfter time.Time) (certFile, keyFile string) {
	p.tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.tb.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{name}
		if name == "localhost" {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		p.tb.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		p.tb.Fatal(err)
	}
	certFile = filepath.Join(p.dir, name+fmtSerial(p.serial)+".pem")
	keyFile = filepath.Join(p.dir, name+fmtSerial(p.serial)+".key")
	writePEM(p.tb, certFile, "CERTIFICATE", der)
	writePEM(p.tb, keyFile, "EC PRIVATE KEY", kb)
	return certFile, keyFile
}

func fmtSerial(n int64) string { return "-" + big.NewInt(n).String() }

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// StartTLS runs redis-server with TLS only, on a free port, with a server
// certificate of p for 127.0.0.1 (valid for a day unless certFile and
// keyFile are given), clients' certificates required when mutual is true,
// and extra arguments. Addr is its TLS port.
func StartTLS(tb testing.TB, p *PKI, mutual bool, certFile, keyFile string, extra ...string) *Server {
	tb.Helper()
	if certFile == "" {
		certFile, keyFile = p.Issue("localhost", true, time.Now().Add(24*time.Hour))
	}
	auth := "no"
	if mutual {
		auth = "yes"
	}
	cc, ck := p.Issue("redistest-client", false, time.Now().Add(24*time.Hour))
	cert, err := tls.LoadX509KeyPair(cc, ck)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.cert)
	args := append([]string{"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", p.CAFile,
		"--tls-auth-clients", auth}, extra...)
	return start(tb, &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, InsecureSkipVerify: true}, args...) //nolint:gosec
}
