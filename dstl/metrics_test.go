package dstl_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// TestMetrics checks the instruments through an OpenTelemetry SDK reader:
// one upload that took two attempts (one failure).
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	b := dstltest.NewBackend()
	failPuts(b, 1)
	s := newStorage(t, b, testConfig(), dstl.WithMeterProvider(mp))
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "0123456789")
	persist(t, w, 0, 1)

	got := collectMetrics(t, reader)
	for name, want := range map[string]int64{
		"dstl.upload.requests":           2,
		"dstl.upload.failures":           0,
		"dstl.upload.attempts.sum":       2,
		"dstl.upload.total_attempts.sum": 2,
		"dstl.upload.batch_size.sum":     1,
		"dstl.upload.size.sum":           10,
		"dstl.upload.latency.count":      1,
		"dstl.upload.in_flight":          0,
		"dstl.upload.queue_size":         0,
		"dstl.upload.stored_size.count":  1,
	} {
		if got[name] != want {
			t.Errorf("%s = %d, want %d", name, got[name], want)
		}
	}
	if got["dstl.upload.stored_size.sum"] <= 10 {
		t.Errorf("stored size = %d, want more than the 10 logical bytes (framing)", got["dstl.upload.stored_size.sum"])
	}
}

// TestUploadFailuresMetric: dstl.upload.failures counts uploads that failed
// after their last attempt, not those failed because the storage closed
// while they were queued or running.
func TestUploadFailuresMetric(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault dstltest.FaultFunc
		// closeEarly closes the storage while the persist is under way.
		closeEarly bool
		want       int64
	}{
		{"permanent error", dstltest.FailAll(dstltest.OpPut, backends.ErrPermission), false, 1},
		{"closed while running", dstltest.StallFirst(dstltest.OpPut), true, 0},
		{"closed while queued", nil, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer mp.Shutdown(context.Background())
			b := dstltest.NewBackend()
			b.SetFault(tc.fault)
			cfg := testConfig()
			if tc.fault == nil {
				cfg.BatchPersistDelay = time.Hour // stays queued
			}
			s := newStorage(t, b, cfg, dstl.WithMeterProvider(mp))
			w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
			mustAppend(t, w, 0, "x")
			f, err := w.Persist(t.Context(), 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if tc.closeEarly {
				if tc.fault != nil {
					if err := b.WaitStalled(t.Context(), 1); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.Wait(t.Context()); err == nil {
				t.Fatal("persist succeeded")
			}
			if got := collectMetrics(t, reader)["dstl.upload.failures"]; got != tc.want {
				t.Errorf("dstl.upload.failures = %d, want %d", got, tc.want)
			}
		})
	}
}

// collectMetrics returns the value of every int64 instrument (sums of
// counters, the last gauge value, .sum and .count of histograms).
func collectMetrics(t *testing.T, reader sdkmetric.Reader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] = p.Value
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					got[m.Name+".sum"] += p.Sum
					got[m.Name+".count"] += int64(p.Count)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name+".count"] += int64(p.Count)
				}
			}
		}
	}
	return got
}

// failingMeterProvider's meters refuse callbacks, so a storage cannot
// register its gauges.
type failingMeterProvider struct{ noop.MeterProvider }

func (failingMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

type failingMeter struct{ noop.Meter }

func (failingMeter) RegisterCallback(metric.Callback, ...metric.Observable) (metric.Registration, error) {
	return nil, errors.New("callbacks refused")
}

// TestNewFailsOnGaugesCleanly: when the gauges cannot be registered, New
// fails naming the metrics, and the parts built before stop their
// goroutines.
func TestNewFailsOnGaugesCleanly(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := dstl.New(testConfig(), dstltest.NewBackend(), dstl.WithMeterProvider(failingMeterProvider{}))
	if err == nil {
		s.Close()
		t.Fatal("New succeeded with a meter that refuses callbacks")
	}
	if !strings.Contains(err.Error(), "metrics") || !strings.Contains(err.Error(), "callbacks refused") {
		t.Fatalf("error = %v, want it to name the metrics and the cause", err)
	}
}
