package local

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
)

// Config configures a local [Backend]. Start from [DefaultConfig].
type Config struct {
	// Root is the directory that holds the objects. A relative path is
	// resolved against the working directory when the backend is opened.
	// Required.
	Root string
	// CreateRoot creates Root (and its missing parents) when it does not
	// exist. When false, a missing Root is an error. [DefaultConfig] and
	// the URL form set it (URL parameter "mkdir", default true); the zero
	// Config does not.
	CreateRoot bool
	// NoSync skips every fsync: of written files and of the directories
	// that name them. Objects are still published atomically, but an
	// operating-system crash or power loss may lose or truncate them. It
	// is meant only for tests and benchmarks. Default false, i.e. every
	// Put and Delete is durable when it returns (URL parameter "fsync",
	// inverted).
	NoSync bool
}

// DefaultConfig returns the default configuration for a backend rooted at
// root: the root is created when missing and every write is fsynced.
func DefaultConfig(root string) Config {
	return Config{Root: root, CreateRoot: true}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Root == "" {
		return errors.New("local: root directory is required")
	}
	if strings.ContainsRune(c.Root, 0) {
		return fmt.Errorf("local: root directory %q contains a NUL byte", c.Root)
	}
	return nil
}

// URL query parameters of the file:// form, see [ParseURL].
const (
	paramMkdir = "mkdir"
	paramFsync = "fsync"
)

// URLParameters are the query parameters the file:// form of a base path
// takes (see [ParseURL]); no other is accepted.
var URLParameters = []driver.URLParameter{
	{Name: paramMkdir, Value: "BOOL", Default: "true", Description: "create the root directory when missing", Example: "false"},
	{Name: paramFsync, Value: "BOOL", Default: "true", Description: "fsync files and directories; false is for tests and benchmarks only", Example: "false"},
}

// ParseURL parses a base path into a [Config], starting from
// [DefaultConfig]. The base path is either a plain path such as "/var/dstl"
// or "./dstl", taken literally (a "?" in it is part of the path, not a
// query), or a URL "file:///abs/path" (also "file://localhost/abs/path" or
// "file:/abs/path") whose path is percent-decoded and which may carry these
// query parameters:
//
//	mkdir=true|false  create the root directory when missing (default true)
//	fsync=true|false  fsync files and directories (default true); false is
//	                  for tests and benchmarks only, see Config.NoSync
//
// For example "file:///var/dstl?mkdir=false". Unknown or repeated query
// parameters, a host other than "localhost", relative file: URLs, fragments
// and URLs of other schemes are rejected.
func ParseURL(basePath string) (Config, error) {
	if basePath == "" {
		return Config{}, errors.New("local: empty base path")
	}
	scheme, _, hasScheme := strings.Cut(basePath, ":")
	if !hasScheme || !strings.EqualFold(scheme, Scheme) {
		// A plain path, unless it looks like a URL of another scheme.
		// A one-letter "scheme" is a Windows drive letter. A URL of another
		// scheme that does not parse is still no path.
		if s, ok := backends.URLScheme(basePath); ok && strings.HasPrefix(basePath[len(s):], "://") {
			return Config{}, fmt.Errorf("local: base path %q: URL scheme %q is not %q", backends.RedactURL(basePath), s, Scheme)
		}
		cfg := DefaultConfig(basePath)
		return cfg, cfg.Validate()
	}
	u, err := url.Parse(basePath)
	if err != nil {
		return Config{}, fmt.Errorf("local: base path %q: %w", backends.RedactURL(basePath), err)
	}
	switch {
	case u.Opaque != "":
		return Config{}, fmt.Errorf("local: base path %q: a file URL needs an absolute path (file:///abs/path); use a plain path for a relative one", backends.RedactURL(basePath))
	case u.Host != "" && !strings.EqualFold(u.Host, "localhost"):
		return Config{}, fmt.Errorf("local: base path %q: file URLs with host %q are not supported (use file:///abs/path)", backends.RedactURL(basePath), u.Host)
	case u.User != nil:
		return Config{}, fmt.Errorf("local: base path %q: file URLs cannot carry user information", backends.RedactURL(basePath))
	case u.Fragment != "" || strings.Contains(basePath, "#"):
		return Config{}, fmt.Errorf("local: base path %q: file URLs cannot carry a fragment", backends.RedactURL(basePath))
	case u.Path == "":
		return Config{}, fmt.Errorf("local: base path %q: missing path", backends.RedactURL(basePath))
	}
	cfg := DefaultConfig(u.Path)
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("local: base path %q: query: %w", backends.RedactURL(basePath), err)
	}
	if err := urlparam.Check(q, driver.URLParameterNames(URLParameters)); err != nil {
		return Config{}, fmt.Errorf("local: base path %q: %w", backends.RedactURL(basePath), err)
	}
	boolParam := func(key string, dst *bool) error {
		vs, ok := q[key]
		if !ok {
			return nil
		}
		if len(vs) != 1 {
			return fmt.Errorf("local: base path %q: query parameter %q given %d times", backends.RedactURL(basePath), key, len(vs))
		}
		v, err := strconv.ParseBool(vs[0])
		if err != nil {
			return fmt.Errorf("local: base path %q: query parameter %q: want true or false, got %q", backends.RedactURL(basePath), key, vs[0])
		}
		*dst = v
		return nil
	}
	fsync := true
	if err := boolParam(paramMkdir, &cfg.CreateRoot); err != nil {
		return Config{}, err
	}
	if err := boolParam(paramFsync, &fsync); err != nil {
		return Config{}, err
	}
	cfg.NoSync = !fsync
	return cfg, cfg.Validate()
}
