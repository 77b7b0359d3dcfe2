package s3

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dstlgo/dstl/backends/internal/faultproxy"
	"github.com/dstlgo/dstl/catalog"
)

// TestCatalogPagesOnMinIO: a job of 64 processes on MinIO, committing
// aligned checkpoints with the leader last; the catalog's count of its
// listings' pages (dstl.catalog.list.pages, at 1,000 names a page) is
// what MinIO was sent: one ListObjectsV2 request a page, and one listing
// of one page per checkpoint for the whole job.
func TestCatalogPagesOnMinIO(t *testing.T) {
	env := requireEnv(t)
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u, _ := testURL(t, proxy.URL(), nil)
	b := openURL(t, u)
	reader := metric.NewManualReader()
	mp := metric.NewMeterProvider(metric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	const p, checkpoints = 64, 20
	ms := make([]*catalog.Member, p)
	for i := range p {
		m, err := catalog.Join(t.Context(), b, catalog.Config{JobID: "job", Instances: p, Process: i, MeterProvider: mp,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	pagesCounted := func() int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(t.Context(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == "dstl.catalog.list.pages" {
					var n int64
					for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
						n += dp.Value
					}
					return n
				}
			}
		}
		return 0
	}
	listRequests := func() int {
		n := 0
		for _, r := range proxy.Records() {
			if r.Method == "GET" && strings.Contains(r.Query, "list-type=2") {
				n++
			}
		}
		return n
	}
	before, beforeCounted := listRequests(), pagesCounted()
	first := ms[0].Generation().FirstCheckpoint
	start := time.Now()
	for k := range int64(checkpoints) {
		for i := p - 1; i >= 0; i-- {
			m := ms[i]
			if _, err := m.Commit(t.Context(), first+k, []catalog.InstanceState{{Instance: m.Instances()[0], State: []byte("s")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	requests, counted := listRequests()-before, pagesCounted()-beforeCounted
	t.Logf("%d checkpoints of %d processes on MinIO in %v: %d ListObjectsV2 requests, %d pages counted", checkpoints, p,
		time.Since(start).Round(time.Millisecond), requests, counted)
	if int64(requests) != counted || requests != checkpoints {
		t.Fatalf("%d ListObjectsV2 requests, %d pages counted; want %d of each (one page a checkpoint)", requests, counted, checkpoints)
	}
}
