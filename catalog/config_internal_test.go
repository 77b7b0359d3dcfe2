package catalog

import (
	"reflect"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
)

// TestConfigDefaults: every zero field of a Config but JobID and
// Instances is its default, and NoGrace spells "no grace".
func TestConfigDefaults(t *testing.T) {
	base := Config{JobID: "job", Instances: 4}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		check  func(c Config) bool
		want   string
	}{
		{"processes", nil, func(c Config) bool { return c.Processes == 4 }, "one process per instance"},
		{"process", nil, func(c Config) bool { return c.Process == 0 }, "process 0, the leader"},
		{"max parallelism", nil, func(c Config) bool { return c.MaxParallelism == DefaultMaxParallelism }, "DefaultMaxParallelism"},
		{"key groups", nil, func(c Config) bool {
			return reflect.DeepEqual(c.KeyGroups, []dstl.KeyGroupRange{{Start: 0, End: 31}, {Start: 32, End: 63}, {Start: 64, End: 95}, {Start: 96, End: 127}})
		}, "the key groups split evenly"},
		{"mode", nil, func(c Config) bool { return c.Mode == Aligned }, "Aligned"},
		{"retain", nil, func(c Config) bool { return c.Retain == DefaultRetain }, "DefaultRetain"},
		{"grace", nil, func(c Config) bool { return c.Grace == DefaultGrace && DefaultGrace == 24*time.Hour }, "a day"},
		{"no grace", func(c *Config) { c.Grace = NoGrace }, func(c Config) bool { return c.Grace == NoGrace }, "NoGrace, as collect takes it"},
		{"sweep interval", nil, func(c Config) bool { return c.SweepInterval == 6*time.Hour }, "a quarter of the grace"},
		{"sweep interval, short grace", func(c *Config) { c.Grace = time.Minute }, func(c Config) bool { return c.SweepInterval == time.Minute }, "a minute at least"},
		{"sweep interval, no grace", func(c *Config) { c.Grace = NoGrace }, func(c Config) bool { return c.SweepInterval == time.Minute }, "a minute"},
		{"restore from", nil, func(c Config) bool { return c.RestoreFrom == 0 }, "the latest checkpoint"},
		{"owner", nil, func(c Config) bool { return c.Owner != "" }, "a random id"},
		{"clock", nil, func(c Config) bool { return c.Now != nil }, "time.Now"},
		{"logger", nil, func(c Config) bool { return c.Logger != nil }, "slog.Default()"},
		{"meter provider", nil, func(c Config) bool { return c.MeterProvider == nil }, "nil, the global provider when metrics are made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			if tc.change != nil {
				tc.change(&c)
			}
			got, err := c.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(got) {
				t.Errorf("%+v: want %s", got, tc.want)
			}
		})
	}
	if n := reflect.TypeFor[Config]().NumField(); n != 15 {
		t.Errorf("Config has %d fields: add the new ones' defaults here", n)
	}
}
