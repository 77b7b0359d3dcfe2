package s3

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// recordHandler keeps the messages of the records it handles.
type recordHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	return nil
}

// TestSDKLogsThroughSlog: what the AWS SDK logs (here its fallback to
// IMDSv1, when the instance metadata service refuses a token) goes to
// slog's default logger, not to standard error.
func TestSDKLogsThroughSlog(t *testing.T) {
	// An instance metadata service that refuses tokens and has no role.
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			http.Error(w, "no token", http.StatusForbidden)
			return
		}
		http.NotFound(w, r)
	}))
	defer imds.Close()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none,
		"AWS_EC2_METADATA_DISABLED": "false", "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL,
	} {
		t.Setenv(k, v)
	}
	// An endpoint that refuses connections: a port that was free.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()

	h := &recordHandler{}
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(h))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&got, r); close(done) }()
	func() {
		defer func() { os.Stderr = stderr; w.Close() }()
		cfg := DefaultConfig("bkt", "job")
		cfg.Endpoint, cfg.UsePathStyle, cfg.Region = "http://"+refused, true, "us-east-1"
		b, err := Open(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.Get(t.Context(), "x", 0, -1); err == nil {
			t.Fatal("a get without credentials succeeded")
		}
	}()
	<-done
	if got.Len() > 0 {
		t.Errorf("the SDK wrote to standard error: %q", got.String())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !strings.Contains(strings.Join(h.msgs, "\n"), "WARN s3: AWS SDK: falling back to IMDSv1") {
		t.Errorf("slog records %q, want the SDK's fallback to IMDSv1 as a warning", h.msgs)
	}
}
