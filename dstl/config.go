package dstl

import (
	"cmp"
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

// Config configures a [Storage]. The zero value of every field is its
// default: [Open] and [New] fill the defaults in ([Config.WithDefaults]),
// so a Config needs only the fields it changes. A feature that is on by
// default is turned off by a negative value, which the constants
// [NoPreemptivePersist], [NoBatchDelay] and [NoAttemptDelay] spell. Each
// field names its option key, which [ParseConfig] takes in Flink's syntax.
type Config struct {
	// BasePath is where objects go: a URL whose scheme selects the
	// backend (s3://bucket/prefix, ...) or a local path. [Open] requires
	// it; [New] does not use it. Key "base-path".
	BasePath string
	// Storage names the backend. The default, empty, chooses it by the
	// URL scheme of BasePath. Key "storage".
	Storage string
	// JobID prefixes every object name ("JobID/..."). The default, empty,
	// puts objects directly under the base path. It must not start or end
	// with "/", hold "//", a "." or ".." segment, or a control character.
	// Key "job-id".
	JobID string
	// CompressionEnabled compresses each change set (zstd). The default is
	// false. Key "compression.enabled".
	CompressionEnabled bool
	// PreemptivePersistThreshold is the number of bytes appended since a
	// writer's last persist at which the writer persists on its own. The
	// default is 5 MiB ([DefaultPreemptivePersistThreshold]). A negative
	// value ([NoPreemptivePersist]) turns pre-emptive persists off. Key
	// "preemptive-persist-threshold", where "0" turns them off.
	PreemptivePersistThreshold int64
	// BatchPersistDelay is how long a queued upload task waits for others
	// to share its object. The default is 10 ms ([DefaultBatchPersistDelay]).
	// A negative value ([NoBatchDelay]) uploads at once what is queued,
	// without waiting. Key "batch.persist-delay", where "0" uploads at once.
	BatchPersistDelay time.Duration
	// BatchPersistSizeThreshold is the size in bytes at which a batch goes
	// at once, without waiting for the delay. The default is 10 MiB
	// ([DefaultBatchPersistSizeThreshold]); a negative value is not valid.
	// Key "batch.persist-size-threshold".
	BatchPersistSizeThreshold int64
	// UploadBufferSize is an object buffer's initial size in bytes. The
	// default is 1 MiB ([DefaultUploadBufferSize]); a negative value is not
	// valid. Key "upload.buffer-size".
	UploadBufferSize int64
	// UploadNumThreads bounds the uploads at once. While every one is
	// busy and a full batch is queued, that batch is encoded (by the
	// storage's own uploader, see uploader.Preparer), so that the next
	// free upload only puts. The default is 5
	// ([DefaultUploadNumThreads]); a negative value is not valid. Key
	// "upload.num-threads".
	UploadNumThreads int
	// DiscardNumThreads is the number of goroutines that delete released
	// objects. The default is 1 ([DefaultDiscardNumThreads]); a negative
	// value is not valid. Key "discard.num-threads".
	DiscardNumThreads int
	// UploadMaxInFlight bounds the bytes queued or uploading (plus one
	// upload): at it, Append and Persist wait. After a burst, a storage
	// keeps up to twice this many bytes of change-set arenas (at least
	// 16 MiB, at most 512 MiB) for its writers to reuse, until it is
	// closed. The default is 100 MiB ([DefaultUploadMaxInFlight]); a
	// negative value is not valid. Key "upload.max-in-flight".
	UploadMaxInFlight int64
	// RetryPolicy is [RetryFixed] or [RetryNone]. The default, empty, is
	// RetryFixed. Key "upload.retry-policy".
	RetryPolicy string
	// UploadTimeout is how long an attempt may go without progress, and
	// how long it has before a floor of 256 KiB/s applies: an attempt
	// slower than that has stalled, and another starts beside it. The
	// default is 1 s ([DefaultUploadTimeout]); a negative value is not
	// valid. [RetryNone] does not use it. Key "upload.timeout".
	UploadTimeout time.Duration
	// UploadMaxAttempts bounds the attempts of an upload, the first one
	// included. The default is 3 ([DefaultUploadMaxAttempts]); a negative
	// value is not valid. Key "upload.max-attempts".
	UploadMaxAttempts int
	// UploadNextAttemptDelay is the wait after a failed attempt before the
	// next one. The default is 500 ms ([DefaultUploadNextAttemptDelay]).
	// A negative value ([NoAttemptDelay]) starts the next attempt at
	// once. Key "upload.next-attempt-delay", where "0" starts it at once.
	UploadNextAttemptDelay time.Duration
	// CacheIdleTimeout is how long the reader's cache keeps a range that
	// no read uses. The default is 10 minutes ([DefaultCacheIdleTimeout]);
	// a negative value is not valid. Key
	// "download.local-cache.idle-timeout-ms".
	CacheIdleTimeout time.Duration
	// LocalRecoveryEnabled keeps a local copy of every object (see
	// [WithLocalRecovery]). The default is false. Key
	// "local-recovery.enabled".
	LocalRecoveryEnabled bool
	// LocalRecoveryDir holds the local copies, for one storage at a time.
	// It is required when LocalRecoveryEnabled is true, and not used
	// otherwise. Key "local-recovery.dir".
	LocalRecoveryDir string
	// FormatVersion is the object format version the storage writes, 1
	// or 2 (docs/FORMAT.md). The default is 1 ([DefaultFormatVersion]).
	// Version 2 keeps each change set's changes in the order they were
	// appended, so that an upload encodes them in one pass and, without
	// compression, starts its Put while it encodes the rest: a persist
	// costs little more than the Put of its object. It costs a byte more
	// per change (two with over 128 key groups in a change set). A reader of this release reads both versions; a
	// process of an earlier release reads only version 1, so set 2 only
	// once every process that may read the log (restore from it, inspect
	// it) runs this release or a later one. Key "format.version".
	FormatVersion int
}

// The defaults of [Config]'s fields, which a zero field takes.
const (
	DefaultPreemptivePersistThreshold int64         = 5 << 20
	DefaultBatchPersistDelay          time.Duration = 10 * time.Millisecond
	DefaultBatchPersistSizeThreshold  int64         = 10 << 20
	DefaultUploadBufferSize           int64         = 1 << 20
	DefaultUploadNumThreads                         = 5
	DefaultDiscardNumThreads                        = 1
	DefaultUploadMaxInFlight          int64         = 100 << 20
	DefaultUploadTimeout                            = time.Second
	DefaultUploadMaxAttempts                        = 3
	DefaultUploadNextAttemptDelay                   = 500 * time.Millisecond
	DefaultCacheIdleTimeout                         = 10 * time.Minute
	DefaultFormatVersion                            = 1
)

// The values of [Config]'s fields that turn a feature off. Any negative
// value does the same; [Config.WithDefaults] writes these.
const (
	// NoPreemptivePersist is [Config.PreemptivePersistThreshold] for no
	// pre-emptive persists: a writer persists only when asked to.
	NoPreemptivePersist int64 = -1
	// NoBatchDelay is [Config.BatchPersistDelay] for no wait: what is
	// queued is uploaded at once, in batches of the tasks queued together.
	NoBatchDelay time.Duration = -1
	// NoAttemptDelay is [Config.UploadNextAttemptDelay] for no wait: the
	// next attempt starts as soon as one fails.
	NoAttemptDelay time.Duration = -1
)

// Retry policies: fixed (up to UploadMaxAttempts attempts, one started
// beside a stalled attempt and UploadNextAttemptDelay after a failed one)
// or none (one attempt, no timeout).
const (
	RetryFixed = "fixed"
	RetryNone  = "none"
)

// DefaultConfig returns the defaults, with basePath as the base path: the
// Config that [ParseConfig] starts from, the same as
// Config{BasePath: basePath}.WithDefaults().
func DefaultConfig(basePath string) Config {
	return Config{BasePath: basePath}.WithDefaults()
}

// WithDefaults returns c with the default of every zero field filled in,
// and every field that is turned off by a negative value set to its
// constant ([NoPreemptivePersist], [NoBatchDelay], [NoAttemptDelay]).
// Other fields are kept as they are, also those that are not valid
// ([Config.Validate] says so).
func (c Config) WithDefaults() Config {
	c.PreemptivePersistThreshold = defaultOrOff(c.PreemptivePersistThreshold, DefaultPreemptivePersistThreshold, NoPreemptivePersist)
	c.BatchPersistDelay = defaultOrOff(c.BatchPersistDelay, DefaultBatchPersistDelay, NoBatchDelay)
	c.BatchPersistSizeThreshold = cmp.Or(c.BatchPersistSizeThreshold, DefaultBatchPersistSizeThreshold)
	c.UploadBufferSize = cmp.Or(c.UploadBufferSize, DefaultUploadBufferSize)
	c.UploadNumThreads = cmp.Or(c.UploadNumThreads, DefaultUploadNumThreads)
	c.DiscardNumThreads = cmp.Or(c.DiscardNumThreads, DefaultDiscardNumThreads)
	c.UploadMaxInFlight = cmp.Or(c.UploadMaxInFlight, DefaultUploadMaxInFlight)
	c.RetryPolicy = cmp.Or(c.RetryPolicy, RetryFixed)
	c.UploadTimeout = cmp.Or(c.UploadTimeout, DefaultUploadTimeout)
	c.UploadMaxAttempts = cmp.Or(c.UploadMaxAttempts, DefaultUploadMaxAttempts)
	c.UploadNextAttemptDelay = defaultOrOff(c.UploadNextAttemptDelay, DefaultUploadNextAttemptDelay, NoAttemptDelay)
	c.CacheIdleTimeout = cmp.Or(c.CacheIdleTimeout, DefaultCacheIdleTimeout)
	c.FormatVersion = cmp.Or(c.FormatVersion, DefaultFormatVersion)
	return c
}

// defaultOrOff returns def for a zero v, off for a negative one, and v
// otherwise.
func defaultOrOff[T int64 | time.Duration](v, def, off T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return off
	}
	return v
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
	cfgSizeOpt("preemptive-persist-threshold", NoPreemptivePersist, func(c *Config) *int64 { return &c.PreemptivePersistThreshold }),
	cfgDurationOpt("batch.persist-delay", NoBatchDelay, func(c *Config) *time.Duration { return &c.BatchPersistDelay }),
	cfgSizeOpt("batch.persist-size-threshold", 0, func(c *Config) *int64 { return &c.BatchPersistSizeThreshold }),
	cfgSizeOpt("upload.buffer-size", 0, func(c *Config) *int64 { return &c.UploadBufferSize }),
	cfgIntOpt("upload.num-threads", 1, func(c *Config) *int { return &c.UploadNumThreads }),
	cfgIntOpt("discard.num-threads", 1, func(c *Config) *int { return &c.DiscardNumThreads }),
	cfgSizeOpt("upload.max-in-flight", 0, func(c *Config) *int64 { return &c.UploadMaxInFlight }),
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
			return cfgCheckPositive(c.UploadTimeout, 0)
		},
	},
	cfgIntOpt("upload.max-attempts", 1, func(c *Config) *int { return &c.UploadMaxAttempts }),
	cfgDurationOpt("upload.next-attempt-delay", NoAttemptDelay, func(c *Config) *time.Duration { return &c.UploadNextAttemptDelay }),
	cfgDurationOpt("download.local-cache.idle-timeout-ms", 0, func(c *Config) *time.Duration { return &c.CacheIdleTimeout }),
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

// cfgSizeOpt is a size option. With off negative, the option's "0" (a
// zero field is its default) turns a feature off: the field is off then,
// and any negative field means off. With off 0, the field must be
// positive once the defaults are filled in, and so must a value parsed.
func cfgSizeOpt(key string, off int64, field func(*Config) *int64) cfgOption {
	return cfgNumOpt(key, off, field, cfgParseSize, cfgFormatSize)
}

// cfgDurationOpt is a duration option; off is as for cfgSizeOpt. A
// negative duration does not parse: off is "0".
func cfgDurationOpt(key string, off time.Duration, field func(*Config) *time.Duration) cfgOption {
	parse := func(v string) (time.Duration, error) {
		d, err := cfgParseDuration(v)
		if err == nil && d < 0 {
			err = errors.New("must not be negative")
		}
		return d, err
	}
	return cfgNumOpt(key, off, field, parse, cfgFormatDuration)
}

// cfgNumOpt is a size or a duration option, which parse reads and show
// writes; off is as for cfgSizeOpt.
func cfgNumOpt[T int64 | time.Duration](key string, off T, field func(*Config) *T, parse func(string) (T, error), show func(T) string) cfgOption {
	return cfgOption{
		key: key,
		parse: func(c *Config, v string) error {
			n, err := parse(v)
			if n == 0 && off < 0 {
				n = off
			}
			*field(c) = n
			return err
		},
		format: func(c *Config) string {
			if n := *field(c); n >= 0 || off == 0 {
				return show(n)
			}
			return show(0)
		},
		check: func(c *Config) error { return cfgCheckPositive(*field(c), off) },
	}
}

// cfgCheckPositive checks a size or a duration option's value n; off is
// as for cfgSizeOpt.
func cfgCheckPositive[T int64 | time.Duration](n, off T) error {
	if off == 0 && n <= 0 {
		return errors.New("must be greater than 0")
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
// follow Flink's syntax: a size is an integer and an optional binary unit
// ("5 mb", "64kb", "1048576"), a duration an integer and an optional unit
// ("10 ms", "1 s", "10 min"; a bare integer counts milliseconds) or Go's
// form ("1m30s"), a boolean true or false. A value keeps
// its meaning in Flink: "0" is not the default. For
// "preemptive-persist-threshold", "batch.persist-delay" and
// "upload.next-attempt-delay", "0" turns the feature off (the field is
// [NoPreemptivePersist], [NoBatchDelay] or [NoAttemptDelay]); for the
// other sizes, durations and numbers of threads or attempts, "0" is not
// valid. Every error wraps [ErrInvalidConfig] and names the key and value;
// all problems are reported together.
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

// Options returns the configuration, its defaults filled in, as bare
// option keys and values, every option included: [ParseConfig] of the
// result yields c.WithDefaults(), if c is valid. Sizes and durations are
// written in Flink's syntax ("5 mb", "10 ms"), so Flink accepts them too;
// a feature turned off is written "0".
func (c Config) Options() map[string]string {
	c = c.WithDefaults()
	m := make(map[string]string, len(cfgOptions))
	for i := range cfgOptions {
		m[cfgOptions[i].key] = cfgOptions[i].format(&c)
	}
	return m
}

// Validate checks every option, its default filled in where it is zero,
// against the bounds the fields' documentation states. Each problem names
// the option's bare key and the bad value; all are reported together, and
// the error wraps [ErrInvalidConfig].
func (c Config) Validate() error {
	c = c.WithDefaults()
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
