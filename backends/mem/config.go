package mem

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
)

// Config configures an in-memory [Backend]. The zero Config is valid: a
// backend on a new store, without prefix, whose requests are tried once.
type Config struct {
	// Store holds the objects; backends opened on one store share them.
	// Default nil: a new, empty store ([Backend.Store] returns it).
	Store *Store
	// Name labels the store in the root that As reports
	// ("memory://NAME"). Default "": "memory".
	Name string
	// Prefix is put before every object name, e.g. "jobs/42/": the key of
	// the object "x" in the store is Prefix+"x". A non-empty prefix
	// without a trailing slash gets one. Default "".
	Prefix string
	// Request is how the portable layer times and retries each request.
	// Default (the zero Policy) [backends.NoRetries]: one attempt, no
	// timeout.
	Request backends.Policy
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case strings.HasPrefix(c.Prefix, "/") || strings.ContainsRune(c.Prefix, 0):
		return fmt.Errorf("memory: prefix %q: must be relative and without NUL bytes", c.Prefix)
	case strings.ContainsAny(c.Name, "/\x00"):
		return fmt.Errorf("memory: name %q: must not contain a slash or a NUL byte", c.Name)
	}
	if c.Request == (backends.Policy{}) {
		return nil
	}
	if err := c.Request.Validate(); err != nil {
		return fmt.Errorf("memory: Request: %w", err)
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

// URLParameters are the query parameters the memory:// form of a base
// path takes: none.
var URLParameters = []driver.URLParameter{}

// ParseURL parses a base path "memory://NAME/PREFIX" into a [Config]: a
// new, empty store labelled NAME (optional), whose objects go under
// PREFIX (optional; a trailing slash is added). Every Open of the Config
// makes a new store, so two backends opened from one base path share no
// object. Query parameters (there are none), user information, ports and
// fragments are rejected.
func ParseURL(basePath string) (Config, error) {
	u, err := url.Parse(basePath)
	if err != nil {
		return Config{}, fmt.Errorf("memory: base path %q: %w", backends.RedactURL(basePath), err)
	}
	switch {
	case !strings.EqualFold(u.Scheme, Scheme):
		return Config{}, fmt.Errorf("memory: base path %q: want %s://NAME/PREFIX", backends.RedactURL(basePath), Scheme)
	case u.Opaque != "":
		return Config{}, fmt.Errorf("memory: base path %q: want %s://NAME/PREFIX", backends.RedactURL(basePath), Scheme)
	case u.User != nil || u.Port() != "":
		return Config{}, fmt.Errorf("memory: base path %q: user information and ports are not supported", backends.RedactURL(basePath))
	case u.Fragment != "" || strings.Contains(basePath, "#"):
		return Config{}, fmt.Errorf("memory: base path %q: URLs cannot carry a fragment", backends.RedactURL(basePath))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("memory: base path %q: query: %w", backends.RedactURL(basePath), err)
	}
	if err := urlparam.Check(q, driver.URLParameterNames(URLParameters)); err != nil {
		return Config{}, fmt.Errorf("memory: base path %q: %w", backends.RedactURL(basePath), err)
	}
	cfg := Config{Name: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	return cfg, cfg.Validate()
}
