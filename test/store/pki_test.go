package storee2e

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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

// pki is a throw-away certificate authority whose files live in dir.
// Invariant: CAFile holds the PEM of the certificate that signed every pair
// issue returns.
type pki struct {
	dir    string
	CAFile string
	caCert *x509.Certificate
	caKey  crypto.Signer
}

// certSpec says what a leaf certificate is for.
type certSpec struct {
	CN     string
	Orgs   []string
	IPs    []net.IP
	DNS    []string
	Server bool // ExtKeyUsageServerAuth
	Client bool // ExtKeyUsageClientAuth
}

// keyPair is a certificate and its key, both PEM files.
type keyPair struct{ Cert, Key string }

// newPKI makes a CA named name under dir.
func newPKI(t testing.TB, dir, name string) *pki {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("make pki dir %s: %v", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("self-sign CA %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA %s: %v", name, err)
	}
	p := &pki{dir: dir, CAFile: filepath.Join(dir, "ca.crt"), caCert: cert, caKey: key}
	writePEM(t, p.CAFile, "CERTIFICATE", der)
	writeKey(t, filepath.Join(dir, "ca.key"), key)
	return p
}

// issue signs a fresh ECDSA key for spec and writes name.crt and name.key.
func (p *pki) issue(t testing.TB, name string, spec certSpec) keyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key %s: %v", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: spec.CN, Organization: spec.Orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		IPAddresses:  spec.IPs,
		DNSNames:     spec.DNS,
	}
	if spec.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		t.Fatalf("sign %s: %v", name, err)
	}
	kp := keyPair{Cert: filepath.Join(p.dir, name+".crt"), Key: filepath.Join(p.dir, name+".key")}
	writePEM(t, kp.Cert, "CERTIFICATE", der)
	writeKey(t, kp.Key, key)
	return kp
}

// rsaKeyPair writes an RSA private key and its public key (for
// kube-apiserver's service-account signing) and returns their paths.
func rsaKeyPair(t testing.TB, dir, name string) (priv, pub string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate RSA key %s: %v", name, err)
	}
	priv, pub = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	writeKey(t, priv, key)
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatalf("marshal public key %s: %v", name, err)
	}
	writePEM(t, pub, "PUBLIC KEY", der)
	return priv, pub
}

// loopbackServer is the spec of a serving certificate valid for 127.0.0.1.
func loopbackServer(cn string, dns ...string) certSpec {
	return certSpec{
		CN:     cn,
		IPs:    []net.IP{net.ParseIP("127.0.0.1")},
		DNS:    append([]string{"localhost"}, dns...),
		Server: true,
		Client: true, // etcd uses its server pair as a client too (e.g. its gateway)
	}
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("serial number: %v", err)
	}
	return n
}

func writeKey(t testing.TB, path string, key crypto.Signer) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal key %s: %v", path, err)
	}
	writePEM(t, path, "PRIVATE KEY", der)
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}
