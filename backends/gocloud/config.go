package gocloud

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gocloud.dev/blob"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
)

// Defaults of [Config].
const (
	// DefaultPartSize is the default part size (the driver's buffer size):
	// larger objects go up in parts of this size where the driver uploads
	// in parts (s3blob, gcsblob, azureblob). S3 needs parts of at least
	// 5 MiB.
	DefaultPartSize = 5 << 20
	// DefaultConcurrency is the default number of parts uploaded at once.
	DefaultConcurrency = 4
)

// Config configures a gocloud [Backend]. Start from [DefaultConfig].
type Config struct {
	// URL is a gocloud.dev/blob bucket URL, such as "mem://",
	// "file:///var/dstl", "s3://bucket?region=eu-west-1",
	// "gs://bucket" or "azblob://container". Its query parameters are the
	// driver's own. Required unless Bucket is set. [ParseURL] fills it from
	// a base path, having taken the object prefix and this package's own
	// parameters out.
	URL string
	// Bucket is a ready bucket to use instead of opening URL. The backend
	// does not close it: it stays the caller's. When Bucket is set, URL is
	// used only to name the bucket in errors (optional).
	Bucket *blob.Bucket
	// Prefix is put before every object name, e.g. "jobs/42/" (usually
	// ending in "/"). Default none.
	Prefix string
	// PartSize is the driver's buffer size: objects larger than this go up
	// in parts of this size, as the driver does it (S3 multipart upload,
	// GCS resumable chunks, Azure staged blocks), smaller ones in one
	// request; 0 lets the driver choose (s3blob then uploads in parts only
	// above 16 MiB). S3 needs at least 5 MiB. memblob and fileblob keep
	// objects whole.
	// Default [DefaultPartSize] (URL parameter "part_size": bytes, or with KiB, MiB or GiB).
	PartSize int
	// Concurrency bounds the parts of one object uploaded at once; 0 lets
	// the driver choose. Default [DefaultConcurrency] (URL parameter
	// "concurrency").
	Concurrency int
	// Request is how the portable layer times and retries each request: a
	// per-attempt timeout and retries with exponential backoff. One
	// attempt of a Put uploads the whole object, in parts when it is
	// larger than PartSize: it may take the timeout once per part and
	// twice more (once, for an object of at most one part; parts of
	// [DefaultPartSize] are counted when PartSize is 0), and its body at
	// [driver.MinThroughput] on top (see [backends.Policy.ForBody]). Its
	// ResponseTimeout bounds the opening of a Get's reader, the wait for
	// the answer's headers; its TimeoutAttempts the attempts that may time
	// out. The drivers' transports keep their own settings. Default
	// [backends.DefaultPolicy]. The URL parameters request_timeout,
	// max_attempts, response_timeout, timeout_attempts and unanswered_hold
	// set it (see [ParseURL]).
	Request backends.Policy
}

// DefaultConfig returns the default configuration for the bucket URL u.
func DefaultConfig(u string) Config {
	return Config{
		URL:         u,
		PartSize:    DefaultPartSize,
		Concurrency: DefaultConcurrency,
		Request:     backends.DefaultPolicy,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.URL == "" && c.Bucket == nil:
		return errors.New("gocloud: a bucket URL or a Bucket is required")
	case c.PartSize < 0:
		return fmt.Errorf("gocloud: part size %d is negative", c.PartSize)
	case c.Concurrency < 0:
		return fmt.Errorf("gocloud: concurrency %d is negative", c.Concurrency)
	case strings.HasPrefix(c.Prefix, "/"):
		return fmt.Errorf("gocloud: prefix %q starts with a slash", c.Prefix)
	}
	if err := c.Request.Validate(); err != nil {
		return fmt.Errorf("gocloud: Request: %w", err)
	}
	if c.URL != "" {
		return checkURL(c.URL)
	}
	return nil
}

// redact returns a bucket URL for messages: without user information,
// with "?..." for its query (whose values may be secrets) and without
// fragment; of a URL that does not parse, only the scheme.
func redact(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		if i := strings.Index(raw, ":"); i > 0 && err == nil {
			return raw[:i] + ":..."
		}
		return "..."
	}
	v := *u
	v.User = nil
	if v.RawQuery != "" {
		v.RawQuery = "..."
	}
	v.ForceQuery = false
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}

// redactError returns err with the bucket URL raw, which the drivers'
// errors echo, replaced by its redacted form, in any of the ways it may be
// written. The result does not wrap err, which would keep the URL.
func redactError(err error, raw string) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.URL == raw {
		err = fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	msg := err.Error()
	shown := redact(raw)
	forms := []string{raw}
	if u, perr := url.Parse(raw); perr == nil {
		forms = append(forms, u.String(), u.Redacted())
		if u.RawQuery != "" {
			forms = append(forms, "?"+u.RawQuery)
		}
	}
	for _, f := range forms {
		if f != "" && f != shown {
			msg = strings.ReplaceAll(msg, f, shown)
		}
	}
	return errors.New(msg)
}

// errUserinfo rejects a URL with user information.
var errUserinfo = errors.New("credentials do not go in the URL (user information is not allowed; they come from the SDK's environment)")

// checkURL checks that a bucket URL parses and carries no credentials:
// no user information, in itself or in its "endpoint" parameter. Its
// errors show the URL redacted.
func checkURL(raw string) error {
	shown := redact(raw)
	if hasUserinfo(raw) {
		return fmt.Errorf("gocloud: bucket URL %q: %w", shown, errUserinfo)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("gocloud: bucket URL %q: %w", shown, urlError(err))
	}
	if u.User != nil {
		return fmt.Errorf("gocloud: bucket URL %q: %w", shown, errUserinfo)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("gocloud: bucket URL %q: query: %w", shown, urlError(err))
	}
	for _, ep := range q["endpoint"] {
		if hasUserinfo(ep) {
			return fmt.Errorf("gocloud: bucket URL %q: query parameter %q: %w", shown, "endpoint", errUserinfo)
		}
	}
	return nil
}

// hasUserinfo reports whether the URL s (with or without a scheme) holds
// user information: an "@" in its authority, before the path, query or
// fragment.
func hasUserinfo(s string) bool {
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	} else if i := strings.Index(s, ":"); i >= 0 && !strings.ContainsAny(s[:i], "/?#@") && strings.Contains(s[i+1:], "@") && !strings.HasPrefix(s[i+1:], "/") {
		// An opaque URL such as "s3:user:secret@bucket".
		s = s[i+1:]
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	return strings.Contains(s, "@")
}

// urlError strips the URL, which may hold a secret, from an error of
// url.Parse or url.ParseQuery, and the value from an invalid port.
func urlError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if strings.HasPrefix(err.Error(), "invalid port ") {
		return errors.New("invalid port after host")
	}
	return err
}

// This package's own URL query parameters, see [ParseURL].
const (
	paramPartSize    = "part_size"
	paramConcurrency = "concurrency"
)

// URLParameters are the query parameters of a base path that this package
// takes for itself (see [ParseURL]). Every other parameter goes to the
// gocloud.dev driver with the URL, and the driver rejects those it does not
// know when the bucket is opened.
var URLParameters = append([]driver.URLParameter{
	{Name: paramPartSize, Value: "SIZE", Default: "5MiB", Description: "objects above it go up in parts of it; 0: the driver's default", Example: "8MiB"},
	{Name: paramConcurrency, Value: "N", Default: "4", Description: "parts of one object uploaded at once; 0: the driver's default", Example: "2"},
}, urlparam.PolicyParameters()...)

var knownParams = driver.URLParameterNames(URLParameters)

// ParseURL parses a base path into a [Config], starting from
// [DefaultConfig]. The base path is a gocloud.dev/blob bucket URL
//
//	SCHEME://BUCKET[/PREFIX][?PARAMS]
//
// with SCHEME one of the drivers this package links: mem, file, s3, gs,
// azblob. The path after the bucket becomes the object prefix (a trailing
// "/" is added), so "s3://b/jobs/42" stores object "x" as key "jobs/42/x".
// For file URLs the path is the directory of the bucket, and gocloud's own
// "prefix" parameter gives a prefix. Every mem:// URL opens a new, empty
// bucket in memory (for tests).
//
// These query parameters belong to this package:
//
//	part_size=SIZE         objects larger than this go up in parts of this
//	                       size (default 5 MiB; 0: the driver's default)
//	concurrency=N          parts of one object uploaded at once (default 4;
//	                       0: the driver's default)
//	request_timeout=DUR, max_attempts=N, response_timeout=DUR,
//	timeout_attempts=N, unanswered_hold=DUR
//	                       [Config.Request] (see [URLParameters]);
//	                       response_timeout bounds the opening of a get's
//	                       reader
//
// Every other parameter is handed to the driver with the URL, and the
// driver rejects those it does not know. For example s3blob takes region,
// endpoint, use_path_style, disable_https, profile, anonymous, fips,
// dualstack, hostname_immutable, rate_limiter_capacity,
// request_checksum_calculation, response_checksum_validation, ssetype,
// kmskeyid and accelerate; gcsblob takes anonymous, access_id,
// private_key_path, universe_domain, grpc and zonal; azureblob takes
// domain, protocol, cdn and localemu; fileblob takes create_dir,
// dir_file_mode, no_tmp_dir, base_url, secret_key_path and metadata;
// memblob takes nomd5 (see each driver's URLOpener documentation). gocloud's "prefix" works
// for every driver; its "key" is rejected. The driver's error is returned
// wrapped, naming the URL redacted (without user information and query).
// Credentials never go in the URL: user information, also in the
// "endpoint" parameter, is rejected. They come from each SDK's standard chain
// (for S3: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...).
func ParseURL(basePath string) (Config, error) {
	if basePath == "" {
		return Config{}, errors.New("gocloud: empty base path")
	}
	// Error messages show the base path redacted: without user
	// information and query, where a secret may have been put by mistake.
	shown := redact(basePath)
	if hasUserinfo(basePath) {
		return Config{}, fmt.Errorf("gocloud: base path %q: %w", shown, errUserinfo)
	}
	u, err := url.Parse(basePath)
	if err != nil {
		return Config{}, fmt.Errorf("gocloud: base path %q: %w", shown, urlError(err))
	}
	switch {
	case u.Scheme == "":
		return Config{}, fmt.Errorf("gocloud: base path %q: not a URL (want e.g. mem://, s3://bucket/prefix)", shown)
	case u.Opaque != "":
		return Config{}, fmt.Errorf("gocloud: base path %q: want SCHEME://BUCKET/PREFIX", shown)
	case u.User != nil:
		return Config{}, fmt.Errorf("gocloud: base path %q: %w", shown, errUserinfo)
	case u.Fragment != "":
		return Config{}, fmt.Errorf("gocloud: base path %q: URLs cannot carry a fragment", shown)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("gocloud: base path %q: query: %w", shown, urlError(err))
	}
	if q.Has("key") {
		return Config{}, fmt.Errorf("gocloud: base path %q: query parameter %q (a single-key bucket) is not supported", shown, "key")
	}
	cfg := DefaultConfig("")
	one := func(key string) (string, bool, error) {
		vs, ok := q[key]
		if !ok {
			return "", false, nil
		}
		q.Del(key)
		if len(vs) != 1 {
			return "", false, fmt.Errorf("gocloud: base path %q: query parameter %q given %d times", shown, key, len(vs))
		}
		return vs[0], true, nil
	}
	intParam := func(key string, min int, dst *int) error {
		v, ok, err := one(key)
		if err != nil || !ok {
			return err
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return fmt.Errorf("gocloud: base path %q: query parameter %q: %q is not an integer >= %d", shown, key, v, min)
		}
		*dst = n
		return nil
	}
	if v, ok, err := one(paramPartSize); err != nil {
		return Config{}, err
	} else if ok {
		n, err := urlparam.Size(v)
		if err != nil || n > math.MaxInt32 {
			return Config{}, fmt.Errorf("gocloud: base path %q: query parameter %q: %q is not a size (bytes, or a number with KiB, MiB or GiB)", shown, paramPartSize, v)
		}
		cfg.PartSize = int(n)
	}
	if err := intParam(paramConcurrency, 0, &cfg.Concurrency); err != nil {
		return Config{}, err
	}
	if err := urlparam.Policy(q, &cfg.Request); err != nil {
		return Config{}, fmt.Errorf("gocloud: base path %q: %w", shown, err)
	}
	for _, name := range knownParams {
		q.Del(name) // the rest goes to the driver
	}
	bucketURL := *u
	bucketURL.RawQuery = encodeQuery(q)
	if u.Scheme != "file" {
		if p := strings.Trim(u.Path, "/"); p != "" {
			cfg.Prefix = p + "/"
		}
		bucketURL.Path, bucketURL.RawPath = "", ""
	}
	cfg.URL = bucketURL.String()
	return cfg, cfg.Validate()
}

// encodeQuery encodes q with its keys sorted; a key with one empty value
// (such as memblob's "nomd5") is written bare.
func encodeQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range q[k] {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(url.QueryEscape(k))
			if v != "" {
				b.WriteByte('=')
				b.WriteString(url.QueryEscape(v))
			}
		}
	}
	return b.String()
}
