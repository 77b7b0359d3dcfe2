package dstl

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/dstlgo/dstl/backends"
)

// FlinkKeyPrefix is the prefix of Flink's option keys for its changelog
// storage. [ParseConfig] accepts every key both bare and with this prefix.
const FlinkKeyPrefix = "state.changelog.dstl.dfs."

// Config configures a [Storage]. Start from [DefaultConfig]; the comment of
// each field gives its option key (see [ParseConfig]) and its default.
type Config struct {
	// BasePath is where objects go: a URL whose scheme selects the backend
	// (file:///var/dstl, s3://bucket/prefix, ...) or a local path.
	// Key "base-path". Required.
	BasePath string
	// Storage selects the backend by identifier; empty means by the scheme
	// of BasePath. Key "storage" (also Flink's "state.changelog.storage").
	// [ParseConfig] reads Flink's identifier "filesystem" as empty.
	Storage string
	// JobID, when set, is the prefix of every object name ("JobID/..."), so
	// that the garbage collector can list one job's objects. It may hold
	// "/"-separated segments but no empty, "." or ".." segment and no
	// control character.
	// Key "job-id". Default: empty (objects directly under BasePath).
	JobID string
	// CompressionEnabled compresses each change set on its own (zstd).
	// Key "compression.enabled". Default false.
	CompressionEnabled bool
	// PreemptivePersistThreshold: once this many bytes were appended since
	// the last persist, the writer persists on its own. Zero disables
	// preemptive persists. Key "preemptive-persist-threshold". Default 5 MiB.
	PreemptivePersistThreshold int64
	// BatchPersistDelay: upload tasks that arrive within this window go
	// into one object. Zero uploads every task at once.
	// Key "batch.persist-delay". Default 10 ms.
	BatchPersistDelay time.Duration
	// BatchPersistSizeThreshold: a batch is uploaded without waiting for
	// the window once its tasks hold this many bytes.
	// Key "batch.persist-size-threshold". Default 10 MiB.
	BatchPersistSizeThreshold int64
	// UploadBufferSize is the initial size of the buffer an object is
	// encoded into. Key "upload.buffer-size". Default 1 MiB.
	UploadBufferSize int64
	// UploadNumThreads bounds the batches uploaded at once.
	// Key "upload.num-threads". Default 5.
	UploadNumThreads int
	// DiscardNumThreads is the number of goroutines deleting released
	// objects. Key "discard.num-threads". Default 1.
	DiscardNumThreads int
	// UploadMaxInFlight bounds the bytes queued or being uploaded: at it,
	// Append and Persist (and preemptive persists) wait and
	// [Storage.Available] reports unavailable. One upload may pass the
	// limit, so the bytes in flight stay below it plus the largest single
	// upload.
	// Key "upload.max-in-flight". Default 100 MiB.
	UploadMaxInFlight int64
	// RetryPolicy is "fixed" (up to UploadMaxAttempts attempts, hedged
	// after UploadTimeout without progress, UploadNextAttemptDelay after
	// an error) or "none" (one attempt, no timeout). Key
	// "upload.retry-policy". Default "fixed". [ParseConfig] accepts either
	// in any case.
	//
	// Who retries what: a backend retries a single request (a PUT, a part,
	// a GET) on transient errors, with backoff and a timeout that grows
	// with the request's body; the engine never retries a request, but
	// starts a new attempt (a new object, one backend Put) when an attempt
	// failed or stalled (see UploadTimeout). A backend that gives up a
	// request fails its attempt, after which the engine may start another.
	RetryPolicy string
	// UploadTimeout is how long an attempt may go without progress (no
	// byte sent, as the backend reports it, or, for a backend that
	// reports nothing, no new byte of its body read), and the grace from
	// the hand-over of its body after which it must have moved
	// [MinUploadThroughput] for the time beyond; an attempt that fails
	// either has stalled, and another starts beside it (the stalled one
	// is not cancelled). Once UploadMaxAttempts attempts have started,
	// the upload fails when every one still running has stalled.
	// Key "upload.timeout". Default 1 s.
	UploadTimeout time.Duration
	// UploadMaxAttempts is the number of attempts, the first included.
	// Key "upload.max-attempts". Default 3.
	UploadMaxAttempts int
	// UploadNextAttemptDelay is the wait after a failed attempt.
	// Key "upload.next-attempt-delay". Default 500 ms.
	UploadNextAttemptDelay time.Duration
	// CacheIdleTimeout: the reader's cache drops fetched ranges unused for
	// this long. Key "download.local-cache.idle-timeout-ms" (a duration, like
	// every duration key; a bare number counts milliseconds). Default 10 min.
	CacheIdleTimeout time.Duration
	// LocalRecoveryEnabled mirrors every object the storage uploads to
	// LocalRecoveryDir, so that a process restarted on the same machine
	// recovers from local files (see [Reader.ReadPreferLocal]). It turns on
	// the local recovery the storage is given with [WithLocalRecovery]
	// (e.g. duplicating.Open); without that option it is refused at [Open]
	// and [New]. Key "local-recovery.enabled" (also Flink's
	// "state.backend.local-recovery"). Default false.
	LocalRecoveryEnabled bool
	// LocalRecoveryDir is the directory of the local copies, under which
	// they carry the same names as on the backend. It belongs to one
	// storage at a time: two processes of a job need two directories.
	// Key "local-recovery.dir". Required when LocalRecoveryEnabled.
	LocalRecoveryDir string
}

// Retry policies.
const (
	RetryFixed = "fixed"
	RetryNone  = "none"
)

// DefaultConfig returns the defaults, with basePath as the base path.
func DefaultConfig(basePath string) Config {
	return Config{
		BasePath:                   basePath,
		PreemptivePersistThreshold: 5 << 20,
		BatchPersistDelay:          10 * time.Millisecond,
		BatchPersistSizeThreshold:  10 << 20,
		UploadBufferSize:           1 << 20,
		UploadNumThreads:           5,
		DiscardNumThreads:          1,
		UploadMaxInFlight:          100 << 20,
		RetryPolicy:                RetryFixed,
		UploadTimeout:              time.Second,
		UploadMaxAttempts:          3,
		UploadNextAttemptDelay:     500 * time.Millisecond,
		CacheIdleTimeout:           10 * time.Minute,
	}
}

// ErrInvalidConfig is wrapped by every error of [ParseConfig] and
// [Config.Validate]: an unknown option key, a value that does not parse, or
// a value out of range, and by a backend's error for a base path or URL
// parameter that is not valid. It is [backends.ErrInvalidConfig].
var ErrInvalidConfig = backends.ErrInvalidConfig

// flinkStorageKey is Flink's key selecting the changelog storage.
const flinkStorageKey = "state.changelog.storage"

// flinkFilesystemStorage is the identifier of Flink's changelog storage on
// file systems. It picks the file system by the scheme of the base path,
// which is what an empty [Config.Storage] does.
const flinkFilesystemStorage = "filesystem"

// flinkLocalRecoveryKey is Flink's key enabling local recovery.
const flinkLocalRecoveryKey = "state.backend.local-recovery"

// cfgOption is one option key: how to parse a value into a Config, how to
// format the Config's value back, and how to check it.
type cfgOption struct {
	key    string   // bare key
	extra  []string // further accepted spellings, besides key and FlinkKeyPrefix+key
	parse  func(c *Config, v string) error
	format func(c *Config) string
	check  func(c *Config) error // nil: any value is valid
}

// errRequired is returned by the check of a required option left empty.
var errRequired = errors.New("required")

// cfgOptions lists every option, in the order of the Config fields.
var cfgOptions = []cfgOption{
	cfgStringOpt("base-path", func(c *Config) *string { return &c.BasePath }, func(c *Config) error {
		if strings.TrimSpace(c.BasePath) == "" {
			return errRequired
		}
		return nil
	}),
	{
		key:   "storage",
		extra: []string{flinkStorageKey},
		parse: func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if v == flinkFilesystemStorage {
				v = ""
			}
			c.Storage = v
			return nil
		},
		format: func(c *Config) string { return c.Storage },
	},
	cfgStringOpt("job-id", func(c *Config) *string { return &c.JobID }, func(c *Config) error { return cfgCheckJobID(c.JobID) }),
	{
		key: "compression.enabled",
		parse: func(c *Config, v string) error {
			b, err := cfgParseBool(v)
			c.CompressionEnabled = b
			return err
		},
		format: func(c *Config) string { return strconv.FormatBool(c.CompressionEnabled) },
	},
	cfgSizeOpt("preemptive-persist-threshold", 0, func(c *Config) *int64 { return &c.PreemptivePersistThreshold }),
	cfgDurationOpt("batch.persist-delay", false, func(c *Config) *time.Duration { return &c.BatchPersistDelay }),
	cfgSizeOpt("batch.persist-size-threshold", 1, func(c *Config) *int64 { return &c.BatchPersistSizeThreshold }),
	cfgSizeOpt("upload.buffer-size", 1, func(c *Config) *int64 { return &c.UploadBufferSize }),
	cfgIntOpt("upload.num-threads", 1, func(c *Config) *int { return &c.UploadNumThreads }),
	cfgIntOpt("discard.num-threads", 1, func(c *Config) *int { return &c.DiscardNumThreads }),
	cfgSizeOpt("upload.max-in-flight", 1, func(c *Config) *int64 { return &c.UploadMaxInFlight }),
	{
		key: "upload.retry-policy",
		parse: func(c *Config, v string) error {
			c.RetryPolicy = strings.ToLower(strings.TrimSpace(v))
			return cfgCheckRetryPolicy(c.RetryPolicy)
		},
		format: func(c *Config) string { return c.RetryPolicy },
		check:  func(c *Config) error { return cfgCheckRetryPolicy(c.RetryPolicy) },
	},
	{
		key: "upload.timeout",
		parse: func(c *Config, v string) error {
			d, err := cfgParseDuration(v)
			c.UploadTimeout = d
			return err
		},
		format: func(c *Config) string { return cfgFormatDuration(c.UploadTimeout) },
		check: func(c *Config) error {
			if c.RetryPolicy == RetryNone {
				return nil // unused
			}
			return cfgCheckDuration(c.UploadTimeout, true)
		},
	},
	cfgIntOpt("upload.max-attempts", 1, func(c *Config) *int { return &c.UploadMaxAttempts }),
	cfgDurationOpt("upload.next-attempt-delay", false, func(c *Config) *time.Duration { return &c.UploadNextAttemptDelay }),
	cfgDurationOpt("download.local-cache.idle-timeout-ms", true, func(c *Config) *time.Duration { return &c.CacheIdleTimeout }),
	{
		key:   "local-recovery.enabled",
		extra: []string{flinkLocalRecoveryKey},
		parse: func(c *Config, v string) error {
			b, err := cfgParseBool(v)
			c.LocalRecoveryEnabled = b
			return err
		},
		format: func(c *Config) string { return strconv.FormatBool(c.LocalRecoveryEnabled) },
	},
	cfgStringOpt("local-recovery.dir", func(c *Config) *string { return &c.LocalRecoveryDir }, func(c *Config) error {
		if c.LocalRecoveryEnabled && strings.TrimSpace(c.LocalRecoveryDir) == "" {
			return errors.New("required when local-recovery.enabled is true")
		}
		return nil
	}),
}

// cfgOptionByKey maps every accepted spelling of a key to its option.
var cfgOptionByKey = func() map[string]*cfgOption {
	m := make(map[string]*cfgOption, 3*len(cfgOptions))
	for i := range cfgOptions {
		o := &cfgOptions[i]
		for _, k := range append([]string{o.key, FlinkKeyPrefix + o.key}, o.extra...) {
			m[k] = o
		}
	}
	return m
}()

func cfgStringOpt(key string, field func(*Config) *string, check func(*Config) error) cfgOption {
	return cfgOption{
		key:    key,
		parse:  func(c *Config, v string) error { *field(c) = strings.TrimSpace(v); return nil },
		format: func(c *Config) string { return *field(c) },
		check:  check,
	}
}

func cfgIntOpt(key string, minimum int, field func(*Config) *int) cfgOption {
	return cfgOption{
		key: key,
		parse: func(c *Config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return errors.New("not an integer")
			}
			*field(c) = n
			return nil
		},
		format: func(c *Config) string { return strconv.Itoa(*field(c)) },
		check: func(c *Config) error {
			if *field(c) < minimum {
				return fmt.Errorf("must be at least %d", minimum)
			}
			return nil
		},
	}
}

func cfgSizeOpt(key string, minimum int64, field func(*Config) *int64) cfgOption {
	return cfgOption{
		key: key,
		parse: func(c *Config, v string) error {
			n, err := cfgParseSize(v)
			*field(c) = n
			return err
		},
		format: func(c *Config) string { return cfgFormatSize(*field(c)) },
		check: func(c *Config) error {
			switch n := *field(c); {
			case minimum > 0 && n <= 0:
				return errors.New("must be greater than 0")
			case n < 0:
				return errors.New("must not be negative")
			}
			return nil
		},
	}
}

func cfgDurationOpt(key string, positive bool, field func(*Config) *time.Duration) cfgOption {
	return cfgOption{
		key: key,
		parse: func(c *Config, v string) error {
			d, err := cfgParseDuration(v)
			*field(c) = d
			return err
		},
		format: func(c *Config) string { return cfgFormatDuration(*field(c)) },
		check:  func(c *Config) error { return cfgCheckDuration(*field(c), positive) },
	}
}

func cfgCheckDuration(d time.Duration, positive bool) error {
	switch {
	case positive && d <= 0:
		return errors.New("must be greater than 0")
	case d < 0:
		return errors.New("must not be negative")
	}
	return nil
}

func cfgCheckRetryPolicy(p string) error {
	if p != RetryFixed && p != RetryNone {
		return fmt.Errorf("want %q or %q", RetryFixed, RetryNone)
	}
	return nil
}

// cfgBadValue is the error for an option whose value (as given, under key
// as given) does not parse or is out of range.
func cfgBadValue(key, value string, err error) error {
	if errors.Is(err, errRequired) {
		return fmt.Errorf("%w: option %q is required", ErrInvalidConfig, key)
	}
	return fmt.Errorf("%w: option %q: bad value %q: %w", ErrInvalidConfig, key, value, err)
}

// ParseConfig builds a Config from option keys and values, starting from
// [DefaultConfig], and validates it as [Config.Validate] does (so
// "base-path" is required).
//
// Every key is accepted bare ("batch.persist-delay") and with
// [FlinkKeyPrefix] ("state.changelog.dstl.dfs.batch.persist-delay");
// "storage" also as Flink's "state.changelog.storage". Giving one option
// under two spellings is an error unless both values mean the same.
//
// Values follow Flink's syntax; surrounding white space is ignored:
//   - sizes: an integer and an optional unit, case-insensitive, with or
//     without a space: b or bytes; k, kb, kib or kibibytes; m, mb, mib or
//     mebibytes; g, gb, gib or gibibytes; t, tb, tib or tebibytes. Every
//     unit is binary, as in Flink: "5 mb" is 5 MiB. "1048576" is 1 MiB.
//   - durations: an integer and an optional unit, case-insensitive, with or
//     without a space: ns (nano, nanos, nanosecond[s]); us or µs (micro,
//     micros, microsecond[s]); ms (milli, millis, millisecond[s]); s (sec,
//     secs, second[s]); min or m (mins, minute[s]); h (hour[s]); d (day[s]).
//     A bare integer counts milliseconds, as in Flink. Go's
//     [time.ParseDuration] forms such as "1m30s" or "1.5s" are accepted too.
//   - booleans: true or false, case-insensitive.
//   - integers: decimal.
//   - upload.retry-policy: fixed or none, case-insensitive.
//
// Every error wraps [ErrInvalidConfig]. An unknown key is reported with the
// list of known keys; a value that does not parse or is out of range with
// its key and value as given. All problems found are reported together.
func ParseConfig(opts map[string]string) (Config, error) {
	c := DefaultConfig("")
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	type given struct{ key, value, canonical string }
	first := map[*cfgOption]given{}
	var unknown []string
	var errs []error
	for _, k := range keys {
		v := opts[k]
		o, ok := cfgOptionByKey[k]
		if !ok {
			unknown = append(unknown, strconv.Quote(k))
			continue
		}
		scratch := DefaultConfig("")
		if err := o.parse(&scratch, v); err != nil {
			errs = append(errs, cfgBadValue(k, v, err))
			continue
		}
		canonical := o.format(&scratch)
		if prev, dup := first[o]; dup {
			if prev.canonical != canonical {
				errs = append(errs, fmt.Errorf("%w: option %q given twice with different values: %q = %q and %q = %q",
					ErrInvalidConfig, o.key, prev.key, prev.value, k, v))
			}
			continue
		}
		first[o] = given{k, v, canonical}
		_ = o.parse(&c, v) // cannot fail: it parsed above
	}
	if len(unknown) > 0 {
		errs = append([]error{fmt.Errorf("%w: unknown option %s (known options, bare or with prefix %q: %s; and %q for storage)",
			ErrInvalidConfig, strings.Join(unknown, ", "), FlinkKeyPrefix, strings.Join(cfgKnownKeys(), ", "), flinkStorageKey)}, errs...)
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	// Validate, naming each option as given.
	for i := range cfgOptions {
		o := &cfgOptions[i]
		if o.check == nil {
			continue
		}
		if err := o.check(&c); err != nil {
			if g, ok := first[o]; ok {
				errs = append(errs, cfgBadValue(g.key, g.value, err))
			} else {
				errs = append(errs, cfgBadValue(o.key, o.format(&c), err))
			}
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// cfgKnownKeys returns the bare keys.
func cfgKnownKeys() []string {
	keys := make([]string, 0, len(cfgOptions))
	for _, o := range cfgOptions {
		keys = append(keys, o.key)
	}
	return keys
}

// Options returns the configuration as bare option keys and values, every
// option included: [ParseConfig] of the result yields c again, if c is
// valid. Sizes and durations are written in Flink's syntax ("5 mb",
// "10 ms"), so Flink accepts them too.
func (c Config) Options() map[string]string {
	m := make(map[string]string, len(cfgOptions))
	for i := range cfgOptions {
		m[cfgOptions[i].key] = cfgOptions[i].format(&c)
	}
	return m
}

// Validate checks the configuration:
//   - base-path is not empty;
//   - job-id, when set, has no empty, "." or ".." segment and no control
//     character;
//   - preemptive-persist-threshold is at least 0 (0 disables preemptive
//     persists);
//   - batch.persist-delay and upload.next-attempt-delay are at least 0;
//   - batch.persist-size-threshold, upload.buffer-size, upload.max-in-flight
//     and download.local-cache.idle-timeout-ms are greater than 0;
//   - upload.num-threads, discard.num-threads and upload.max-attempts are at
//     least 1;
//   - upload.retry-policy is "fixed" or "none" (exactly, in lower case);
//   - upload.timeout is greater than 0 under the policy "fixed";
//   - local-recovery.dir is set when local-recovery.enabled is true.
//
// Each problem names the option's bare key and the bad value; all are
// reported together, and the error wraps [ErrInvalidConfig].
func (c Config) Validate() error {
	var errs []error
	for i := range cfgOptions {
		o := &cfgOptions[i]
		if o.check == nil {
			continue
		}
		if err := o.check(&c); err != nil {
			errs = append(errs, cfgBadValue(o.key, o.format(&c), err))
		}
	}
	return errors.Join(errs...)
}

// cfgCheckJobID checks that id is usable as a prefix of object names.
func cfgCheckJobID(id string) error {
	if id == "" {
		return nil
	}
	if strings.IndexFunc(id, unicode.IsControl) >= 0 {
		return errors.New("must not hold control characters")
	}
	for _, seg := range strings.Split(id, "/") {
		switch seg {
		case "":
			return errors.New(`must not start or end with "/" or hold "//"`)
		case ".", "..":
			return fmt.Errorf("must not hold the segment %q", seg)
		}
	}
	return nil
}

func cfgParseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("want true or false")
}

// cfgSplitNumber splits "12 unit" into 12 and "unit" (lower case). ok is
// false unless s starts with a decimal digit and the number fits an int64.
func cfgSplitNumber(s string) (n int64, unit string, ok bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, "", false
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return n, strings.ToLower(strings.TrimSpace(s[i:])), true
}

var cfgSizeUnits = map[string]int64{
	"": 1, "b": 1, "bytes": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "kibibytes": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "mebibytes": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "gibibytes": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40, "tebibytes": 1 << 40,
}

// cfgParseSize parses a size in Flink's MemorySize syntax (see ParseConfig).
func cfgParseSize(v string) (int64, error) {
	n, unit, ok := cfgSplitNumber(strings.TrimSpace(v))
	if !ok {
		return 0, errors.New(`not a size (want an integer and an optional unit, e.g. "5 mb", "64kb", "1048576")`)
	}
	mult, ok := cfgSizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("unknown size unit %q (want b, k, kb, m, mb, g, gb, t, tb, ...)", unit)
	}
	if n > math.MaxInt64/mult {
		return 0, errors.New("size overflows 64 bits")
	}
	return n * mult, nil
}

// cfgFormatSize writes n in the largest binary unit that divides it, or in
// bytes if n is not positive.
func cfgFormatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"tb", 1 << 40}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if n > 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

var cfgDurationUnits = func() map[string]time.Duration {
	m := map[string]time.Duration{}
	for _, u := range []struct {
		d     time.Duration
		names []string
	}{
		{time.Nanosecond, []string{"ns", "nano", "nanos", "nanosecond", "nanoseconds"}},
		{time.Microsecond, []string{"us", "µs", "μs", "micro", "micros", "microsecond", "microseconds"}},
		{time.Millisecond, []string{"", "ms", "milli", "millis", "millisecond", "milliseconds"}},
		{time.Second, []string{"s", "sec", "secs", "second", "seconds"}},
		{time.Minute, []string{"m", "min", "mins", "minute", "minutes"}},
		{time.Hour, []string{"h", "hour", "hours"}},
		{24 * time.Hour, []string{"d", "day", "days"}},
	} {
		for _, n := range u.names {
			m[n] = u.d
		}
	}
	return m
}()

// cfgParseDuration parses a duration in Flink's syntax, or Go's (see
// ParseConfig).
func cfgParseDuration(v string) (time.Duration, error) {
	s := strings.TrimSpace(v)
	if n, unit, ok := cfgSplitNumber(s); ok {
		if mult, ok := cfgDurationUnits[unit]; ok {
			if n > int64(math.MaxInt64/mult) {
				return 0, errors.New("duration overflows 64 bits of nanoseconds")
			}
			return time.Duration(n) * mult, nil
		}
	}
	d, err := time.ParseDuration(strings.ToLower(s))
	if err != nil {
		return 0, errors.New(`not a duration (want an integer and a unit, e.g. "10 ms", "1 s", "10 min", a bare integer of milliseconds, or a Go duration such as "1m30s")`)
	}
	return d, nil
}

// cfgFormatDuration writes d in the largest unit that divides it, in
// Flink's syntax; a negative d in Go's.
func cfgFormatDuration(d time.Duration) string {
	if d < 0 {
		return d.String()
	}
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"min", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}} {
		if d != 0 && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + " " + u.name
		}
	}
	if d == 0 {
		return "0 ms"
	}
	return strconv.FormatInt(int64(d), 10) + " ns"
}
