package gcs_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/gcs"
)

// Open a backend in code, with a Config. Credentials come from Application
// Default Credentials; set Endpoint to use an emulator such as
// fake-gcs-server instead.
func ExampleOpen() {
	ctx := context.Background()
	cfg := gcs.DefaultConfig("my-bucket", "jobs/job-1/")
	cfg.PartSize = 8 << 20 // resumable uploads above 8 MiB, in 8 MiB chunks
	b, err := gcs.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	const data = "hello, changelog"
	if err := b.Put(ctx, "000001", strings.NewReader(data), int64(len(data))); err != nil {
		log.Fatal(err)
	}
	r, err := b.Get(ctx, "000001", 7, 9) // a ranged read
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(got))
}

// Open the backend by the URL of a base path, through the registry. The
// blank import of the package registers it:
//
//	import _ "github.com/dstlgo/dstl/backends/gcs"
func Example_openBackend() {
	ctx := context.Background()
	// Against fake-gcs-server on port 4443; drop endpoint for Google Cloud
	// Storage.
	b, id, err := backends.Open(ctx, "", "gs://my-bucket/jobs/job-1?endpoint=http://127.0.0.1:4443&part_size=1MiB")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fmt.Println("backend:", id)
}
