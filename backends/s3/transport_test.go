package s3

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/driver"
)

// TestIdleConnsPerHost: the client keeps driver.IdleConnsPerHost idle
// connections per host, with a CA bundle (the SDK then builds the
// transport) and without, so that a burst of concurrent ranged reads
// does not dial anew.
func TestIdleConnsPerHost(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, selfSignedPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	for _, b := range []string{"", bundle} {
		t.Setenv("AWS_CA_BUNDLE", b)
		_, tr, err := newClient(t.Context(), Config{})
		if err != nil {
			t.Fatalf("AWS_CA_BUNDLE=%q: %v", b, err)
		}
		if tr.MaxIdleConnsPerHost < driver.IdleConnsPerHost {
			t.Errorf("AWS_CA_BUNDLE=%q: MaxIdleConnsPerHost = %d, want %d", b, tr.MaxIdleConnsPerHost, driver.IdleConnsPerHost)
		}
	}
}

// selfSignedPEM returns a self-signed CA certificate in PEM.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
