package collect

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
)

// TestOptionsDefaults: every zero field of Options is its default, and
// NoGrace and NoTimeout spell "none" (a grace of 0, no bound), which no
// other negative value does.
func TestOptionsDefaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     Options
		check  func(o Options) bool
		reason string
	}{
		{"grace", Options{}, func(o Options) bool { return o.Grace == DefaultGrace }, "zero grace is DefaultGrace"},
		{"no grace", Options{Grace: NoGrace}, func(o Options) bool { return o.Grace == 0 }, "NoGrace is none"},
		{"grace set", Options{Grace: time.Minute}, func(o Options) bool { return o.Grace == time.Minute }, "a grace is kept"},
		{"kinds", Options{}, func(o Options) bool { return o.Kinds == Logs|Snapshots }, "zero kinds are logs and snapshots"},
		{"kinds set", Options{Kinds: Records}, func(o Options) bool { return o.Kinds == Records }, "kinds are kept"},
		{"concurrency", Options{}, func(o Options) bool { return o.Concurrency == DefaultConcurrency }, "zero concurrency is the default"},
		{"timeout", Options{}, func(o Options) bool { return o.Timeout == DefaultTimeout }, "zero timeout is DefaultTimeout"},
		{"no timeout", Options{Timeout: NoTimeout}, func(o Options) bool { return o.Timeout == 0 }, "NoTimeout is no bound"},
		{"now", Options{}, func(o Options) bool { return o.Now != nil }, "zero clock is time.Now"},
		{"hold", Options{}, func(o Options) bool { return o.HoldFrom == 0 }, "zero hold holds nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.in.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(o) {
				t.Errorf("%+v: want %s", o, tc.reason)
			}
		})
	}
	for _, bad := range []Options{{Grace: NoGrace - 1}, {Timeout: NoTimeout - 1}} {
		if _, err := bad.withDefaults(); !errors.Is(err, backends.ErrInvalidConfig) {
			t.Errorf("%+v: error %v, want one wrapping ErrInvalidConfig", bad, err)
		}
	}
	// The table covers the fields whose zero is a default of its own.
	if n := reflect.TypeFor[Options]().NumField(); n != 12 {
		t.Errorf("Options has %d fields: check the new ones' defaults here", n)
	}
}
