package dstl

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// meterName is the instrumentation scope of the storage's metrics.
const meterName = "github.com/dstlgo/dstl"

// metrics are the equivalents of Flink's changelog storage metrics, reported
// through OpenTelemetry's metric API. They cost next to nothing unless the
// program installs a meter provider.
type metrics struct {
	uploadRequests         metric.Int64Counter   // attempts, retries and hedges included
	uploadFailures         metric.Int64Counter   // uploads that failed after their last attempt
	uploadSize             metric.Int64Histogram // logical bytes per uploaded object
	uploadStoredSize       metric.Int64Histogram // stored bytes per uploaded object
	uploadLatency          metric.Float64Histogram
	attemptsPerUpload      metric.Int64Histogram // attempts until the one that succeeded
	totalAttemptsPerUpload metric.Int64Histogram // attempts started in all, losers included
	batchSize              metric.Int64Histogram // upload tasks per object
	discards               metric.Int64Counter   // objects deleted after release
	discardFailures        metric.Int64Counter
	localDiscards          metric.Int64Counter // local copies deleted once nothing needed them
	localDiscardFailures   metric.Int64Counter

	meter        metric.Meter
	queueSize    metric.Int64ObservableGauge // tasks waiting for the batching window
	inFlight     metric.Int64ObservableGauge // bytes queued or being uploaded
	registration metric.Registration         // of the gauges' callback, once observed
}

// newMetrics creates the instruments. The gauges report once observe names
// what they read.
func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := mp.Meter(meterName)
	var errs []error
	i64c := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	i64h := func(name, unit, desc string) metric.Int64Histogram {
		h, err := m.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return h
	}
	ms := &metrics{
		uploadRequests:         i64c("dstl.upload.requests", "{request}", "Upload attempts, retries and hedged attempts included."),
		uploadFailures:         i64c("dstl.upload.failures", "{upload}", "Uploads that failed after their last attempt (not those failed because the storage closed)."),
		uploadSize:             i64h("dstl.upload.size", "By", "Logical size of the changes in each uploaded object."),
		uploadStoredSize:       i64h("dstl.upload.stored_size", "By", "Stored size of each uploaded object."),
		attemptsPerUpload:      i64h("dstl.upload.attempts", "{attempt}", "Attempts of each successful upload up to the one that succeeded."),
		totalAttemptsPerUpload: i64h("dstl.upload.total_attempts", "{attempt}", "Attempts started for each upload, losers included."),
		batchSize:              i64h("dstl.upload.batch_size", "{task}", "Upload tasks (writers' requests) per object."),
		discards:               i64c("dstl.discard.objects", "{object}", "Objects deleted once no change set referred to them."),
		discardFailures:        i64c("dstl.discard.failures", "{object}", "Deletes of released objects that failed."),
		localDiscards:          i64c("dstl.discard.local_copies", "{object}", "Local copies deleted once no change set or checkpoint needed them."),
		localDiscardFailures:   i64c("dstl.discard.local_failures", "{object}", "Deletes of local copies that failed."),
	}
	lat, err := m.Float64Histogram("dstl.upload.latency", metric.WithUnit("ms"),
		metric.WithDescription("Time from the first attempt of an upload to its success."))
	errs = append(errs, err)
	ms.uploadLatency = lat
	ms.meter = m
	ms.queueSize, err = m.Int64ObservableGauge("dstl.upload.queue_size", metric.WithUnit("{task}"),
		metric.WithDescription("Upload tasks waiting for the batching window to close."))
	errs = append(errs, err)
	ms.inFlight, err = m.Int64ObservableGauge("dstl.upload.in_flight", metric.WithUnit("By"),
		metric.WithDescription("Bytes queued or being uploaded."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ms, nil
}

// observe makes the gauges report queueSize and inFlight, read when a
// reader collects.
func (m *metrics) observe(queueSize, inFlight func() int64) error {
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(m.queueSize, queueSize())
		o.ObserveInt64(m.inFlight, inFlight())
		return nil
	}, m.queueSize, m.inFlight)
	m.registration = reg
	return err
}

// close stops the gauges' reports.
func (m *metrics) close() error {
	if m.registration == nil {
		return nil
	}
	return m.registration.Unregister()
}
