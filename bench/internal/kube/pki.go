package kube

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is what kube-apiserver needs to start: a self-signed serving
// certificate for 127.0.0.1 and a service-account key pair.
type pki struct {
	CertFile, KeyFile    string
	SAPubFile, SAKeyFile string
	TokenFile            string
	Token                string
}

// writePKI writes the files of a fresh pki into dir.
func writePKI(dir string) (pki, error) {
	p := pki{
		CertFile: filepath.Join(dir, "apiserver.crt"), KeyFile: filepath.Join(dir, "apiserver.key"),
		SAPubFile: filepath.Join(dir, "sa.pub"), SAKeyFile: filepath.Join(dir, "sa.key"),
		TokenFile: filepath.Join(dir, "tokens.csv"), Token: "quantykube-bench-token",
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, fmt.Errorf("generate serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "kube-apiserver-bench"},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost"},
		IsCA:        true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return p, fmt.Errorf("sign serving certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return p, fmt.Errorf("marshal serving key: %w", err)
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, fmt.Errorf("generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return p, fmt.Errorf("marshal service-account public key: %w", err)
	}
	files := map[string][]byte{
		p.CertFile:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		p.KeyFile:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		p.SAKeyFile: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)}),
		p.SAPubFile: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		// token,user,uid,"group": system:masters passes every authorizer.
		p.TokenFile: []byte(p.Token + ",bench-admin,bench-admin,\"system:masters\"\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return p, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return p, nil
}
