package statestore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/s3"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// silentListener accepts connections on 127.0.0.1, reads what they send
// and never answers: an endpoint whose service hangs. Its cleanup closes
// the listener and every connection.
func silentListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln
}

// TestRestoreSilentEndpoint: restores through one storage, with the
// default policy, from an s3 endpoint that takes connections and never
// answers: four writers' logs, one after another, then a snapshot. The
// first read fails after its deadlines with a timeout that names the
// endpoint; every later one, the state store's snapshot read included,
// fails at once with ErrUnavailable, quoting it, since the bucket holds
// its reads after the unanswered one. The whole takes the deadlines of one
// read (about 20 s), within 30 s.
func TestRestoreSilentEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 20 s: the default deadlines of one read")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	ln := silentListener(t)
	addr := ln.Addr().String()
	cfg := s3.DefaultConfig("bkt", "job") // the default policy
	cfg.Endpoint, cfg.UsePathStyle, cfg.Region = "http://"+addr, true, "us-east-1"
	b, err := s3.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	scfg := dstl.DefaultConfig("s3://bkt/job")
	scfg.JobID = "job"
	storage, err := dstl.New(scfg, b, dstl.WithStorageID(s3.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer storage.Close()

	const writers = 4
	type restore struct {
		name string
		h    *statestore.CheckpointHandle
	}
	var restores []restore
	width := maxP / writers
	for i := range writers {
		kgr := dstl.KeyGroupRange{Start: i * width, End: (i+1)*width - 1}
		log := dstl.Handle{StorageID: storage.ID(), LogID: dstl.NewLogID(), KeyGroups: kgr,
			Entries:    []dstl.HandleEntry{{Object: fmt.Sprintf("job/log-%d.dstl", i), Offset: 0, Length: 64, SequenceNumber: 0, LogicalSize: 10}},
			StoredSize: 64, LogicalSize: 10, IncrementalSize: 64}
		if err := log.Validate(); err != nil {
			t.Fatal(err)
		}
		restores = append(restores, restore{fmt.Sprintf("log of writer %d", i), &statestore.CheckpointHandle{
			CheckpointID: 1, Operator: fmt.Sprintf("op-%d", i), KeyGroups: kgr, MaxParallelism: maxP,
			Logs: []statestore.LogRef{{Remote: log}}}})
	}
	restores = append(restores, restore{"snapshot", &statestore.CheckpointHandle{
		CheckpointID: 1, Operator: "op-snap", KeyGroups: allGroups, MaxParallelism: maxP,
		Snapshots: []statestore.SnapshotRef{{Object: "job/snapshots/op-snap/1.snap", Size: 100}}}})

	start := time.Now()
	for i, r := range restores {
		cp, err := statestore.NewCheckpointer(storage, statestore.Config{
			Operator: r.h.Operator, KeyGroups: r.h.KeyGroups, MaxParallelism: maxP, MaterializeInterval: -1, MaterializeSize: -1})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		err = cp.InitializeState(context.Background(), statestore.CheckpointInfo{CheckpointID: 1}, r.h)
		t.Logf("%s failed after %v (%v in all): %v", r.name, time.Since(began).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), err)
		cp.Close()
		switch {
		case err == nil:
			t.Fatalf("%s restored", r.name)
		case !strings.Contains(err.Error(), addr):
			t.Errorf("%s: error %q does not name the endpoint %s", r.name, err, addr)
		case i == 0 && (!errors.Is(err, context.DeadlineExceeded) || errors.Is(err, dstl.ErrUnavailable)):
			t.Errorf("%s: error %v, want the timeout of the unanswered read", r.name, err)
		case i > 0 && (!errors.Is(err, dstl.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)):
			t.Errorf("%s: error %v, want ErrUnavailable (no timeout)", r.name, err)
		}
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the restores of %d writers' logs and a snapshot took %v, want the deadlines of one read (at most 30 s)", writers, took)
	}
}
