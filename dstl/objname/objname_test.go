package objname

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

const (
	v7 = "0190a6f2-7c1e-7abc-8def-0123456789ab" // made in July 2024
	v4 = "0190a6f2-7c1e-4abc-8def-0123456789ab"
)

// v7Millis returns the Unix milliseconds in v7: its first 48 bits, read
// here from the hexadecimal text, apart from the uuid package.
func v7Millis(t *testing.T) int64 {
	ms, err := strconv.ParseInt(v7[:8]+v7[9:13], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestParse(t *testing.T) {
	id7, id4 := uuid.MustParse(v7), uuid.MustParse(v4)
	tests := []struct {
		prefix, name string
		want         Name
	}{
		{"job/", "job/" + v7 + ".dstl", Name{Kind: Log, ID: id7}},
		{"", v7 + ".dstl", Name{Kind: Log, ID: id7}},
		{"a/b/", "a/b/" + v7 + ".dstl", Name{Kind: Log, ID: id7}},
		{"job/", "job/" + strings.ToUpper(v7) + ".dstl", Name{Kind: Log, ID: id7}},
		{"job/", "job/statestore/op-1/" + v7 + ".snap", Name{Kind: Snapshot, ID: id7, Operator: "op-1"}},
		{"", "statestore/op/" + v7 + ".snap", Name{Kind: Snapshot, ID: id7, Operator: "op"}},
		{"job/", "job/statestore/op-1/" + v7 + ".sst", Name{Kind: SnapshotFile, ID: id7, Operator: "op-1"}},
		{"job/", "job/statestore/op-1/" + v7 + ".sst.tmp", Name{}},
		{"job/", "job/statestore/" + v7 + ".sst", Name{}},
		{"job/", "job/.gc-clock-" + v4, Name{Kind: ClockProbe, ID: id4}},
		{"job/", "job/.gc-clock-" + v7, Name{Kind: ClockProbe, ID: id7}},
		{"job/", "job/.create-only-" + v7, Name{Kind: CreateOnlyProbe, ID: id7}},
		{"job/", "job/.create-only-" + v4, Name{}}, // a create-only probe is named by a UUIDv7

		// The checkpoint an object was made for.
		{"job/", "job/" + v7 + ".c42.dstl", Name{Kind: Log, ID: id7, Checkpoint: 42}},
		{"job/", "job/" + v7 + ".c1.dstl", Name{Kind: Log, ID: id7, Checkpoint: 1}},
		{"job/", "job/" + v7 + ".c9223372036854775807.dstl", Name{Kind: Log, ID: id7, Checkpoint: 9223372036854775807}},
		{"job/", "job/statestore/op/" + v7 + ".c7.snap", Name{Kind: Snapshot, ID: id7, Operator: "op", Checkpoint: 7}},
		{"job/", "job/statestore/op/" + v7 + ".c7.sst", Name{Kind: SnapshotFile, ID: id7, Operator: "op", Checkpoint: 7}},
		{"job/", "job/" + v7 + ".c0.dstl", Name{}},                   // no checkpoint 0
		{"job/", "job/" + v7 + ".c042.dstl", Name{}},                 // a leading zero
		{"job/", "job/" + v7 + ".c-4.dstl", Name{}},                  // negative
		{"job/", "job/" + v7 + ".c.dstl", Name{}},                    // no digits
		{"job/", "job/" + v7 + ".C42.dstl", Name{}},                  // the mark is lower case
		{"job/", "job/" + v7 + ".c4x.dstl", Name{}},                  // not a number
		{"job/", "job/" + v7 + ".c9223372036854775808.dstl", Name{}}, // past int64
		{"job/", "job/" + v7 + "x.dstl", Name{}},                     // no mark
		{"job/", "job/" + v4 + ".c42.dstl", Name{}},                  // UUIDv4
		{"job/", "job/.gc-clock-" + v7 + ".c42", Name{}},             // probes record no checkpoint

		// Checkpoint records.
		{"job/", "job/_records/" + v7 + ".c42.rec", Name{Kind: Record, ID: id7, Checkpoint: 42}},
		{"", "_records/" + v7 + ".c1.rec", Name{Kind: Record, ID: id7, Checkpoint: 1}},
		{"job/", "job/_records/" + v7 + ".rec", Name{}},         // a record holds a checkpoint
		{"job/", "job/_records/" + v7 + ".c0.rec", Name{}},      // no checkpoint 0
		{"job/", "job/_records/" + v4 + ".c42.rec", Name{}},     // UUIDv4
		{"job/", "job/_records/x/" + v7 + ".c42.rec", Name{}},   // below the directory
		{"job/", "job/" + v7 + ".c42.rec", Name{}},              // outside the directory
		{"job/", "job/_records/" + v7 + ".c42.dstl", Name{}},    // a log name in the directory
		{"job/", "job/_records/" + v7 + ".c42.rec.tmp", Name{}}, // another suffix

		{"job/", "other/" + v7 + ".dstl", Name{}},        // outside the prefix
		{"job/", "jobs/" + v7 + ".dstl", Name{}},         // outside the prefix
		{"job/", "job/" + v4 + ".dstl", Name{}},          // UUIDv4: not ours
		{"job/", "job/not-a-uuid.dstl", Name{}},          // no UUID
		{"job/", "job/" + v7 + ".snap", Name{}},          // a snapshot outside statestore/
		{"job/", "job/x/" + v7 + ".dstl", Name{}},        // a log name below the prefix
		{"", "job/" + v7 + ".dstl", Name{}},              // likewise, with an empty prefix
		{"job/", "job/{" + v7 + "}.dstl", Name{}},        // braces: not the canonical form
		{"job/", "job/urn:uuid:" + v7 + ".dstl", Name{}}, // urn: not the canonical form
		{"job/", "job/" + strings.ReplaceAll(v7, "-", "") + ".dstl", Name{}},
		{"job/", "job/" + v7, Name{}},               // no suffix
		{"job/", "job/" + v7 + ".dstl.tmp", Name{}}, // another suffix
		{"job/", "job/statestore/op/" + v7 + ".dstl", Name{}},
		{"job/", "job/statestore/op/" + v4 + ".snap", Name{}},
		{"job/", "job/statestore//" + v7 + ".snap", Name{}},    // no operator
		{"job/", "job/statestore/" + v7 + ".snap", Name{}},     // no operator
		{"job/", "job/statestore/a/b/" + v7 + ".snap", Name{}}, // below the operator's directory
		{"job/", "job/snapshots/op-1.snap", Name{}},
		{"job/", "job/.gc-clock-", Name{}},
		{"job/", "job/.gc-clock-x" + v4, Name{}},
		{"job/", "job/x/.gc-clock-" + v4, Name{}},
		{"job/", "", Name{}},
	}
	for _, tt := range tests {
		if got := Parse(tt.prefix, tt.name); got != tt.want {
			t.Errorf("Parse(%q, %q) = %+v, want %+v", tt.prefix, tt.name, got, tt.want)
		}
	}
}

func TestTime(t *testing.T) {
	id7, id4 := uuid.MustParse(v7), uuid.MustParse(v4)
	tests := []struct {
		n    Name
		want time.Time
	}{
		{Name{Kind: Log, ID: id7}, time.UnixMilli(v7Millis(t))},
		{Name{Kind: Snapshot, ID: id7, Operator: "op"}, time.UnixMilli(v7Millis(t))},
		{Name{Kind: SnapshotFile, ID: id7, Operator: "op"}, time.UnixMilli(v7Millis(t))},
		{Name{Kind: ClockProbe, ID: id7}, time.UnixMilli(v7Millis(t))},
		{Name{Kind: ClockProbe, ID: id4}, time.Time{}},
		{Name{Kind: Other, ID: id7}, time.Time{}},
		{Name{Kind: Log, ID: id4}, time.Time{}},
	}
	for _, tt := range tests {
		if got := tt.n.Time(); !got.Equal(tt.want) {
			t.Errorf("%+v.Time() = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// TestNew checks that each new name parses back to its kind, with the time
// it was made in it.
func TestNew(t *testing.T) {
	tests := []struct {
		kind     Kind
		new      func() (string, error)
		operator string
		dir      string
	}{
		{Log, func() (string, error) { return NewLog("job/", 0) }, "", "job/"},
		{Log, func() (string, error) { return NewLog("", 0) }, "", ""},
		{Snapshot, func() (string, error) { return NewSnapshot("job/", "op-1", 0) }, "op-1", "job/statestore/op-1/"},
		{SnapshotFile, func() (string, error) { return NewSnapshotFile("job/", "op-1", 0) }, "op-1", "job/statestore/op-1/"},
		{ClockProbe, func() (string, error) { return NewClockProbe("job/") }, "", "job/"},
		{CreateOnlyProbe, func() (string, error) { return NewCreateOnlyProbe("job/") }, "", "job/"},
	}
	for _, tt := range tests {
		before := time.Now().Truncate(time.Millisecond)
		name, err := tt.new()
		after := time.Now()
		if err != nil {
			t.Fatalf("new %s name: %v", tt.kind, err)
		}
		prefix := strings.TrimSuffix(tt.dir, SnapshotPrefix("", tt.operator))
		if tt.operator == "" {
			prefix = tt.dir
		}
		n := Parse(prefix, name)
		if n.Kind != tt.kind || n.Operator != tt.operator || !strings.HasPrefix(name, tt.dir) || strings.Contains(name[len(tt.dir):], "/") {
			t.Errorf("new %s name %q parses as %+v", tt.kind, name, n)
		}
		if n.Time().Before(before) || n.Time().After(after) {
			t.Errorf("new %s name %q holds %v, made in [%v, %v]", tt.kind, name, n.Time(), before, after)
		}
		again, err := tt.new()
		if err != nil || again == name {
			t.Errorf("two new %s names: %q, %q (%v)", tt.kind, name, again, err)
		}
	}
}

// TestNewMadeFor checks that a new name records the checkpoint it is made
// for.
func TestNewMadeFor(t *testing.T) {
	for _, tt := range []struct {
		new  func() (string, error)
		kind Kind
	}{
		{func() (string, error) { return NewLog("job/", 42) }, Log},
		{func() (string, error) { return NewSnapshot("job/", "op", 42) }, Snapshot},
		{func() (string, error) { return NewSnapshotFile("job/", "op", 42) }, SnapshotFile},
		{func() (string, error) { return NewRecord("job/", 42) }, Record},
	} {
		name, err := tt.new()
		if err != nil {
			t.Fatal(err)
		}
		if n := Parse("job/", name); n.Kind != tt.kind || n.Checkpoint != 42 || !strings.Contains(name, ".c42.") {
			t.Errorf("new %s name made for 42: %q parses as %+v", tt.kind, name, n)
		}
	}
	if _, err := NewLog("job/", -1); err == nil {
		t.Error("NewLog made a name for checkpoint -1")
	}
	if _, err := NewRecord("job/", 0); err == nil {
		t.Error("NewRecord made a name for checkpoint 0")
	}
	before := time.Now().Truncate(time.Millisecond)
	name, err := NewRecord("job/", 7)
	if err != nil {
		t.Fatal(err)
	}
	n := Parse("job/", name)
	if !strings.HasPrefix(name, RecordPrefix("job/")) || n.Time().Before(before) || n.Time().After(time.Now()) {
		t.Errorf("new record name %q: not under %q, or holds %v", name, RecordPrefix("job/"), n.Time())
	}
}

func TestNewLogSorts(t *testing.T) {
	prev, err := NewLog("job/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		next, err := NewLog("job/", 0)
		if err != nil {
			t.Fatal(err)
		}
		if next <= prev {
			t.Fatalf("%q made after %q sorts before it", next, prev)
		}
		prev = next
	}
}

func TestFormatRefuses(t *testing.T) {
	id7, id4 := uuid.MustParse(v7), uuid.MustParse(v4)
	tests := []struct {
		n    Name
		want string // in the error
	}{
		{Name{Kind: Other, ID: id7}, "kind other"},
		{Name{Kind: Log, ID: id4}, "version 4"},
		{Name{Kind: Snapshot, ID: id4, Operator: "op"}, "version 4"},
		{Name{Kind: Snapshot, ID: id7}, `operator ""`},
		{Name{Kind: Snapshot, ID: id7, Operator: "a/b"}, `operator "a/b"`},
		{Name{Kind: Kind(99), ID: id7}, "kind other"},
		{Name{Kind: Log, ID: id7, Checkpoint: -1}, "checkpoint -1"},
		{Name{Kind: ClockProbe, ID: id7, Checkpoint: 3}, "checkpoint 3 in a clock probe name"},
		{Name{Kind: Record, ID: id4, Checkpoint: 3}, "version 4"},
		{Name{Kind: Record, ID: id7}, "needs a checkpoint"},
	}
	for _, tt := range tests {
		name, err := Format("job/", tt.n)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Format(%+v) = %q, %v; want an error with %q", tt.n, name, err, tt.want)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Other: "other", Log: "log", Snapshot: "snapshot", ClockProbe: "clock probe", SnapshotFile: "snapshot file", CreateOnlyProbe: "create-only probe", Record: "record", 42: "other"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

func TestJobPrefix(t *testing.T) {
	for id, want := range map[string]string{"": "", "job": "job/", "a/b": "a/b/"} {
		if got := JobPrefix(id); got != want {
			t.Errorf("JobPrefix(%q) = %q, want %q", id, got, want)
		}
	}
}

// FuzzParse checks that a name Parse accepts formats back to itself (but
// for the case of the UUID's hexadecimal digits) and that Parse reads a
// formatted name back whole.
func FuzzParse(f *testing.F) {
	for _, s := range []struct{ prefix, name string }{
		{"job/", "job/" + v7 + ".dstl"},
		{"", v7 + ".dstl"},
		{"job/", "job/statestore/op/" + v7 + ".snap"},
		{"job/", "job/" + v7 + ".c42.dstl"},
		{"job/", "job/statestore/op/" + v7 + ".c3.sst"},
		{"job/", "job/_records/" + v7 + ".c3.rec"},
		{"job/", "job/.gc-clock-" + v4},
		{"job/", "job/" + v4 + ".dstl"},
		{"job/", "job/statestore/a/b/" + v7 + ".snap"},
		{"a", "ab"},
	} {
		f.Add(s.prefix, s.name)
	}
	f.Fuzz(func(t *testing.T, prefix, name string) {
		n := Parse(prefix, name)
		if n.Kind == Other {
			if n != (Name{}) {
				t.Fatalf("Parse(%q, %q) = %+v: the kind other with fields set", prefix, name, n)
			}
			return
		}
		got, err := Format(prefix, n)
		if err != nil {
			t.Fatalf("Parse(%q, %q) = %+v, which does not format: %v", prefix, name, n, err)
		}
		if !strings.EqualFold(got, name) {
			t.Fatalf("Parse(%q, %q) = %+v, which formats as %q", prefix, name, n, got)
		}
		if again := Parse(prefix, got); again != n {
			t.Fatalf("Parse(%q, %q) = %+v, but its formatted name %q parses as %+v", prefix, name, n, got, again)
		}
		if (n.Kind == Log || n.Kind == Snapshot || n.Kind == SnapshotFile || n.Kind == Record) != !n.Time().IsZero() {
			t.Fatalf("Parse(%q, %q) = %+v with time %v", prefix, name, n, n.Time())
		}
	})
}
