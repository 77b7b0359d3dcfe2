// Package child holds what the examples' verify commands need to run
// their services as child processes: the command that starts one, a
// writer that several processes' output copiers share, and the
// parent-death signal that keeps a child from outliving verify.
package child

import (
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
)

// Command returns the command that runs the service with args.
type Command func(ctx context.Context, args ...string) (*exec.Cmd, error)

// Self runs this program's "run" with args.
func Self(ctx context.Context, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, exe, append([]string{"run"}, args...)...), nil
}

// LockedWriter serialises the writes of several goroutines (verify's own
// and its children's output copiers) to W.
type LockedWriter struct {
	Mu *sync.Mutex
	W  io.Writer
}

// Write writes p to W under Mu.
func (l LockedWriter) Write(p []byte) (int, error) {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return l.W.Write(p)
}
