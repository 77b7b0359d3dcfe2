package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// TestGCWarnings: what goes wrong without failing gc is a warning on
// stderr, in gc's words: a clock probe that could not be deleted, and a
// dry run that goes on by this machine's clock, which the report's clock
// note says too; a step the storage did not answer names the base path
// and --timeout.
func TestGCWarnings(t *testing.T) {
	onProbe := func(op dstltest.Op, f dstltest.Fault) dstltest.FaultFunc {
		return func(o dstltest.Op, name string) dstltest.Fault {
			if o == op && regexp.MustCompile(regexp.QuoteMeta(objname.ClockProbePrefix)).MatchString(name) {
				return f
			}
			return dstltest.Fault{}
		}
	}
	probe := `job/` + regexp.QuoteMeta(objname.ClockProbePrefix) + `[0-9a-f-]+`
	for _, tc := range []struct {
		name   string
		fault  dstltest.FaultFunc
		args   []string
		stderr string // the whole of stderr, a regular expression
		note   string // the report's clock note, a regular expression
	}{
		{"the probe's delete fails", onProbe(dstltest.OpDelete, dstltest.Fault{Err: backends.ErrPermission}), nil,
			`^dstl gc: warning: the clock probe "` + probe + `" could not be deleted: .*permission.*\n$`, `^$`},
		{"the probe's put fails, dry run", onProbe(dstltest.OpPut, dstltest.Fault{Err: backends.ErrPermission}), []string{"--dry-run"},
			`^dstl gc: warning: the clock probe failed \(.*permission.*\): ages are by this machine's clock\n$`,
			`^the clock probe failed \(.*permission.*\): ages are by this machine's clock$`},
		{"the probe's put stalls, dry run", onProbe(dstltest.OpPut, dstltest.Fault{Stall: true}), []string{"--dry-run", "--timeout", "200ms"},
			`^dstl gc: warning: the clock probe failed \(the clock probe ` + probe + `: the storage at mem://test did not answer within --timeout 200ms: .*\): ages are by this machine's clock\n$`,
			`^the clock probe failed \(the clock probe ` + probe + `: the storage at mem://test did not answer within --timeout 200ms: .*\): ages are by this machine's clock$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := timedBackend{dstltest.NewBackend(), map[string]time.Time{}}
			memObjects(t, b, 2, time.Now().Add(-3*time.Hour))
			b.SetFault(tc.fault)
			r := runGCOver(t, t.Context(), b, time.Now, append([]string{"--grace", "1h", "--keep-none"}, tc.args...)...)
			if r.code != exitOK {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.out, r.errOut)
			}
			if !regexp.MustCompile(tc.stderr).MatchString(r.errOut) {
				t.Errorf("stderr %q, want %q", r.errOut, tc.stderr)
			}
			if !regexp.MustCompile(tc.note).MatchString(r.rep.ClockNote) {
				t.Errorf("clock note %q, want %q", r.rep.ClockNote, tc.note)
			}
		})
	}
}
