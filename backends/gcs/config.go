package gcs

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
)

// Defaults of [DefaultConfig].
const (
	// DefaultPartSize is the chunk size of resumable uploads.
	DefaultPartSize = 16 << 20
	// MinPartSize is the smallest part size: the client rounds chunk sizes
	// up to a multiple of it.
	MinPartSize = 256 << 10
	// DefaultPageSize is the number of objects a List asks for per request.
	DefaultPageSize = 1000
)

// Config configures a GCS [Backend]. Start from [DefaultConfig].
type Config struct {
	// Bucket is the bucket that holds the objects. Required.
	Bucket string
	// Prefix is put in front of every object name; when not empty it ends
	// with "/" (Open adds a missing one). Default "" (the bucket's
	// root).
	Prefix string
	// Endpoint is the base URL of the service, e.g. "http://127.0.0.1:4443"
	// for fake-gcs-server; empty means Google Cloud Storage. The JSON API is
	// reached under Endpoint + "/storage/v1/". URL parameter "endpoint".
	// STORAGE_EMULATOR_HOST is not needed (the client still honours it
	// when Endpoint is empty).
	Endpoint string
	// CredentialsFile is a service account or other credentials JSON file.
	// When empty, credentials come from Application Default Credentials,
	// except with an Endpoint, where requests are sent without any
	// (emulators want none). URL parameter "credentials_file".
	//
	// Which credentials requests carry, in short: CredentialsFile's when
	// it is set; none when Anonymous is set or an Endpoint is; else
	// Application Default Credentials. Anonymous together with a
	// CredentialsFile is a conflict that Validate rejects.
	CredentialsFile string
	// Anonymous sends requests without credentials, e.g. for public buckets
	// or emulators. It may not be set together with CredentialsFile. URL
	// parameter "anonymous" (default false, but true in effect when
	// Endpoint is set and CredentialsFile is not; see [ParseURL] for
	// anonymous=false with an endpoint).
	Anonymous bool
	// PartSize is the size above which Put uploads resumably, in chunks of
	// PartSize bytes; at or below it an object goes up in one request. A
	// multiple of [MinPartSize]. Chunks of one resumable upload go one
	// after another: the service takes them in order only, so, unlike S3
	// or Azure, there are no parts in parallel. Default [DefaultPartSize];
	// URL parameter "part_size" (bytes, or with a KiB/MiB/GiB suffix).
	PartSize int64
	// Request is how each request is timed and retried: by the portable
	// layer, and by the client for the chunks of a resumable upload (see
	// the package documentation). Its Timeout bounds each attempt of a
	// single-request call and the wait for the answer to each chunk; a
	// request with a body may take its body at [driver.MinThroughput] on
	// top (see [backends.Policy.ForBody]). Only throttling, 408, 5xx,
	// connection errors and timed-out attempts are retried, with
	// exponential backoff and jitter. Its ResponseTimeout bounds the wait
	// for the answer's headers of each attempt, when shorter than Timeout:
	// on reads, and on the HTTP transport the backend makes for an
	// endpoint or anonymous access (there, for requests without a large
	// body, not for uploads). Default [backends.DefaultPolicy], with which
	// an endpoint that takes connections and never answers fails a read
	// after about 20 s. The URL parameters request_timeout, max_attempts,
	// response_timeout, timeout_attempts and unanswered_hold set it (see
	// [ParseURL]); the backoff is not settable by URL.
	Request backends.Policy
	// PageSize is the number of objects a List asks for per request.
	// Default [DefaultPageSize].
	PageSize int
	// Client, when set, is used instead of a client built from Endpoint,
	// CredentialsFile, Anonymous and ClientOptions, which are then
	// ignored. The backend does not close it, and sets no retry policy on
	// the client itself (it sets one on each object handle).
	Client *storage.Client
	// ClientOptions are added to the options of the client the backend
	// builds (after its own).
	ClientOptions []option.ClientOption
}

// DefaultConfig returns the default configuration for bucket and prefix.
func DefaultConfig(bucket, prefix string) Config {
	return Config{
		Bucket:   bucket,
		Prefix:   prefix,
		PartSize: DefaultPartSize,
		Request:  backends.DefaultPolicy,
		PageSize: DefaultPageSize,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Bucket == "":
		return errors.New("gcs: bucket is required")
	case strings.ContainsAny(c.Bucket, "/?#") || strings.ContainsRune(c.Bucket, 0):
		return fmt.Errorf("gcs: bucket %q is not a bucket name", c.Bucket)
	case strings.HasPrefix(c.Prefix, "/") || strings.ContainsRune(c.Prefix, 0):
		return fmt.Errorf("gcs: prefix %q: want a relative prefix without NUL bytes", c.Prefix)
	case c.PartSize < MinPartSize || c.PartSize%MinPartSize != 0:
		return fmt.Errorf("gcs: part size (part_size) %d: want a positive multiple of %d", c.PartSize, MinPartSize)
	case c.PartSize > 1<<31-MinPartSize:
		return fmt.Errorf("gcs: part size (part_size) %d: too large", c.PartSize)
	case c.PageSize < 0:
		return fmt.Errorf("gcs: page size %d is negative", c.PageSize)
	case c.Anonymous && c.CredentialsFile != "":
		return errors.New("gcs: anonymous and credentials_file conflict: anonymous requests carry no credentials; set one of them")
	}
	if err := c.Request.Validate(); err != nil {
		return fmt.Errorf("gcs: Request: %w", err)
	}
	if c.Endpoint != "" {
		if err := validateEndpoint(c.Endpoint); err != nil {
			return fmt.Errorf("gcs: %w", err)
		}
	}
	return nil
}

// validateEndpoint checks an endpoint URL. Its errors never show user
// information, nor anything of a URL that does not parse.
func validateEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return errors.New("endpoint is not a URL: want an http or https URL such as http://127.0.0.1:4443")
	case u.User != nil:
		return fmt.Errorf("endpoint %q: user information is not allowed (credentials do not go in the URL)", redact(u))
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("endpoint %q: want an http or https URL such as http://127.0.0.1:4443", redact(u))
	}
	return nil
}

// redact returns u without user information and with "..." for its query,
// for error messages.
func redact(u *url.URL) string {
	v := *u
	v.User = nil
	if v.RawQuery != "" || v.ForceQuery {
		v.RawQuery, v.ForceQuery = "...", false
	}
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}

// URL query parameters of the gs:// form, see [ParseURL].
const (
	paramEndpoint          = "endpoint"
	paramCredentials       = "credentials_file"
	paramAnonymous         = "anonymous"
	paramPartSize          = "part_size"
	paramDeprecatedTimeout = "timeout" // the old name of request_timeout
)

// URLParameters are the query parameters a gs:// base path takes (see
// [ParseURL]); no other is accepted.
var URLParameters = append([]driver.URLParameter{
	{Name: paramEndpoint, Value: "URL", Default: "Google Cloud Storage", Description: "base URL of the service, e.g. fake-gcs-server's", Example: "http://127.0.0.1:4443"},
	{Name: paramCredentials, Value: "PATH", Description: "service account or other credentials JSON file (default: Application Default Credentials)", Example: "/etc/dstl/gcs.json"},
	{Name: paramAnonymous, Value: "BOOL", Default: "false (true in effect with endpoint)", Description: "send no credentials", Example: "true"},
	{Name: paramPartSize, Value: "SIZE", Default: "16MiB", Description: "resumable upload above it, in chunks of it; a multiple of 256KiB", Example: "8MiB"},
}, urlparam.PolicyParameters(paramDeprecatedTimeout)...)

var knownParams = driver.URLParameterNames(URLParameters)

// ParseURL parses a base path "gs://bucket/prefix" into a [Config],
// starting from [DefaultConfig]. Object names go under the prefix (a "/"
// is added when missing). These query parameters are accepted:
//
//	endpoint=URL           service base URL, e.g. http://127.0.0.1:4443
//	                       for fake-gcs-server (default: Google Cloud
//	                       Storage); without credentials_file, requests
//	                       to it carry no credentials
//	credentials_file=PATH  credentials JSON file (default: Application
//	                       Default Credentials)
//	anonymous=true|false   send no credentials (default false, but
//	                       true in effect with an endpoint)
//	part_size=SIZE         resumable upload above this size, in chunks of
//	                       it; a multiple of 256KiB, in bytes or with a
//	                       KiB/MiB/GiB suffix (default 16MiB)
//	request_timeout=DURATION, max_attempts=N, response_timeout=DURATION,
//	timeout_attempts=N, unanswered_hold=DURATION
//	                       [Config.Request] (see [URLParameters])
//	timeout=DURATION       deprecated: the old name of request_timeout,
//	                       still accepted (not with request_timeout)
//
// For example "gs://my-bucket/jobs/dstl?part_size=8MiB".
//
// Credentials: credentials_file's when given; with endpoint and without
// credentials_file, none (anonymous is implied); else Application Default
// Credentials, unless anonymous=true. Parameters that contradict each
// other are rejected with an error naming both: anonymous=true with
// credentials_file, and anonymous=false with endpoint but without
// credentials_file (requests to an endpoint carry credentials only from a
// credentials_file).
//
// Unknown or repeated parameters, bad values, user information (in the
// base path or in endpoint) and fragments are rejected with an error that
// names them. Errors show the base path without user information and
// query, and never an endpoint's user information: credentials do not go
// in the URL.
func ParseURL(basePath string) (Config, error) {
	// User information is looked for first, before anything could echo
	// it, and without a parse that might fail.
	if hasUserinfo(basePath) {
		return Config{}, errors.New("gcs: base path: user information is not allowed (credentials do not go in the URL; they come from Application Default Credentials or credentials_file)")
	}
	u, err := url.Parse(basePath)
	if err != nil {
		if before, _, _ := strings.Cut(basePath, "?"); strings.Contains(before, "@") {
			// Parts of what may be user information could be in the
			// error.
			return Config{}, errors.New("gcs: base path is not a URL, and may carry user information (credentials do not go in the URL)")
		}
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // without the whole base path
		}
		return Config{}, fmt.Errorf("gcs: base path is not a URL: %w", err)
	}
	// Error messages show the base path without user information and
	// query.
	shown := redact(u)
	switch {
	case u.User != nil:
		return Config{}, fmt.Errorf("gcs: base path %q: user information is not allowed (credentials do not go in the URL; they come from Application Default Credentials or credentials_file)", shown)
	case !strings.EqualFold(u.Scheme, Scheme):
		return Config{}, fmt.Errorf("gcs: base path %q: URL scheme %q is not %q", shown, u.Scheme, Scheme)
	case u.Opaque != "" || u.Host == "":
		return Config{}, fmt.Errorf("gcs: base path %q: want gs://bucket/prefix", shown)
	case u.Fragment != "" || strings.Contains(basePath, "#"):
		return Config{}, fmt.Errorf("gcs: base path %q: a fragment is not supported", shown)
	}
	cfg := DefaultConfig(u.Host, strings.TrimPrefix(u.Path, "/"))
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("gcs: base path %q: query: %w", shown, err)
	}
	if err := urlparam.Check(q, knownParams); err != nil {
		return Config{}, fmt.Errorf("gcs: base path %q: %w", shown, err)
	}
	bad := func(key, want string) error {
		return fmt.Errorf("gcs: base path %q: query parameter %q: want %s, got %q", shown, key, want, q.Get(key))
	}
	if q.Has(paramEndpoint) {
		cfg.Endpoint = q.Get(paramEndpoint)
		if cfg.Endpoint == "" {
			return Config{}, bad(paramEndpoint, "a URL")
		}
		if err := validateEndpoint(cfg.Endpoint); err != nil {
			return Config{}, fmt.Errorf("gcs: base path %q: query parameter %q: %w", shown, paramEndpoint, err)
		}
	}
	if q.Has(paramCredentials) {
		cfg.CredentialsFile = q.Get(paramCredentials)
		if cfg.CredentialsFile == "" {
			return Config{}, bad(paramCredentials, "a file path")
		}
	}
	if q.Has(paramAnonymous) {
		if cfg.Anonymous, err = strconv.ParseBool(q.Get(paramAnonymous)); err != nil {
			return Config{}, bad(paramAnonymous, "true or false")
		}
		switch {
		case cfg.Anonymous && cfg.CredentialsFile != "":
			return Config{}, fmt.Errorf("gcs: base path %q: query parameters %q and %q conflict: anonymous requests carry no credentials; give one of them",
				shown, paramAnonymous+"=true", paramCredentials)
		case !cfg.Anonymous && cfg.Endpoint != "" && cfg.CredentialsFile == "":
			return Config{}, fmt.Errorf("gcs: base path %q: query parameters %q and %q conflict: requests to an endpoint carry credentials only from %q; add it, or drop %q",
				shown, paramAnonymous+"=false", paramEndpoint, paramCredentials, paramAnonymous+"=false")
		}
	}
	if q.Has(paramPartSize) {
		n, err := urlparam.Size(q.Get(paramPartSize))
		if err != nil || n < MinPartSize || n%MinPartSize != 0 {
			return Config{}, bad(paramPartSize, "a size that is a multiple of 256KiB, such as 8MiB")
		}
		cfg.PartSize = n
	}
	if err := urlparam.Policy(q, &cfg.Request, paramDeprecatedTimeout); err != nil {
		return Config{}, fmt.Errorf("gcs: base path %q: %w", shown, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("gcs: base path %q: %w", shown, err)
	}
	return cfg, nil
}

// hasUserinfo reports whether the authority of rawURL ("scheme://authority/...")
// has user information ("user:password@").
func hasUserinfo(rawURL string) bool {
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return false
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return strings.Contains(rest, "@")
}

// headerTimeout is the bound of the wait for an answer's headers: the
// shorter of the request policy's Timeout and ResponseTimeout that is
// set, or 0 for none.
func (c Config) headerTimeout() time.Duration {
	p := c.Request
	switch {
	case p.ResponseTimeout == 0:
		return p.Timeout
	case p.Timeout == 0:
		return p.ResponseTimeout
	}
	return min(p.Timeout, p.ResponseTimeout)
}

// endpointName is the endpoint that errors name.
func (c Config) endpointName() string {
	switch {
	case c.Client != nil:
		return "the given client's endpoint"
	case c.Endpoint != "":
		if u, err := url.Parse(c.Endpoint); err == nil {
			return redact(u)
		}
		return "the configured endpoint"
	}
	return "Google Cloud Storage"
}
