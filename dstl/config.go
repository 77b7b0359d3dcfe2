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
	"github.com/dstlgo/dstl/dstl/format"
)

// FlinkKeyPrefix is the prefix of Flink's option keys for its changelog
// storage. [ParseConfig] accepts every key both bare and with this prefix.
const FlinkKeyPrefix = "state.changelog.dstl.dfs."

// Config configures a [Storage]. Start from [DefaultConfig]; each field
// names its option key. The README's options table gives every key's
// default, syntax and bounds.
type Config struct {
	// BasePath is where objects go: a URL whose scheme selects the
	// backend (s3://bucket/prefix, ...) or a local path. Key "base-path".
	BasePath string
	// Storage names the backend; empty: by BasePath's scheme. Key "storage".
	Storage string
	// JobID prefixes every object name ("JobID/..."). Key "job-id".
	JobID string
	// CompressionEnabled compresses each change set (zstd). Key
	// "compression.enabled".
	CompressionEnabled bool
	// PreemptivePersistThreshold: a writer persists on its own once this
	// many bytes were appended since its last persist; 0: never. Key
	// "preemptive-persist-threshold".
	PreemptivePersistThreshold int64
	// BatchPersistDelay: tasks arriving within it share one object. Key
	// "batch.persist-delay".
	BatchPersistDelay time.Duration
	// BatchPersistSizeThreshold: a batch of this many bytes goes at once.
	// Key "batch.persist-size-threshold".
	BatchPersistSizeThreshold int64
	// UploadBufferSize is an object buffer's initial size. Key
	// "upload.buffer-size".
	UploadBufferSize int64
	// UploadNumThreads bounds the uploads at once. While every one is
	// busy and a full batch is queued, that batch is encoded (by the
	// storage's own uploader, see uploader.Preparer), so that the next
	// free upload only puts. Key "upload.num-threads".
	UploadNumThreads int
	// DiscardNumThreads deletes released objects. Key "discard.num-threads".
	DiscardNumThreads int
	// UploadMaxInFlight bounds the bytes queued or uploading (plus one
	// upload): at it, Append and Persist wait. Key "upload.max-in-flight".
	// After a burst, a storage keeps up to twice this many bytes of
	// change-set arenas (at least 16 MiB, at most 512 MiB) for its
	// writers to reuse, until it is closed.
	UploadMaxInFlight int64
	// RetryPolicy is [RetryFixed] or [RetryNone]. Key "upload.retry-policy".
	RetryPolicy string
	// UploadTimeout: an attempt without progress for this long, or slower
	// than 256 KiB/s after it, has stalled and another starts beside it.
	// Key "upload.timeout".
	UploadTimeout time.Duration
	// UploadMaxAttempts bounds the attempts of an upload. Key
	// "upload.max-attempts".
	UploadMaxAttempts int
	// UploadNextAttemptDelay is the wait after a failed attempt. Key
	// "upload.next-attempt-delay".
	UploadNextAttemptDelay time.Duration
	// CacheIdleTimeout: the reader's cache drops ranges idle this long.
	// Key "download.local-cache.idle-timeout-ms".
	CacheIdleTimeout time.Duration
	// LocalRecoveryEnabled keeps a local copy of every object (see
	// [WithLocalRecovery]). Key "local-recovery.enabled".
	LocalRecoveryEnabled bool
	// LocalRecoveryDir holds the local copies, for one storage at a time.
	// Key "local-recovery.dir".
	LocalRecoveryDir string
	// FormatVersion is the object format version the storage writes: 1
	// (or 0) or 2 (docs/FORMAT.md). Version 2 keeps each change set's changes in
	// the order they were appended, so that an upload encodes them in one
	// pass and, without compression, starts its Put while it encodes the
	// rest: a persist costs little more than the Put of its object. It
	// costs a byte more per change (two with over 128 key groups in a
	// change set). A reader of this release reads both versions; a
	// process of an earlier release reads only version 1, so set 2 only
	// once every process that may read the log (restore from it, inspect
	// it) runs this release or a later one. Key "format.version".
	FormatVersion int
}

// Retry policies: fixed (up to UploadMaxAttempts attempts, one started
// beside a stalled attempt and UploadNextAttemptDelay after a failed one)
// or none (one attempt, no timeout).
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
		FormatVersion:              1,
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
	{
		key: "format.version",
		parse: func(c *Config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return errors.New("not an integer")
			}
			c.FormatVersion = n
			return nil
		},
		format: func(c *Config) string { return strconv.Itoa(c.FormatVersion) },
		check: func(c *Config) error {
			if c.FormatVersion != 0 && c.FormatVersion != format.Version1 && c.FormatVersion != format.Version2 {
				return fmt.Errorf("want %d or %d", format.Version1, format.Version2)
			}
			return nil
		},
	},
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
// [DefaultConfig], and validates it as [Config.Validate] does. Every key is
// accepted bare ("batch.persist-delay") and with [FlinkKeyPrefix]; values
// follow Flink's syntax (sizes "5 mb", durations "10 ms", a bare number of
// milliseconds), as the README's options section lists. Every error wraps
// [ErrInvalidConfig] and names the key and value; all problems are
// reported together.
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

// Validate checks every option against its bounds (the README's options
// table lists them). Each problem names the option's bare key and the bad
// value; all are reported together, and the error wraps
// [ErrInvalidConfig].
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
