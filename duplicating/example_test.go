package duplicating_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "github.com/dstlgo/dstl/backends/local" // registers "local" and file://
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/duplicating"
)

// A storage with local recovery mirrors each object to a local directory;
// a restarted process on the same machine reads the checkpoint back from
// the local copies.
func Example() {
	dir, err := os.MkdirTemp("", "dstl-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	cfg := dstl.DefaultConfig(filepath.Join(dir, "remote")) // s3://..., gs://... in production
	cfg.LocalRecoveryEnabled = true
	cfg.LocalRecoveryDir = filepath.Join(dir, "local")
	storage, err := dstl.Open(ctx, cfg, dstl.WithLocalRecovery(duplicating.Open))
	if err != nil {
		log.Fatal(err)
	}
	w, err := storage.NewWriter("counter", dstl.KeyGroupRange{Start: 0, End: 127})
	if err != nil {
		log.Fatal(err)
	}
	_ = w.Append(ctx, 7, []byte("apples=3"))
	future, err := w.Persist(ctx, w.InitialSequenceNumber(), 1)
	if err != nil {
		log.Fatal(err)
	}
	res, err := future.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	w.Confirm(res.From, res.To, 1) // keep res.Remote and res.Local in the checkpoint
	storage.Close()

	// The restart, on the same machine.
	storage, err = dstl.Open(ctx, cfg, dstl.WithLocalRecovery(duplicating.Open))
	if err != nil {
		log.Fatal(err)
	}
	defer storage.Close()
	if _, err := storage.CleanLocalCopies(ctx, res.Remote); err != nil {
		log.Fatal(err)
	}
	r, err := storage.NewReader(dstl.KeyGroupRange{Start: 0, End: 127})
	if err != nil {
		log.Fatal(err)
	}
	report, err := r.ReadPreferLocal(ctx, res.Remote, res.Local, func(c dstl.Change) error {
		fmt.Printf("key group %d: %s\n", c.KeyGroup, c.Data)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d change set read locally, %d from the backend\n", report.LocalSets, report.RemoteSets)
	// Output:
	// key group 7: apples=3
	// 1 change set read locally, 0 from the backend
}
