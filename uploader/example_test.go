package uploader_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/uploader"
)

// failFirst fails its first attempt, then lets the wrapped uploader store
// every batch: a storage retries the failed batch and the persist
// succeeds.
type failFirst struct {
	uploader.Uploader
	calls atomic.Int64
}

func (f *failFirst) Upload(ctx context.Context, tasks []*uploader.Task) (*uploader.Output, error) {
	if f.calls.Add(1) == 1 {
		return nil, errors.New("injected failure")
	}
	return f.Uploader.Upload(ctx, tasks)
}

// An uploader that wraps the storage's own one, to inject a fault.
func Example() {
	ctx := context.Background()
	cfg := dstl.DefaultConfig("memory")
	cfg.UploadNextAttemptDelay = dstl.NoAttemptDelay
	var wrapped *failFirst
	s, err := dstl.New(cfg, dstltest.NewBackend(), dstl.WithUploader(func(u uploader.Uploader) uploader.Uploader {
		wrapped = &failFirst{Uploader: u}
		return wrapped
	}))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	_ = w.Append(ctx, 0, []byte("change"))
	f, _ := w.Persist(ctx, 0, 1)
	res, err := f.Wait(ctx)
	fmt.Println(err, res.Remote.Entries[0].SequenceNumber, wrapped.calls.Load())
	// Output: <nil> 0 2
}
