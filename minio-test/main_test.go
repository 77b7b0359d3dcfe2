package miniotest

import (
	"context"
	cryptorand "crypto/rand"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them. Each
// test gives its SDK client an HTTP transport of its own and closes that
// transport's idle connections when it ends, so no keep-alive connection
// goroutines are left to ignore.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds each emulator test: every SDK call runs under a
// context that expires after it, so a stuck emulator fails the test
// instead of hanging it.
const testTimeout = 2 * time.Minute

// skipHint tells a reader how to get the emulators and their variables.
const skipHint = "run `make test` or `make emulators-up`"

// requireEnv returns the values of the named environment variables, or
// skips the test, naming every one that is not set.
func requireEnv(t *testing.T, names ...string) map[string]string {
	t.Helper()
	vals := make(map[string]string, len(names))
	var missing []string
	for _, n := range names {
		v := os.Getenv(n)
		if v == "" {
			missing = append(missing, n)
			continue
		}
		vals[n] = v
	}
	if len(missing) > 0 {
		t.Skipf("%s not set: %s", strings.Join(missing, ", "), skipHint)
	}
	return vals
}

// testContext returns a context bounded by testTimeout, cancelled when the
// test ends.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// cleanupContext returns a fresh bounded context for t.Cleanup functions,
// which run after the test's own context is cancelled.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// newTransport returns an HTTP transport owned by the test, whose idle
// connections are closed when the test ends (before goleak looks).
func newTransport(t *testing.T) *http.Transport {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 30 * time.Second
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// uniqueName returns prefix followed by a random lowercase suffix, valid in
// S3 bucket, GCS bucket and Azure container names.
func uniqueName(prefix string) string {
	return prefix + strings.ToLower(cryptorand.Text()[:16])
}

// payload returns n deterministic pseudo-random bytes for seed.
func payload(seed uint64, n int) []byte {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}
