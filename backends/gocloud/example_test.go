package gocloud_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"strings"

	"gocloud.dev/blob/memblob"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/gocloud"
)

// Open a backend by the URL of a base path, through the registry. The blank
// import of the package registers it for mem:// URLs, and for any
// gocloud.dev/blob URL when selected by identifier:
//
//	import _ "github.com/dstlgo/dstl/backends/gocloud"
func Example_openBackend() {
	ctx := context.Background()
	b, id, err := backends.Open(ctx, "", "mem://bucket/jobs/42")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	const data = "hello, changelog"
	if err := b.Put(ctx, "000001.dstl", strings.NewReader(data), int64(len(data))); err != nil {
		log.Fatal(err)
	}
	r, err := b.Get(ctx, "000001.dstl", 7, -1)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id, string(got))
	// Output: gocloud changelog
}

// Open an S3 bucket (or any other gocloud URL) by identifier: the URL
// scheme s3 belongs to the native s3 backend. The path after the bucket is
// the object prefix; region, endpoint and use_path_style are s3blob's own
// parameters, part_size is this package's. Credentials come from the AWS
// SDK's standard chain.
func Example_s3() {
	ctx := context.Background()
	b, _, err := backends.Open(ctx, gocloud.ID,
		"s3://my-bucket/jobs/42?region=eu-west-1&part_size=8388608")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
}

// Open a backend in code, on a bucket the program has opened already.
func ExampleOpen() {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()

	cfg := gocloud.DefaultConfig("")
	cfg.Bucket = bucket
	cfg.Prefix = "jobs/42/"
	b, err := gocloud.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := b.Put(ctx, "a", strings.NewReader("x"), 1); err != nil {
		log.Fatal(err)
	}
	ok, err := bucket.Exists(ctx, "jobs/42/a")
	fmt.Println(ok, err)
	// Output: true <nil>
}
