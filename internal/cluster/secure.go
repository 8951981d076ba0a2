package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// TLSOptions is TLS to Redis and the sentinels (docs/cluster.md, "TLS,
// passwords and Sentinel"): the [cluster.redis] keys tls, ca_file,
// cert_file, key_file, server_name and insecure_skip_verify.
type TLSOptions struct {
	// CAFile holds the PEM certificates that sign the server's; empty: the
	// system's roots.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key (mutual
	// TLS); both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must hold; empty:
	// the host of the address dialled.
	ServerName string
	// InsecureSkipVerify accepts any server certificate (the daemon
	// refuses it unless the operator explicitly allowed it).
	InsecureSkipVerify bool
}

// secrets are what Open and Reload read from files: the password and the
// TLS material. Connections dialled after a Reload use the new ones.
type secrets struct {
	password atomic.Pointer[string]
	roots    atomic.Pointer[x509.CertPool] // nil: the system's
	cert     atomic.Pointer[tls.Certificate]
}

// read reads o's files: the password file, the CA file and the client
// key pair. An error is a *limiter.FieldError naming the key.
func readSecrets(o *Options) (pass string, roots *x509.CertPool, cert *tls.Certificate, err error) {
	pass = o.Password
	if o.PasswordFile != "" {
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return "", nil, nil, &limiter.FieldError{Field: "cluster.redis.password_file", Problem: err.Error(), Err: err}
		}
		pass = strings.TrimRight(string(b), "\r\n")
		if pass == "" || strings.ContainsAny(pass, "\r\n") {
			return "", nil, nil, &limiter.FieldError{Field: "cluster.redis.password_file", Problem: o.PasswordFile + " must hold the password alone, on one line"}
		}
	}
	t := o.TLS
	if t == nil {
		return pass, nil, nil, nil
	}
	if t.CAFile != "" {
		b, err := os.ReadFile(t.CAFile)
		if err != nil {
			return "", nil, nil, &limiter.FieldError{Field: "cluster.redis.ca_file", Problem: err.Error(), Err: err}
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(b) {
			return "", nil, nil, &limiter.FieldError{Field: "cluster.redis.ca_file", Problem: t.CAFile + " holds no PEM certificate"}
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		c, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return "", nil, nil, &limiter.FieldError{Field: "cluster.redis.cert_file", Problem: err.Error(), Err: err}
		}
		if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil && time.Now().After(leaf.NotAfter) {
			return "", nil, nil, &limiter.FieldError{Field: "cluster.redis.cert_file",
				Problem: fmt.Sprintf("%s expired on %s", t.CertFile, leaf.NotAfter.UTC().Format(time.RFC3339))}
		}
		cert = &c
	}
	return pass, roots, cert, nil
}

// load makes what o's files hold the secrets in use.
func (s *secrets) load(o *Options) error {
	pass, roots, cert, err := readSecrets(o)
	if err != nil {
		return err
	}
	s.password.Store(&pass)
	s.roots.Store(roots)
	s.cert.Store(cert)
	return nil
}

// tlsConfig returns the client TLS config of o, reading the roots and the
// client certificate from s at each handshake (so that a Reload applies to
// the next connection), or nil without TLS.
func (s *secrets) tlsConfig(o *Options) *tls.Config {
	t := o.TLS
	if t == nil {
		return nil
	}
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: t.ServerName,
		// Verified below, against the roots in force.
		InsecureSkipVerify: true, //nolint:gosec
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c := s.cert.Load(); c != nil {
				return c, nil
			}
			return &tls.Certificate{}, nil
		},
	}
	if t.InsecureSkipVerify {
		return c
	}
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: s.roots.Load(), DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
		for _, ic := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(ic)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
	return c
}

// KindTLS: the TLS handshake with Redis failed (a certificate that does
// not verify, has expired or names another server; a server without TLS).
const KindTLS = "tls"

// isTLSError reports whether err is a failure of the TLS handshake.
func isTLSError(err error) bool {
	var (
		uae  x509.UnknownAuthorityError
		hne  x509.HostnameError
		cie  x509.CertificateInvalidError
		cve  *tls.CertificateVerificationError
		rhe  tls.RecordHeaderError
		alrt tls.AlertError
	)
	if errors.As(err, &uae) || errors.As(err, &hne) || errors.As(err, &cie) || errors.As(err, &cve) || errors.As(err, &rhe) || errors.As(err, &alrt) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && strings.HasPrefix(oe.Op, "remote error") || strings.Contains(err.Error(), "tls: ")
}

// Hint names the configuration key an error of kind most likely concerns,
// for the operator: "" when none stands out.
func Hint(kind string, err error, o *Options) string {
	switch kind {
	case KindAuth:
		switch {
		case o.PasswordFile != "":
			return "cluster.redis.password_file (or cluster.redis.username)"
		default:
			return "cluster.redis.password (or cluster.redis.username)"
		}
	case KindTLS:
		var hne x509.HostnameError
		var cie x509.CertificateInvalidError
		var rhe tls.RecordHeaderError
		switch {
		case errors.As(err, &hne):
			return "cluster.redis.server_name"
		case errors.As(err, &cie) && cie.Reason == x509.Expired:
			return "the server's certificate (expired), or cluster.redis.ca_file"
		case errors.As(err, &rhe):
			return "cluster.redis.tls (the server does not speak TLS there)"
		case strings.Contains(err.Error(), "certificate required"), strings.Contains(err.Error(), "bad certificate"), strings.Contains(err.Error(), "unknown certificate authority"):
			return "cluster.redis.cert_file and key_file (the server refused the client certificate)"
		}
		return "cluster.redis.ca_file"
	case KindConnection:
		if o.TLS != nil && o.TLS.CertFile == "" {
			msg := err.Error()
			if strings.Contains(msg, "reset by peer") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "EOF") {
				return "cluster.redis.cert_file and key_file (the server closed the TLS connection: does it require a client certificate?)"
			}
		}
		if o.MasterName != "" {
			msg := err.Error()
			if strings.Contains(msg, "sentinel") || strings.Contains(msg, "master") {
				return "cluster.redis.sentinel.master_name and cluster.redis.sentinel.addrs: no sentinel there knows the master"
			}
			return "the master the sentinels give for cluster.redis.sentinel.master_name: it does not answer there (stopped, and no replica promoted yet?)"
		}
		if strings.Contains(err.Error(), "CLUSTERDOWN") {
			return "the Redis Cluster: a hash slot no master serves, or a master down (CLUSTER INFO and CLUSTER NODES on a node say which)"
		}
		if errors.As(err, new(tls.RecordHeaderError)) {
			return "cluster.redis.tls"
		}
	}
	return ""
}
