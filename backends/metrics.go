package backends

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metrics are the instruments of one Bucket:
//
//   - dstl.backend.operations (counter): operations, by backend, op
//     ("put", "get", "delete", "list") and outcome ("ok", "error"; a
//     listing that its callback stops is "ok");
//   - dstl.backend.operation.duration (histogram, seconds, buckets from
//     5 ms to 2 min): their latency, retries included (a Get's until its
//     body is ready);
//   - dstl.backend.retries (counter): attempts after the first of each
//     request, by backend and op;
//   - dstl.backend.held (counter): Gets and Lists that failed at once,
//     without a request, during the hold after an unanswered call
//     ([Policy.UnansweredHold]), by backend and op; they are not counted
//     in dstl.backend.operations.
type metrics struct {
	backend  attribute.KeyValue
	ops      metric.Int64Counter
	duration metric.Float64Histogram
	retries  metric.Int64Counter
	holds    metric.Int64Counter
}

func newMetrics(mp metric.MeterProvider, id string) *metrics {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/dstlgo/dstl/backends")
	ms := &metrics{backend: attribute.String("backend", id)}
	// The instruments' errors only say that a name is invalid: ours are not.
	ms.ops, _ = m.Int64Counter("dstl.backend.operations", metric.WithDescription("Backend operations, by op and outcome."))
	// The SDK's default buckets are meant for milliseconds (0, 5, 10, ...):
	// in seconds, they would put every operation under 5 s in one bucket.
	ms.duration, _ = m.Float64Histogram("dstl.backend.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of backend operations, retries included."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120))
	ms.retries, _ = m.Int64Counter("dstl.backend.retries", metric.WithDescription("Request attempts after the first."))
	ms.holds, _ = m.Int64Counter("dstl.backend.held", metric.WithDescription("Gets and Lists failed without a request after an unanswered one."))
	return ms
}

func (m *metrics) record(ctx context.Context, op string, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	opAttr := attribute.String("op", op)
	m.ops.Add(ctx, 1, metric.WithAttributes(m.backend, opAttr, attribute.String("outcome", outcome)))
	m.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(m.backend, opAttr))
}

func (m *metrics) retry(ctx context.Context, op string) {
	m.retries.Add(ctx, 1, metric.WithAttributes(m.backend, attribute.String("op", op)))
}

func (m *metrics) held(ctx context.Context, op string) {
	m.holds.Add(ctx, 1, metric.WithAttributes(m.backend, attribute.String("op", op)))
}
