package store

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// serverTLS builds the TLS configuration of the client listeners. With
// client-cert auth, a client must present a certificate signed by the
// trusted CA, as etcd's --client-cert-auth requires.
func (c *Config) serverTLS() (*tls.Config, error) {
	if c.CertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load --cert-file %s and --key-file %s: %v; pass a matching PEM certificate and key", c.CertFile, c.KeyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if c.TrustedCAFile != "" {
		pem, err := os.ReadFile(c.TrustedCAFile)
		if err != nil {
			return nil, fmt.Errorf("read --trusted-ca-file %s: %w", c.TrustedCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--trusted-ca-file %s holds no PEM certificate; pass the CA certificate", c.TrustedCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if c.ClientCertAuth {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}
