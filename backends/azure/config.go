package azure

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
)

// Environment variables the URL form reads for what a base path must not
// carry (secrets) or may leave out (the account).
const (
	// EnvConnectionString holds a storage connection string
	// ("DefaultEndpointsProtocol=...;AccountName=...;AccountKey=...;BlobEndpoint=...").
	EnvConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
	// EnvAccount holds the storage account name.
	EnvAccount = "AZURE_STORAGE_ACCOUNT"
	// EnvKey holds the storage account's shared key.
	EnvKey = "AZURE_STORAGE_KEY"
)

// Limits of the Blob service on staged block uploads.
const (
	// MaxBlockSize is the largest block (and part size) the service takes.
	MaxBlockSize = 4000 << 20
	// MaxBlocks is the most blocks one blob may have.
	MaxBlocks = 50000
)

// Config configures an Azure Blob Storage [Backend]. Start from
// [DefaultConfig].
//
// The client is chosen in this order: Client, when set; else
// ConnectionString; else a shared key (Account and AccountKey); else
// Microsoft Entra ID through azidentity's DefaultAzureCredential (the SDK's
// standard chain: environment, workload identity, managed identity, Azure
// CLI, ...). Credentials are never logged or printed.
type Config struct {
	// Container is the blob container that holds the objects. It must
	// exist. Required.
	Container string
	// Prefix is prepended to every object name, e.g. "jobs/job-1/". A
	// non-empty prefix that does not end in "/" gets one. Default "".
	Prefix string

	// AccountURL is the Blob service URL of the account, e.g.
	// "https://ACCOUNT.blob.core.windows.net" or, for Azurite,
	// "http://127.0.0.1:10000/devstoreaccount1" (path style). Default:
	// "https://" + Account + ".blob.core.windows.net". Ignored with a
	// ConnectionString (which names its own endpoint) or a Client.
	AccountURL string
	// Account is the storage account name. Needed for a shared key and
	// when AccountURL is empty.
	Account string
	// AccountKey is the account's shared key (base64). Optional.
	AccountKey string
	// ConnectionString is a storage connection string. Optional.
	ConnectionString string
	// Credential is a token credential used instead of
	// DefaultAzureCredential when neither a connection string nor a shared
	// key is given. Optional.
	Credential azcore.TokenCredential

	// Client is a ready container client. When set, Container must name
	// its container, and the fields above that make a client (AccountURL,
	// Account, AccountKey, ConnectionString, Credential, HTTPClient) are
	// ignored. The SDK client's own retry policy is then the caller's: set
	// its MaxRetries to -1 so that retries are not doubled.
	Client *container.Client
	// HTTPClient sends the requests of a client the backend makes.
	// Default: a client of its own, whose idle connections Close closes.
	HTTPClient *http.Client

	// PartSize is the size of a staged block. A Put of at most PartSize
	// bytes is a single Put Blob request; a larger one stages blocks of
	// PartSize bytes (the last one shorter) and commits them. Between 1
	// byte and [MaxBlockSize]; an object may have at most [MaxBlocks]
	// blocks. Default 8 MiB.
	PartSize int64
	// Concurrency bounds the blocks of one Put staged in parallel, and so
	// its memory: Concurrency × PartSize. Default 4.
	Concurrency int

	// Request is how the portable layer ([backends.Bucket]) times and
	// retries every request and every block: a per-request timeout and
	// exponential backoff with jitter between at most MaxAttempts
	// attempts. Only throttling (429),
	// timeouts (408), server errors (5xx), cut connections and timed-out
	// attempts are retried, never a permission or precondition error. The
	// SDK's own retries are turned off in a client the backend makes, so
	// that they are not doubled. Its ResponseTimeout bounds the wait for
	// the answer's headers of requests without a large body (not of
	// uploads of blocks or blobs) on the HTTP transport the backend makes
	// (not on an HTTPClient or Client given), and TimeoutAttempts the
	// attempts that may time out. A request with a body (a blob, a block)
	// may take its body at [driver.MinThroughput] on top of the timeout
	// (see [backends.Policy.ForBody]). Default [backends.DefaultPolicy]: a
	// 30 s timeout, 5 attempts, backoff from 100 ms to 5 s, a 10 s
	// response timeout and 2 attempts that may time out, so that an
	// endpoint that takes connections and never answers fails a request
	// after about 20 s. The URL parameters request_timeout, max_attempts,
	// response_timeout, timeout_attempts and unanswered_hold set it (see
	// [ParseURL]).
	Request backends.Policy
}

// DefaultConfig returns the default configuration for container.
func DefaultConfig(container string) Config {
	return Config{
		Container:   container,
		PartSize:    8 << 20,
		Concurrency: 4,
		Request:     backends.DefaultPolicy,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Container == "":
		return errors.New("azure: container is required")
	case strings.ContainsAny(c.Container, "/?#"):
		return fmt.Errorf("azure: container %q: a container name has no '/', '?' or '#'", c.Container)
	case c.PartSize < 1 || c.PartSize > MaxBlockSize:
		return fmt.Errorf("azure: part size %d: want 1 to %d bytes", c.PartSize, int64(MaxBlockSize))
	case c.Concurrency < 1:
		return fmt.Errorf("azure: concurrency %d: want at least 1", c.Concurrency)
	case strings.HasPrefix(c.Prefix, "/"):
		return fmt.Errorf("azure: prefix %q: must not start with '/'", c.Prefix)
	}
	if err := c.Request.Validate(); err != nil {
		return fmt.Errorf("azure: Request: %w", err)
	}
	if c.Client == nil && c.ConnectionString == "" && c.AccountURL == "" && c.Account == "" {
		return errors.New("azure: an account URL, an account name, a connection string or a client is required")
	}
	if c.AccountURL != "" {
		u, err := url.Parse(c.AccountURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("azure: account URL %q: want an http or https URL", c.AccountURL)
		}
	}
	return nil
}

// URL query parameters of the azblob:// form, see [ParseURL].
const (
	paramEndpoint          = "endpoint"
	paramAccountURL        = "account_url"
	paramAccount           = "account"
	paramPartSize          = "part_size"
	paramConcurrency       = "concurrency"
	paramDeprecatedTimeout = "timeout" // the old name of request_timeout
)

// URLParameters are the query parameters an azblob:// base path takes (see
// [ParseURL]); no other is accepted.
var URLParameters = append([]driver.URLParameter{
	{Name: paramEndpoint, Value: "URL", Default: "https://ACCOUNT.blob.core.windows.net", Description: "Blob service URL of the account, e.g. Azurite's", Example: "http://127.0.0.1:10000/devstoreaccount1"},
	{Name: paramAccountURL, Value: "URL", Description: "the same as endpoint (give one of them)", Example: "http://127.0.0.1:10000/devstoreaccount1"},
	{Name: paramAccount, Value: "NAME", Default: "$AZURE_STORAGE_ACCOUNT", Description: "storage account", Example: "devstoreaccount1"},
	{Name: paramPartSize, Value: "SIZE", Default: "8MiB", Description: "staged blocks above it, of this size", Example: "4MiB"},
	{Name: paramConcurrency, Value: "N", Default: "4", Description: "blocks of one put staged in parallel", Example: "8"},
}, urlparam.PolicyParameters(paramDeprecatedTimeout)...)

var knownParams = driver.URLParameterNames(URLParameters)

// ParseURL parses a base path "azblob://CONTAINER/PREFIX?PARAMS" into a
// [Config], starting from [DefaultConfig]. The query parameters are:
//
//	endpoint=URL       the Blob service URL of the account (alias
//	                   account_url), e.g. http://127.0.0.1:10000/devstoreaccount1
//	                   for Azurite; default https://ACCOUNT.blob.core.windows.net
//	account=NAME       the storage account; default $AZURE_STORAGE_ACCOUNT
//	part_size=BYTES    staged block size, e.g. 8388608, 8MiB, 512KiB (default 8MiB)
//	concurrency=N      blocks of one Put staged in parallel (default 4)
//	request_timeout=DURATION, max_attempts=N, response_timeout=DURATION,
//	timeout_attempts=N, unanswered_hold=DURATION
//	                   [Config.Request] (see [URLParameters])
//	timeout=DURATION   deprecated: the old name of request_timeout, still
//	                   accepted (not with request_timeout)
//
// Secrets never go into the URL: a connection string is read from
// $AZURE_STORAGE_CONNECTION_STRING and a shared key from $AZURE_STORAGE_KEY
// (with the account from the URL or $AZURE_STORAGE_ACCOUNT). With neither,
// the backend signs in through DefaultAzureCredential. A connection string
// is used only when the URL names no endpoint and no account.
//
// Unknown or repeated query parameters, user information and fragments are
// rejected.
func ParseURL(basePath string) (Config, error) {
	return parseURL(basePath, getenv)
}

func parseURL(basePath string, env func(string) string) (Config, error) {
	u, err := url.Parse(basePath)
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err // without the URL, which may hold a secret
		}
		return Config{}, fmt.Errorf("azure: base path is not a URL: %w", err)
	}
	// Error messages show the base path without user information and
	// query: a secret put there by mistake is not echoed.
	shown := redact(u)
	switch {
	case !strings.EqualFold(u.Scheme, Scheme):
		return Config{}, fmt.Errorf("azure: base path %q: URL scheme %q is not %q", shown, u.Scheme, Scheme)
	case u.User != nil:
		return Config{}, fmt.Errorf("azure: base path %q: user information is not allowed (credentials come from the environment)", shown)
	case u.Fragment != "" || strings.Contains(shown, "#"):
		return Config{}, fmt.Errorf("azure: base path %q: a fragment is not allowed", shown)
	case u.Host == "":
		return Config{}, fmt.Errorf("azure: base path %q: missing container (azblob://container/prefix)", shown)
	}
	cfg := DefaultConfig(u.Host)
	cfg.Prefix = strings.TrimPrefix(u.Path, "/")
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("azure: base path %q: query: %w", shown, err)
	}
	if err := urlparam.Check(q, knownParams); err != nil {
		return Config{}, fmt.Errorf("azure: base path %q: %w", shown, err)
	}
	bad := func(key, want string) error {
		return fmt.Errorf("azure: base path %q: query parameter %q: want %s, got %q", shown, key, want, q.Get(key))
	}
	if q.Has(paramEndpoint) && q.Has(paramAccountURL) {
		return Config{}, fmt.Errorf("azure: base path %q: query parameters %q and %q are the same; give one", shown, paramEndpoint, paramAccountURL)
	}
	cfg.AccountURL = q.Get(paramEndpoint) + q.Get(paramAccountURL)
	cfg.Account = q.Get(paramAccount)
	if q.Has(paramPartSize) {
		n, err := urlparam.Size(q.Get(paramPartSize))
		if err != nil || n < 1 || n > MaxBlockSize {
			return Config{}, bad(paramPartSize, fmt.Sprintf("a size from 1 byte to %d bytes", int64(MaxBlockSize)))
		}
		cfg.PartSize = n
	}
	if q.Has(paramConcurrency) {
		n, err := strconv.Atoi(q.Get(paramConcurrency))
		if err != nil || n < 1 {
			return Config{}, bad(paramConcurrency, "a positive integer")
		}
		cfg.Concurrency = n
	}
	if err := urlparam.Policy(q, &cfg.Request, paramDeprecatedTimeout); err != nil {
		return Config{}, fmt.Errorf("azure: base path %q: %w", shown, err)
	}
	if cfg.AccountURL == "" && cfg.Account == "" {
		cfg.ConnectionString = env(EnvConnectionString)
	}
	if cfg.ConnectionString == "" {
		if cfg.Account == "" {
			cfg.Account = env(EnvAccount)
		}
		cfg.AccountKey = env(EnvKey)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, &basePathError{shown, err}
	}
	return cfg, nil
}

// basePathError is an error of the configuration that a base path gives,
// which says "azure: " once: before the base path, not again before the
// error of the configuration.
type basePathError struct {
	shown string // the base path, as error messages show it
	err   error
}

func (e *basePathError) Error() string {
	return fmt.Sprintf("azure: base path %q: %s", e.shown, strings.TrimPrefix(e.err.Error(), "azure: "))
}

func (e *basePathError) Unwrap() error { return e.err }

// redact returns u without user information and with "?..." for its
// query, for error messages.
func redact(u *url.URL) string {
	v := *u
	v.User = nil
	if v.RawQuery != "" {
		v.RawQuery = "..."
	}
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}
