package dstl

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/mem"
)

const testBasePath = "s3://bucket/prefix"

// withBase returns opts plus a base path, unless opts has one.
func withBase(opts map[string]string) map[string]string {
	m := maps.Clone(opts)
	if m == nil {
		m = map[string]string{}
	}
	if _, ok := m[FlinkKeyPrefix+"base-path"]; !ok {
		if _, ok := m["base-path"]; !ok {
			m["base-path"] = testBasePath
		}
	}
	return m
}

func TestParseConfigDefaults(t *testing.T) {
	got, err := ParseConfig(map[string]string{"base-path": testBasePath})
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultConfig(testBasePath); got != want {
		t.Errorf("ParseConfig(base-path only) = %+v, want defaults %+v", got, want)
	}
	if err := DefaultConfig(testBasePath).Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestParseConfigEachKey(t *testing.T) {
	tests := []struct {
		key, value string
		want       func(c *Config)
	}{
		{"base-path", "file:///var/dstl", func(c *Config) { c.BasePath = "file:///var/dstl" }},
		{"base-path", "  /var/dstl  ", func(c *Config) { c.BasePath = "/var/dstl" }},
		{"storage", "gcs", func(c *Config) { c.Storage = "gcs" }},
		{"storage", "filesystem", func(c *Config) { c.Storage = "" }},
		{"job-id", "job-42", func(c *Config) { c.JobID = "job-42" }},
		{"job-id", "team/job-42", func(c *Config) { c.JobID = "team/job-42" }},
		{"compression.enabled", "true", func(c *Config) { c.CompressionEnabled = true }},
		{"compression.enabled", "TRUE", func(c *Config) { c.CompressionEnabled = true }},
		{"compression.enabled", "False", func(c *Config) { c.CompressionEnabled = false }},
		{"preemptive-persist-threshold", "7 mb", func(c *Config) { c.PreemptivePersistThreshold = 7 << 20 }},
		{"preemptive-persist-threshold", "0", func(c *Config) { c.PreemptivePersistThreshold = NoPreemptivePersist }},
		{"batch.persist-delay", "20 ms", func(c *Config) { c.BatchPersistDelay = 20 * time.Millisecond }},
		{"batch.persist-delay", "0", func(c *Config) { c.BatchPersistDelay = NoBatchDelay }},
		{"batch.persist-size-threshold", "20mb", func(c *Config) { c.BatchPersistSizeThreshold = 20 << 20 }},
		{"upload.buffer-size", "64 kb", func(c *Config) { c.UploadBufferSize = 64 << 10 }},
		{"upload.num-threads", "8", func(c *Config) { c.UploadNumThreads = 8 }},
		{"discard.num-threads", " 2 ", func(c *Config) { c.DiscardNumThreads = 2 }},
		{"upload.max-in-flight", "1 gb", func(c *Config) { c.UploadMaxInFlight = 1 << 30 }},
		{"upload.retry-policy", "none", func(c *Config) { c.RetryPolicy = RetryNone }},
		{"upload.retry-policy", "FIXED", func(c *Config) { c.RetryPolicy = RetryFixed }},
		{"upload.timeout", "2 s", func(c *Config) { c.UploadTimeout = 2 * time.Second }},
		{"upload.max-attempts", "1", func(c *Config) { c.UploadMaxAttempts = 1 }},
		{"upload.next-attempt-delay", "1s", func(c *Config) { c.UploadNextAttemptDelay = time.Second }},
		{"upload.next-attempt-delay", "0 ms", func(c *Config) { c.UploadNextAttemptDelay = NoAttemptDelay }},
		{"download.local-cache.idle-timeout-ms", "60000", func(c *Config) { c.CacheIdleTimeout = time.Minute }},
		{"download.local-cache.idle-timeout-ms", "5 min", func(c *Config) { c.CacheIdleTimeout = 5 * time.Minute }},
		{"local-recovery.enabled", "false", func(c *Config) {}},
		{"local-recovery.dir", "/var/lib/dstl", func(c *Config) { c.LocalRecoveryDir = "/var/lib/dstl" }},
		{"format.version", "2", func(c *Config) { c.FormatVersion = 2 }},
		{"format.version", " 1 ", func(c *Config) { c.FormatVersion = 1 }},
	}
	for _, tt := range tests {
		for _, key := range []string{tt.key, FlinkKeyPrefix + tt.key} {
			t.Run(key+"="+tt.value, func(t *testing.T) {
				got, err := ParseConfig(withBase(map[string]string{key: tt.value}))
				if err != nil {
					t.Fatal(err)
				}
				want := DefaultConfig(testBasePath)
				tt.want(&want)
				if got != want {
					t.Errorf("got  %+v\nwant %+v", got, want)
				}
			})
		}
	}
}

func TestParseConfigFlinkStorageKey(t *testing.T) {
	for _, tt := range []struct{ value, want string }{{"s3", "s3"}, {"filesystem", ""}, {"", ""}} {
		got, err := ParseConfig(withBase(map[string]string{"state.changelog.storage": tt.value}))
		if err != nil {
			t.Fatalf("%q: %v", tt.value, err)
		}
		if got.Storage != tt.want {
			t.Errorf("state.changelog.storage=%q: Storage = %q, want %q", tt.value, got.Storage, tt.want)
		}
	}
}

func TestParseConfigLocalRecovery(t *testing.T) {
	for _, key := range []string{"local-recovery.enabled", FlinkKeyPrefix + "local-recovery.enabled", "state.backend.local-recovery"} {
		got, err := ParseConfig(withBase(map[string]string{key: "TRUE", "local-recovery.dir": "/var/lib/dstl"}))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !got.LocalRecoveryEnabled || got.LocalRecoveryDir != "/var/lib/dstl" {
			t.Errorf("%s=TRUE: LocalRecoveryEnabled=%v LocalRecoveryDir=%q", key, got.LocalRecoveryEnabled, got.LocalRecoveryDir)
		}
	}
	_, err := ParseConfig(withBase(map[string]string{"local-recovery.enabled": "true"}))
	checkConfigErr(t, err, `"local-recovery.dir"`, "required")
}

func TestParseConfigSizes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"1048576", 1 << 20},
		{"0", NoPreemptivePersist}, // Flink's 0: off
		{"1", 1},
		{"12b", 12},
		{"12 B", 12},
		{"12 bytes", 12},
		{"3k", 3 << 10},
		{"3 kb", 3 << 10},
		{"3KiB", 3 << 10},
		{"3 kibibytes", 3 << 10},
		{"5m", 5 << 20},
		{"5 mb", 5 << 20},
		{"5mb", 5 << 20},
		{"5MB", 5 << 20},
		{"5MiB", 5 << 20},
		{"5 mebibytes", 5 << 20},
		{"2g", 2 << 30},
		{"2 gb", 2 << 30},
		{"2 GiB", 2 << 30},
		{"2 gibibytes", 2 << 30},
		{"1t", 1 << 40},
		{"1 tb", 1 << 40},
		{"1TiB", 1 << 40},
		{"1 tebibytes", 1 << 40},
		{"  7 mb\t", 7 << 20},
		{"9223372036854775807", 1<<63 - 1},
		{"8388607 tb", 8388607 << 40},
	}
	for _, tt := range tests {
		got, err := ParseConfig(withBase(map[string]string{"preemptive-persist-threshold": tt.in}))
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if got.PreemptivePersistThreshold != tt.want {
			t.Errorf("%q = %d, want %d", tt.in, got.PreemptivePersistThreshold, tt.want)
		}
	}
}

func TestParseConfigDurations(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"250", 250 * time.Millisecond}, // bare number: milliseconds, as in Flink
		{"0", NoAttemptDelay},           // Flink's 0: no wait
		{"7ns", 7},
		{"7 nano", 7},
		{"7 nanoseconds", 7},
		{"7us", 7 * time.Microsecond},
		{"7 µs", 7 * time.Microsecond},
		{"7 micros", 7 * time.Microsecond},
		{"7ms", 7 * time.Millisecond},
		{"7 ms", 7 * time.Millisecond},
		{"7 milli", 7 * time.Millisecond},
		{"7 millis", 7 * time.Millisecond},
		{"7 millisecond", 7 * time.Millisecond},
		{"7 milliseconds", 7 * time.Millisecond},
		{"7 MS", 7 * time.Millisecond},
		{"7s", 7 * time.Second},
		{"7 sec", 7 * time.Second},
		{"7 secs", 7 * time.Second},
		{"7 second", 7 * time.Second},
		{"7 Seconds", 7 * time.Second},
		{"7m", 7 * time.Minute},
		{"7 min", 7 * time.Minute},
		{"7 minute", 7 * time.Minute},
		{"7 minutes", 7 * time.Minute},
		{"7h", 7 * time.Hour},
		{"7 hour", 7 * time.Hour},
		{"7 hours", 7 * time.Hour},
		{"2d", 48 * time.Hour},
		{"2 day", 48 * time.Hour},
		{"2 days", 48 * time.Hour},
		{"1m30s", 90 * time.Second}, // Go's syntax
		{"1.5s", 1500 * time.Millisecond},
		{"1h2m3s4ms", time.Hour + 2*time.Minute + 3*time.Second + 4*time.Millisecond},
		{"1M30S", 90 * time.Second},
		{"  3 s  ", 3 * time.Second},
	}
	for _, tt := range tests {
		got, err := ParseConfig(withBase(map[string]string{"upload.next-attempt-delay": tt.in}))
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if got.UploadNextAttemptDelay != tt.want {
			t.Errorf("%q = %v, want %v", tt.in, got.UploadNextAttemptDelay, tt.want)
		}
	}
}

// checkConfigErr checks that err wraps ErrInvalidConfig and mentions every
// one of wants.
func checkConfigErr(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", wants)
	}
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("error %q does not wrap ErrInvalidConfig", err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func TestParseConfigBadValues(t *testing.T) {
	tests := []struct {
		key, value string
		why        string // part of the message
	}{
		{"compression.enabled", "yes", "true or false"},
		{"compression.enabled", "1", "true or false"},
		{"compression.enabled", "", "true or false"},
		{"preemptive-persist-threshold", "-1", "not a size"},
		{"preemptive-persist-threshold", "1.5 mb", "unknown size unit"},
		{"preemptive-persist-threshold", "5 parsecs", "unknown size unit"},
		{"preemptive-persist-threshold", "mb", "not a size"},
		{"preemptive-persist-threshold", "", "not a size"},
		{"preemptive-persist-threshold", "9223372036854775808", "not a size"},
		{"preemptive-persist-threshold", "8388608 tb", "overflows"},
		{"batch.persist-size-threshold", "0", "greater than 0"},
		{"upload.buffer-size", "0 kb", "greater than 0"},
		{"upload.max-in-flight", "0", "greater than 0"},
		{"upload.max-in-flight", "lots", "not a size"},
		{"batch.persist-delay", "soon", "not a duration"},
		{"batch.persist-delay", "10 fortnights", "not a duration"},
		{"batch.persist-delay", "-5ms", "must not be negative"},
		{"batch.persist-delay", "", "not a duration"},
		{"upload.timeout", "0", "greater than 0"},
		{"upload.timeout", "-1s", "greater than 0"},
		{"upload.timeout", "9223372036854775807 s", "overflows"},
		{"upload.next-attempt-delay", "-1s", "must not be negative"},
		{"download.local-cache.idle-timeout-ms", "0", "greater than 0"},
		{"upload.num-threads", "0", "at least 1"},
		{"upload.num-threads", "five", "not an integer"},
		{"upload.num-threads", "2.5", "not an integer"},
		{"discard.num-threads", "-1", "at least 1"},
		{"upload.max-attempts", "0", "at least 1"},
		{"upload.retry-policy", "exponential", `"fixed" or "none"`},
		{"upload.retry-policy", "", `"fixed" or "none"`},
		{"base-path", "   ", "required"},
		{"job-id", "/abs", "must not start or end"},
		{"job-id", "a//b", "must not start or end"},
		{"job-id", "a/../b", `".."`},
		{"job-id", "a\x00b", "control"},
		{"format.version", "3", "want 1 or 2"},
		{"format.version", "-1", "want 1 or 2"},
		{"format.version", "v2", "not an integer"},
	}
	for _, tt := range tests {
		for _, key := range []string{tt.key, FlinkKeyPrefix + tt.key} {
			t.Run(key+"="+tt.value, func(t *testing.T) {
				c, err := ParseConfig(withBase(map[string]string{key: tt.value}))
				wants := []string{`"` + key + `"`, tt.why}
				if tt.key != "base-path" { // a missing value is reported as required
					wants = append(wants, `"`+tt.value+`"`)
				}
				if tt.key == "job-id" && strings.ContainsRune(tt.value, 0) {
					wants[len(wants)-1] = `"a\x00b"` // quoted
				}
				checkConfigErr(t, err, wants...)
				if c != (Config{}) {
					t.Errorf("on error, config = %+v, want zero", c)
				}
			})
		}
	}
}

func TestParseConfigMissingBasePath(t *testing.T) {
	_, err := ParseConfig(nil)
	checkConfigErr(t, err, `"base-path"`, "required")
	_, err = ParseConfig(map[string]string{"upload.num-threads": "2"})
	checkConfigErr(t, err, `"base-path"`, "required")
}

func TestParseConfigRetryPolicyNoneAllowsZeroTimeout(t *testing.T) {
	c, err := ParseConfig(withBase(map[string]string{"upload.retry-policy": "none", "upload.timeout": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RetryPolicy != RetryNone || c.UploadTimeout != 0 {
		t.Errorf("got policy %q timeout %v", c.RetryPolicy, c.UploadTimeout)
	}
}

func TestParseConfigUnknownKey(t *testing.T) {
	for _, key := range []string{"upload.threads", "state.changelog.dstl.dfs.nope", "Base-Path", "dstl.dfs.base-path", ""} {
		_, err := ParseConfig(withBase(map[string]string{key: "1"}))
		checkConfigErr(t, err, `unknown option "`+key+`"`, "base-path", "batch.persist-delay",
			"download.local-cache.idle-timeout-ms", "state.changelog.storage", FlinkKeyPrefix)
	}
	// Several unknown keys are named together, with bad values too.
	_, err := ParseConfig(withBase(map[string]string{"a": "1", "b": "2", "upload.num-threads": "x"}))
	checkConfigErr(t, err, `"a", "b"`, `"upload.num-threads"`, `"x"`)
}

func TestParseConfigTwoSpellings(t *testing.T) {
	same := []map[string]string{
		{"batch.persist-delay": "10 ms", FlinkKeyPrefix + "batch.persist-delay": "10ms"},
		{"upload.buffer-size": "5 mb", FlinkKeyPrefix + "upload.buffer-size": "5MiB"},
		{"storage": "s3", FlinkKeyPrefix + "storage": "s3", "state.changelog.storage": "s3"},
		{"storage": "", "state.changelog.storage": "filesystem"},
		{"compression.enabled": "true", FlinkKeyPrefix + "compression.enabled": "TRUE"},
	}
	for _, opts := range same {
		if _, err := ParseConfig(withBase(opts)); err != nil {
			t.Errorf("%v: %v", opts, err)
		}
	}
	differ := []map[string]string{
		{"batch.persist-delay": "10 ms", FlinkKeyPrefix + "batch.persist-delay": "20 ms"},
		{"storage": "s3", "state.changelog.storage": "gcs"},
		{"storage": "s3", FlinkKeyPrefix + "storage": "gcs"},
		{"base-path": "/a", FlinkKeyPrefix + "base-path": "/b"},
	}
	for _, opts := range differ {
		_, err := ParseConfig(opts)
		wants := []string{"given twice"}
		for k, v := range opts {
			wants = append(wants, `"`+k+`" = "`+v+`"`)
		}
		checkConfigErr(t, err, wants...)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := []struct {
		name   string
		mutate func(c *Config)
	}{
		{"defaults", func(c *Config) {}},
		{"zero: the defaults", func(c *Config) { *c = Config{BasePath: c.BasePath} }},
		{"no preemptive persist", func(c *Config) { c.PreemptivePersistThreshold = NoPreemptivePersist }},
		{"no preemptive persist, any negative", func(c *Config) { c.PreemptivePersistThreshold = -5 }},
		{"no batching delay", func(c *Config) { c.BatchPersistDelay = NoBatchDelay }},
		{"no delay between attempts", func(c *Config) { c.UploadNextAttemptDelay = NoAttemptDelay }},
		{"policy none without timeout", func(c *Config) { c.RetryPolicy = RetryNone; c.UploadTimeout = 0 }},
		{"policy none, negative timeout unused", func(c *Config) { c.RetryPolicy = RetryNone; c.UploadTimeout = -1 }},
		{"one attempt", func(c *Config) { c.UploadMaxAttempts = 1 }},
		{"nested job id", func(c *Config) { c.JobID = "a/b.c/d" }},
	}
	for _, tt := range valid {
		c := DefaultConfig(testBasePath)
		tt.mutate(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}

	invalid := []struct {
		mutate func(c *Config)
		wants  []string
	}{
		{func(c *Config) { c.BasePath = "" }, []string{`"base-path" is required`}},
		{func(c *Config) { c.BasePath = " " }, []string{`"base-path" is required`}},
		{func(c *Config) { c.JobID = "x/" }, []string{`"job-id"`, `"x/"`}},
		{func(c *Config) { c.JobID = "./x" }, []string{`"job-id"`, `"./x"`, `"."`}},
		{func(c *Config) { c.BatchPersistSizeThreshold = -1 }, []string{`"batch.persist-size-threshold"`, `"-1 bytes"`, "greater than 0"}},
		{func(c *Config) { c.UploadBufferSize = -2048 }, []string{`"upload.buffer-size"`, `"-2048 bytes"`}},
		{func(c *Config) { c.UploadMaxInFlight = -1 }, []string{`"upload.max-in-flight"`}},
		{func(c *Config) { c.UploadNumThreads = -1 }, []string{`"upload.num-threads"`, `"-1"`, "at least 1"}},
		{func(c *Config) { c.DiscardNumThreads = -3 }, []string{`"discard.num-threads"`, `"-3"`}},
		{func(c *Config) { c.UploadMaxAttempts = -2 }, []string{`"upload.max-attempts"`, `"-2"`}},
		{func(c *Config) { c.RetryPolicy = "exponential" }, []string{`"upload.retry-policy"`, `"exponential"`}},
		{func(c *Config) { c.RetryPolicy = "Fixed" }, []string{`"upload.retry-policy"`, `"Fixed"`}},
		{func(c *Config) { c.UploadTimeout = -time.Second }, []string{`"upload.timeout"`, `"-1s"`, "greater than 0"}},
		{func(c *Config) { c.CacheIdleTimeout = -time.Minute }, []string{`"download.local-cache.idle-timeout-ms"`, `"-1m0s"`}},
		{func(c *Config) { c.LocalRecoveryEnabled = true }, []string{`"local-recovery.dir"`, "required when local-recovery.enabled"}},
		{func(c *Config) { c.LocalRecoveryEnabled, c.LocalRecoveryDir = true, " " }, []string{`"local-recovery.dir"`}},
		{func(c *Config) { c.FormatVersion = 3 }, []string{`"format.version"`, `"3"`, "want 1 or 2"}},
	}
	for _, tt := range invalid {
		c := DefaultConfig(testBasePath)
		tt.mutate(&c)
		checkConfigErr(t, c.Validate(), tt.wants...)
	}

	// All problems are reported at once.
	c := DefaultConfig("")
	c.UploadNumThreads = -1
	c.RetryPolicy = "sometimes"
	checkConfigErr(t, c.Validate(), `"base-path"`, `"upload.num-threads"`, `"upload.retry-policy"`)
}

func TestConfigOptionsRoundTrip(t *testing.T) {
	all := DefaultConfig("file:///var/dstl")
	all.Storage = "local"
	all.JobID = "team/job-1"
	all.CompressionEnabled = true
	all.PreemptivePersistThreshold = NoPreemptivePersist
	all.BatchPersistDelay = NoBatchDelay
	all.BatchPersistSizeThreshold = 1500
	all.UploadBufferSize = 3 << 40
	all.UploadNumThreads = 17
	all.DiscardNumThreads = 4
	all.UploadMaxInFlight = 1<<63 - 1
	all.UploadTimeout = 1500 * time.Microsecond
	all.UploadMaxAttempts = 9
	all.UploadNextAttemptDelay = 1
	all.CacheIdleTimeout = 36 * time.Hour
	all.LocalRecoveryEnabled = true
	all.LocalRecoveryDir = "/var/lib/dstl local"
	all.FormatVersion = 2

	none := DefaultConfig("/tmp/dstl")
	none.RetryPolicy = RetryNone
	none.UploadTimeout = 0 // the default, 1 s, once filled in

	offNegative := Config{BasePath: "/tmp/dstl", PreemptivePersistThreshold: -7, BatchPersistDelay: -time.Second, UploadNextAttemptDelay: -1}

	for _, c := range []Config{DefaultConfig(testBasePath), all, none, {BasePath: testBasePath}, offNegative} {
		opts := c.Options()
		if got, want := slices.Sorted(maps.Keys(opts)), slices.Sorted(slices.Values(cfgKnownKeys())); !slices.Equal(got, want) {
			t.Errorf("Options keys = %v, want %v", got, want)
		}
		got, err := ParseConfig(opts)
		if err != nil {
			t.Fatalf("ParseConfig(%v): %v", opts, err)
		}
		c := c.WithDefaults()
		if got != c {
			t.Errorf("round trip through %v:\ngot  %+v\nwant %+v", opts, got, c)
		}
		// And with Flink's prefix.
		prefixed := map[string]string{}
		for k, v := range opts {
			prefixed[FlinkKeyPrefix+k] = v
		}
		if got, err := ParseConfig(prefixed); err != nil || got != c {
			t.Errorf("prefixed round trip: %+v, %v; want %+v", got, err, c)
		}
	}
}

func TestConfigOptionsFormat(t *testing.T) {
	opts := DefaultConfig(testBasePath).Options()
	want := map[string]string{
		"base-path":                            testBasePath,
		"storage":                              "",
		"job-id":                               "",
		"compression.enabled":                  "false",
		"preemptive-persist-threshold":         "5 mb",
		"batch.persist-delay":                  "10 ms",
		"batch.persist-size-threshold":         "10 mb",
		"upload.buffer-size":                   "1 mb",
		"upload.num-threads":                   "5",
		"discard.num-threads":                  "1",
		"upload.max-in-flight":                 "100 mb",
		"upload.retry-policy":                  "fixed",
		"upload.timeout":                       "1 s",
		"upload.max-attempts":                  "3",
		"upload.next-attempt-delay":            "500 ms",
		"download.local-cache.idle-timeout-ms": "10 min",
		"local-recovery.enabled":               "false",
		"local-recovery.dir":                   "",
		"format.version":                       "1",
	}
	if !maps.Equal(opts, want) {
		t.Errorf("Options() = %v\nwant %v", opts, want)
	}
}

// TestConfigZeroIsDefault: every zero field of a Config is its default,
// and a feature on by default is turned off by a negative value, which
// WithDefaults writes as its constant and Options as Flink's "0".
func TestConfigZeroIsDefault(t *testing.T) {
	tests := []struct {
		field string
		got   func(c Config) any
		want  any
		off   func(c *Config) // turns the feature off, when it has an off
		key   string          // the option key of off
	}{
		{"Storage", func(c Config) any { return c.Storage }, "", nil, ""},
		{"JobID", func(c Config) any { return c.JobID }, "", nil, ""},
		{"CompressionEnabled", func(c Config) any { return c.CompressionEnabled }, false, nil, ""},
		{"PreemptivePersistThreshold", func(c Config) any { return c.PreemptivePersistThreshold }, DefaultPreemptivePersistThreshold,
			func(c *Config) { c.PreemptivePersistThreshold = -3 }, "preemptive-persist-threshold"},
		{"BatchPersistDelay", func(c Config) any { return c.BatchPersistDelay }, DefaultBatchPersistDelay,
			func(c *Config) { c.BatchPersistDelay = -time.Hour }, "batch.persist-delay"},
		{"BatchPersistSizeThreshold", func(c Config) any { return c.BatchPersistSizeThreshold }, DefaultBatchPersistSizeThreshold, nil, ""},
		{"UploadBufferSize", func(c Config) any { return c.UploadBufferSize }, DefaultUploadBufferSize, nil, ""},
		{"UploadNumThreads", func(c Config) any { return c.UploadNumThreads }, DefaultUploadNumThreads, nil, ""},
		{"DiscardNumThreads", func(c Config) any { return c.DiscardNumThreads }, DefaultDiscardNumThreads, nil, ""},
		{"UploadMaxInFlight", func(c Config) any { return c.UploadMaxInFlight }, DefaultUploadMaxInFlight, nil, ""},
		{"RetryPolicy", func(c Config) any { return c.RetryPolicy }, RetryFixed, nil, ""},
		{"UploadTimeout", func(c Config) any { return c.UploadTimeout }, DefaultUploadTimeout, nil, ""},
		{"UploadMaxAttempts", func(c Config) any { return c.UploadMaxAttempts }, DefaultUploadMaxAttempts, nil, ""},
		{"UploadNextAttemptDelay", func(c Config) any { return c.UploadNextAttemptDelay }, DefaultUploadNextAttemptDelay,
			func(c *Config) { c.UploadNextAttemptDelay = -time.Millisecond }, "upload.next-attempt-delay"},
		{"CacheIdleTimeout", func(c Config) any { return c.CacheIdleTimeout }, DefaultCacheIdleTimeout, nil, ""},
		{"LocalRecoveryEnabled", func(c Config) any { return c.LocalRecoveryEnabled }, false, nil, ""},
		{"LocalRecoveryDir", func(c Config) any { return c.LocalRecoveryDir }, "", nil, ""},
		{"FormatVersion", func(c Config) any { return c.FormatVersion }, DefaultFormatVersion, nil, ""},
	}
	if n := reflect.TypeFor[Config]().NumField(); n != len(tests)+1 { // and BasePath
		t.Fatalf("Config has %d fields, the table %d and BasePath: add the new ones", n, len(tests))
	}
	filled := Config{BasePath: testBasePath}.WithDefaults()
	if filled != DefaultConfig(testBasePath) {
		t.Errorf("zero Config with defaults = %+v, want DefaultConfig %+v", filled, DefaultConfig(testBasePath))
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			if got := tt.got(filled); got != tt.want {
				t.Errorf("zero %s = %v once filled in, want %v", tt.field, got, tt.want)
			}
			if tt.off == nil {
				return
			}
			c := Config{BasePath: testBasePath}
			tt.off(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("off: %v", err)
			}
			c = c.WithDefaults()
			if got := reflect.ValueOf(tt.got(c)).Int(); got != -1 {
				t.Errorf("off %s = %v once filled in, want its constant, -1", tt.field, got)
			}
			if v := c.Options()[tt.key]; v != "0 bytes" && v != "0 ms" {
				t.Errorf("off %s: option %q = %q, want Flink's 0", tt.field, tt.key, v)
			}
		})
	}
}

// TestNewZeroConfig: a storage made from the zero Config has the defaults.
func TestNewZeroConfig(t *testing.T) {
	b, err := mem.Open(t.Context(), mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{}, b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.Config(), DefaultConfig("(backend given)"); got != want {
		t.Errorf("Config() = %+v, want %+v", got, want)
	}
}
