package s3

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
)

// Limits of S3 multipart uploads.
const (
	// MinPartSize is the smallest part S3 accepts, the last part excepted.
	MinPartSize = 5 << 20
	// MaxPartSize is the largest part S3 accepts.
	MaxPartSize = 5 << 30
	// maxParts is the largest number of parts of one upload.
	maxParts = 10000
	// maxConcurrency bounds Config.Concurrency.
	maxConcurrency = 64
)

// Server-side encryption modes of [Config.SSE].
const (
	SSENone   = ""        // no server-side encryption header (the bucket's default applies)
	SSEAES256 = "AES256"  // SSE-S3, keys managed by S3
	SSEKMS    = "aws:kms" // SSE-KMS, with Config.SSEKMSKeyID or the account's default key
)

// Config configures an S3 [Backend]. Start from [DefaultConfig].
type Config struct {
	// Bucket is the bucket that holds the objects. Required.
	Bucket string
	// Prefix is prepended to every object name, e.g. "dstl/job-1/". A
	// non-empty prefix without a trailing slash gets one. Default "".
	Prefix string

	// Client, when set, is a ready S3 client that the backend uses as it
	// is: Endpoint, Region, UsePathStyle and Request.ResponseTimeout are
	// then ignored, and Close leaves the client's HTTP connections alone.
	// The backend does its own retries (Request), so a client with the
	// SDK's retryer retries twice over.
	Client *awss3.Client

	// Endpoint is the base URL of an S3-compatible service, such as
	// "http://127.0.0.1:9000" for MinIO. Default "": AWS's endpoint for the
	// region (URL parameter "endpoint").
	Endpoint string
	// Region is the signing region. Default "": the SDK's default chain
	// (AWS_REGION, the shared config), or "us-east-1" when that has none
	// (URL parameter "region").
	Region string
	// UsePathStyle addresses buckets as http://host/bucket/key instead of
	// http://bucket.host/key; most S3-compatible services on a plain host
	// name or IP address need it. Default false (URL parameter
	// "use_path_style").
	UsePathStyle bool

	// PartSize is the size above which a Put goes up as a multipart
	// upload, and the size of its parts, between [MinPartSize] and
	// [MaxPartSize]. Default 8 MiB (URL parameter "part_size": bytes, or with KiB, MiB or GiB).
	PartSize int64
	// Concurrency bounds the parts of one Put in flight at once, 1 to 64.
	// Default 4 (URL parameter "concurrency").
	Concurrency int

	// SSE is the server-side encryption requested for new objects:
	// [SSENone], [SSEAES256] or [SSEKMS]. Default none (URL parameter
	// "sse", with "none" for [SSENone]).
	SSE string
	// SSEKMSKeyID is the KMS key of [SSEKMS]; only with it. Default "":
	// the account's default key (URL parameter "sse_kms_key_id").
	SSEKMSKeyID string

	// UnsignedPayload sends the bodies of PutObject and UploadPart
	// unsigned (x-amz-content-sha256: UNSIGNED-PAYLOAD) also over plain
	// HTTP, where the SDK otherwise signs each body's SHA-256: a pass
	// over every byte sent, on the client, and again on a store that
	// checks it. Over HTTPS the SDK sends these bodies unsigned anyway,
	// and TLS protects them. Over plain HTTP a byte changed on the way
	// is then not caught by the store; dstl's own checksums (a CRC32C
	// over every change set, which every reader checks) still catch it
	// when the log is read, so that it is an error, never wrong data.
	// Some S3-compatible stores refuse unsigned bodies: the first Put
	// refused then finds out, with a Put of a small object signed, and
	// fails with an error wrapping [ErrUnsignedPayloadRefused], as every
	// later Put does; [Backend.VerifyUnsignedPayload] checks ahead. It
	// applies to a [Config.Client] too. Default false (URL parameter
	// "unsigned_payload").
	UnsignedPayload bool

	// Request is how each request (and each part) is timed and retried
	// by the portable layer. Its Timeout bounds each attempt; a request
	// with a body may take its body at [driver.MinThroughput] on top (see
	// [backends.Policy.ForBody]). Throttling, 5xx answers, cut connections
	// and timed-out attempts are retried with exponential backoff and
	// jitter; permission errors and other 4xx answers are not. Its
	// ResponseTimeout bounds the wait for the answer's headers of a
	// request without a body or with a small one (a GET, HEAD, LIST,
	// DELETE, a multipart upload's completion; up to [driver.SmallBody])
	// on the HTTP transport the backend makes (not on a Config.Client); an
	// upload of an object or a part is bounded by Timeout only, since its
	// answer is awaited while its body may still be queued. Default
	// [backends.DefaultPolicy], with which an endpoint that takes
	// connections and never answers fails a request after about 20 s. The
	// URL parameters request_timeout, max_attempts, response_timeout,
	// timeout_attempts and unanswered_hold set it (see [ParseURL]).
	Request backends.Policy
}

// DefaultConfig returns the default configuration for bucket and prefix.
func DefaultConfig(bucket, prefix string) Config {
	return Config{
		Bucket:      bucket,
		Prefix:      prefix,
		PartSize:    8 << 20,
		Concurrency: 4,
		Request:     backends.DefaultPolicy,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Bucket == "":
		return errors.New("s3: bucket is required")
	case strings.ContainsAny(c.Bucket, "/?#"):
		return fmt.Errorf("s3: bucket %q: invalid bucket name", c.Bucket)
	case strings.HasPrefix(c.Prefix, "/") || strings.ContainsRune(c.Prefix, 0):
		return fmt.Errorf("s3: prefix %q: must be relative and without NUL bytes", c.Prefix)
	case c.PartSize < MinPartSize || c.PartSize > MaxPartSize:
		return fmt.Errorf("s3: %s %d: want %d to %d bytes", paramPartSize, c.PartSize, MinPartSize, int64(MaxPartSize))
	case c.Concurrency < 1 || c.Concurrency > maxConcurrency:
		return fmt.Errorf("s3: %s %d: want 1 to %d", paramConcurrency, c.Concurrency, maxConcurrency)
	case c.SSE != SSENone && c.SSE != SSEAES256 && c.SSE != SSEKMS:
		return fmt.Errorf("s3: %s %q: want none, %s or %s", paramSSE, c.SSE, SSEAES256, SSEKMS)
	case c.SSEKMSKeyID != "" && c.SSE != SSEKMS:
		return fmt.Errorf("s3: %s is set but %s is not %s", paramSSEKMSKeyID, paramSSE, SSEKMS)
	}
	if err := c.Request.Validate(); err != nil {
		return fmt.Errorf("s3: Request: %w", err)
	}
	if c.Client == nil && c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		switch {
		case err != nil:
			if ue, ok := err.(*url.Error); ok {
				err = ue.Err // without the URL, which may hold a secret
			}
			return fmt.Errorf("s3: %s: want an http or https URL: %w", paramEndpoint, err)
		case u.User != nil:
			return fmt.Errorf("s3: %s %q: credentials do not go in the URL; use the SDK's default chain", paramEndpoint, redact(u))
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return fmt.Errorf("s3: %s %q: want an http or https URL", paramEndpoint, redact(u))
		}
	}
	return nil
}

// prefix returns the key prefix, with a trailing slash when not empty.
func (c Config) prefix() string {
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		return c.Prefix + "/"
	}
	return c.Prefix
}

// URL query parameters of the s3:// form, see [ParseURL].
const (
	paramEndpoint     = "endpoint"
	paramRegion       = "region"
	paramUsePathStyle = "use_path_style"
	paramPartSize     = "part_size"
	paramConcurrency  = "concurrency"
	paramSSE          = "sse"
	paramSSEKMSKeyID  = "sse_kms_key_id"
	paramUnsigned     = "unsigned_payload"
)

// URLParameters are the query parameters an s3:// base path takes (see
// [ParseURL]); no other is accepted.
var URLParameters = append([]driver.URLParameter{
	{Name: paramEndpoint, Value: "URL", Default: "AWS", Description: "base URL of an S3-compatible service, e.g. MinIO's", Example: "http://127.0.0.1:9000"},
	{Name: paramRegion, Value: "NAME", Default: "SDK chain, else us-east-1", Description: "signing region", Example: "eu-west-1"},
	{Name: paramUsePathStyle, Value: "BOOL", Default: "false", Description: "path-style addressing (MinIO and the like)", Example: "true"},
	{Name: paramPartSize, Value: "SIZE", Default: "8MiB", Description: "multipart threshold and part size, 5MiB to 5GiB", Example: "16MiB"},
	{Name: paramConcurrency, Value: "N", Default: "4", Description: "parts of one put in flight, 1 to 64", Example: "8"},
	{Name: paramSSE, Value: "MODE", Default: "none", Description: "server-side encryption: none, AES256 or aws:kms", Example: "AES256"},
	{Name: paramSSEKMSKeyID, Value: "ID", Default: "the account's", Description: "KMS key of sse=aws:kms (only with it)", Example: "alias/dstl"},
	{Name: paramUnsigned, Value: "BOOL", Default: "false", Description: "send upload bodies unsigned over plain HTTP too (no SHA-256 of each body; dstl's checksums catch damage when read)", Example: "true"},
}, urlparam.PolicyParameters()...)

var knownParams = driver.URLParameterNames(URLParameters)

// ParseURL parses a base path "s3://bucket/prefix" into a [Config],
// starting from [DefaultConfig]. The prefix is optional; these query
// parameters are known:
//
//	endpoint=URL          base URL of an S3-compatible service, e.g.
//	                      http://127.0.0.1:9000 (default: AWS)
//	region=NAME           signing region (default: the SDK's chain, else us-east-1)
//	use_path_style=BOOL   path-style addressing, for MinIO and the like (default false)
//	part_size=SIZE        multipart threshold and part size, 5 MiB to 5 GiB
//	                      (default 8388608)
//	concurrency=N         parts of one Put in flight at once, 1 to 64 (default 4)
//	sse=MODE              server-side encryption: none, AES256 or aws:kms
//	                      (default none)
//	sse_kms_key_id=ID     the KMS key of sse=aws:kms (default: the account's)
//	unsigned_payload=BOOL upload bodies unsigned over plain HTTP too, see
//	                      [Config.UnsignedPayload] (default false)
//	request_timeout=DUR, max_attempts=N, response_timeout=DUR, timeout_attempts=N,
//	unanswered_hold=DUR   [Config.Request] (see [URLParameters])
//
// For example "s3://my-bucket/dstl/job-1?region=eu-west-1&sse=AES256", or
// "s3://dstl/demo?endpoint=http://127.0.0.1:9000&use_path_style=true" for
// MinIO. Credentials come from the SDK's default chain (AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY, the shared files, the instance role, ...),
// never from the URL. Unknown or repeated parameters are rejected.
func ParseURL(basePath string) (Config, error) {
	u, err := url.Parse(basePath)
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err // without the URL, which may hold a secret
		}
		return Config{}, fmt.Errorf("s3: base path is not a URL: %w", err)
	}
	basePath = redact(u) // what the errors below show
	switch {
	case u.User != nil:
		return Config{}, fmt.Errorf("s3: base path %q: credentials do not go in the URL; use the SDK's default chain", basePath)
	case !strings.EqualFold(u.Scheme, Scheme):
		return Config{}, fmt.Errorf("s3: base path %q: URL scheme %q is not %q", basePath, u.Scheme, Scheme)
	case u.Opaque != "" || u.Host == "":
		return Config{}, fmt.Errorf("s3: base path %q: want s3://bucket/prefix", basePath)
	case u.Fragment != "":
		return Config{}, fmt.Errorf("s3: base path %q: a fragment is not allowed", basePath)
	}
	cfg := DefaultConfig(u.Host, strings.TrimPrefix(u.Path, "/"))
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("s3: base path %q: query: %w", basePath, err)
	}
	if err := urlparam.Check(q, knownParams); err != nil {
		return Config{}, fmt.Errorf("s3: base path %q: %w", basePath, err)
	}
	bad := func(key string, want string) error {
		return fmt.Errorf("s3: base path %q: query parameter %q: want %s, got %q", basePath, key, want, q.Get(key))
	}
	for k := range q {
		v := q.Get(k)
		switch k {
		case paramEndpoint:
			cfg.Endpoint = v
		case paramRegion:
			cfg.Region = v
		case paramUsePathStyle:
			if cfg.UsePathStyle, err = strconv.ParseBool(v); err != nil {
				return Config{}, bad(k, "true or false")
			}
		case paramPartSize:
			if cfg.PartSize, err = urlparam.Size(v); err != nil {
				return Config{}, bad(k, "a size: bytes, or a number with KiB, MiB or GiB")
			}
		case paramConcurrency:
			if cfg.Concurrency, err = strconv.Atoi(v); err != nil {
				return Config{}, bad(k, "an integer")
			}
		case paramSSE:
			if v == "none" {
				v = SSENone
			} else if v == "" {
				return Config{}, bad(k, "none, AES256 or aws:kms")
			}
			cfg.SSE = v
		case paramSSEKMSKeyID:
			cfg.SSEKMSKeyID = v
		case paramUnsigned:
			if cfg.UnsignedPayload, err = strconv.ParseBool(v); err != nil {
				return Config{}, bad(k, "true or false")
			}
		}
	}
	if err := urlparam.Policy(q, &cfg.Request); err != nil {
		return Config{}, fmt.Errorf("s3: base path %q: %w", basePath, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("s3: base path %q: %s", basePath, strings.TrimPrefix(err.Error(), "s3: "))
	}
	return cfg, nil
}

// redact returns u for error messages: without user information, and
// without an endpoint parameter's, whose value is then left out.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	if c.Opaque != "" {
		c.Opaque = "..." // "s3:key:secret@bkt" holds them there
	}
	if q, err := url.ParseQuery(c.RawQuery); err != nil {
		c.RawQuery = "..."
	} else if vs := q[paramEndpoint]; slices.ContainsFunc(vs, func(v string) bool { return strings.Contains(v, "@") }) {
		q[paramEndpoint] = []string{"..."}
		c.RawQuery = q.Encode()
	}
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}
