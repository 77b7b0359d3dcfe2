package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl/objname"
)

// errNoSuchPath is wrapped by the error about a local base path, or a
// job's directory in it, that does not exist.
var errNoSuchPath = errors.New("does not exist")

// openExisting opens the backend of a base path as backends.Open does,
// except that the directory of a local base path is not created when it
// is missing (local.Config.CreateRoot is off, whatever the URL's mkdir
// says): that is an error that wraps errNoSuchPath. The commands that only
// read, and gc, open their base path with it.
func openExisting(ctx context.Context, storage, basePath string) (backends.Backend, string, error) {
	if !isLocal(storage, basePath) {
		return backends.Open(ctx, storage, basePath)
	}
	cfg, err := local.ParseURL(basePath)
	if err != nil {
		return nil, "", fmt.Errorf("open %s backend at %q: %w", local.ID, basePath, backends.Invalid(err))
	}
	cfg.CreateRoot = false
	b, err := local.Open(ctx, cfg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%s %w", cfg.Root, errNoSuchPath)
	}
	if err != nil {
		return nil, "", fmt.Errorf("open %s backend at %q: %w", local.ID, basePath, err)
	}
	return b, local.ID, nil
}

// isLocal reports whether backends.Open would open basePath with the
// local backend.
func isLocal(storage, basePath string) bool {
	if storage != "" {
		return storage == local.ID
	}
	scheme, ok := backends.URLScheme(basePath)
	return !ok || scheme == local.Scheme
}

// checkJobDir returns an error that wraps errNoSuchPath when b is a local
// backend in which the directory of job jobID's objects does not exist:
// gc checks it before its clock probe, whose put would create it. A job's
// objects on other stores have no directory to look for.
func checkJobDir(b backends.Backend, jobID string) error {
	lb, ok := b.(*local.Backend)
	if !ok || jobID == "" {
		return nil
	}
	dir := filepath.Join(lb.Root(), filepath.FromSlash(strings.TrimSuffix(objname.JobPrefix(jobID), "/")))
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s %w: the base path has no job %q", dir, errNoSuchPath, jobID)
	}
	return nil
}
