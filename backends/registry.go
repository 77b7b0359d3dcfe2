package backends

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Factory opens a backend rooted at basePath, a URL (or, for the local
// backend, a plain path). The backend parses its own URL form and rejects
// query parameters it does not know.
type Factory func(ctx context.Context, basePath string) (Backend, error)

// Info describes a registered backend.
type Info struct {
	ID      string   // identifier, as in the "storage" option
	Schemes []string // URL schemes of base paths it serves
}

var registry struct {
	sync.RWMutex
	byID     map[string]registration
	byScheme map[string]string // scheme -> id
}

type registration struct {
	info    Info
	factory Factory
}

// Register makes a backend available by identifier and by the URL schemes
// of its base paths. Backends call it from init, like database/sql drivers:
// only the backends a program imports are linked. Register panics if the
// identifier or a scheme is registered twice, or if factory is nil.
func Register(id string, factory Factory, schemes ...string) {
	if id == "" || factory == nil {
		panic("backends: Register needs an identifier and a factory")
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.byID == nil {
		registry.byID = map[string]registration{}
		registry.byScheme = map[string]string{}
	}
	if _, dup := registry.byID[id]; dup {
		panic(fmt.Sprintf("backends: Register called twice for backend %q", id))
	}
	for _, s := range schemes {
		if other, dup := registry.byScheme[s]; dup {
			panic(fmt.Sprintf("backends: URL scheme %q of backend %q is registered by backend %q already", s, id, other))
		}
	}
	for _, s := range schemes {
		registry.byScheme[s] = id
	}
	registry.byID[id] = registration{info: Info{ID: id, Schemes: slices.Clone(schemes)}, factory: factory}
}

// Backends lists the registered backends, sorted by identifier.
func Backends() []Info {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Info, 0, len(registry.byID))
	for _, r := range registry.byID {
		out = append(out, Info{ID: r.info.ID, Schemes: slices.Clone(r.info.Schemes)})
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Open opens the backend named by id, or, when id is empty, the one
// that serves the URL scheme of basePath. A base path without a scheme is a
// local path (scheme "file"). It returns the backend and its identifier.
// An unknown identifier or scheme is an error that lists the known ones.
func Open(ctx context.Context, id, basePath string) (Backend, string, error) {
	if basePath == "" {
		return nil, "", fmt.Errorf("dstl: option %q is required: %w", "base-path", ErrInvalidConfig)
	}
	scheme, hasScheme := URLScheme(basePath)
	if hasScheme && id == "" {
		// A base path with a scheme chooses the backend by it: one that
		// does not parse is an error, never a local path. With the backend
		// named, the backend alone decides what its base paths look like.
		if _, err := url.Parse(basePath); err != nil {
			if ue, ok := err.(*url.Error); ok {
				err = ue.Err
			}
			return nil, "", fmt.Errorf("%w: base path %q is not a valid URL: %w", ErrInvalidConfig, RedactURL(basePath), err)
		}
	}
	registry.RLock()
	if id == "" {
		if !hasScheme {
			scheme = "file"
		}
		var ok bool
		if id, ok = registry.byScheme[scheme]; !ok {
			registry.RUnlock()
			return nil, "", fmt.Errorf("%w: no backend serves URL scheme %q of base path %q (known schemes: %s; is the backend's package imported?)",
				ErrUnknownBackend, scheme, RedactURL(basePath), strings.Join(knownSchemes(), ", "))
		}
	}
	r, ok := registry.byID[id]
	registry.RUnlock()
	if !ok {
		return nil, "", fmt.Errorf("%w %q (known: %s; is the backend's package imported?)",
			ErrUnknownBackend, id, strings.Join(knownIDs(), ", "))
	}
	b, err := r.factory(ctx, basePath)
	if err != nil {
		return nil, "", fmt.Errorf("dstl: open %s backend at %q: %w", id, RedactURL(basePath), RedactError(redactError(basePath, err)))
	}
	return b, id, nil
}

// URLScheme returns the URL scheme that basePath starts with, lower-cased,
// by the syntax of RFC 3986 alone (a letter, then letters, digits, "+",
// "-" or ".", then ":"), whether or not the rest of basePath parses. A
// one-letter scheme is a Windows drive letter, not a scheme.
func URLScheme(basePath string) (string, bool) {
	i := strings.IndexByte(basePath, ':')
	if i < 2 {
		return "", false
	}
	for j := 0; j < i; j++ {
		c := basePath[j]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case j > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return "", false
		}
	}
	return strings.ToLower(basePath[:i]), true
}

func knownIDs() []string {
	registry.RLock()
	defer registry.RUnlock()
	ids := make([]string, 0, len(registry.byID))
	for id := range registry.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return []string{"none registered"}
	}
	return ids
}

func knownSchemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	s := make([]string, 0, len(registry.byScheme))
	for k := range registry.byScheme {
		s = append(s, k)
	}
	slices.Sort(s)
	if len(s) == 0 {
		return []string{"none registered"}
	}
	return s
}

// RegisterURL registers a backend package whose base paths parse into a
// configuration with parse and open with open (see [Register]): the
// factory is [OpenURL] of the two.
func RegisterURL[C any, B Backend](id string, parse func(basePath string) (C, error), open func(ctx context.Context, cfg C) (B, error), schemes ...string) {
	Register(id, func(ctx context.Context, basePath string) (Backend, error) {
		b, err := OpenURL(ctx, basePath, parse, open)
		if err != nil {
			return nil, err // not a typed nil in an interface
		}
		return b, nil
	}, schemes...)
}

// OpenURL parses basePath with parse and opens the backend with open. An
// error of parse is a configuration error: it matches [ErrInvalidConfig].
func OpenURL[C any, B Backend](ctx context.Context, basePath string, parse func(basePath string) (C, error), open func(ctx context.Context, cfg C) (B, error)) (B, error) {
	cfg, err := parse(basePath)
	if err != nil {
		var none B
		return none, Invalid(err)
	}
	return open(ctx, cfg)
}

// Invalid marks err, an error of a backend's URL parser or configuration
// check, as a configuration error: it matches [ErrInvalidConfig] (and still
// err) with errors.Is, and reads as err. A nil err stays nil.
func Invalid(err error) error {
	if err == nil || errors.Is(err, ErrInvalidConfig) {
		return err
	}
	return &invalidError{err}
}

type invalidError struct{ err error }

func (e *invalidError) Error() string   { return e.err.Error() }
func (e *invalidError) Unwrap() []error { return []error{e.err, ErrInvalidConfig} }
