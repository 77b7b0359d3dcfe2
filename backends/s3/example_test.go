package s3_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/s3"
)

// Open a backend in code, with a Config. Credentials come from the SDK's
// default chain, e.g. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
func ExampleOpen() {
	ctx := context.Background()
	cfg := s3.DefaultConfig("my-bucket", "dstl/job-1")
	cfg.Region = "eu-west-1"
	cfg.SSE = s3.SSEAES256
	b, err := s3.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	const data = "hello, changelog"
	if err := b.Put(ctx, "000001.dstl", strings.NewReader(data), int64(len(data))); err != nil {
		log.Fatal(err)
	}
	r, err := b.Get(ctx, "000001.dstl", 7, 9) // a ranged read
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

// Open the backend by the URL of a base path, through the registry, here
// on a MinIO server. The blank import of the package registers it:
//
//	import _ "github.com/dstlgo/dstl/backends/s3"
func Example_openBackend() {
	ctx := context.Background()
	b, id, err := backends.Open(ctx, "",
		"s3://dstl/demo?endpoint=http://127.0.0.1:9000&region=us-east-1&use_path_style=true")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fmt.Println("backend:", id)
	err = b.List(ctx, "", func(o backends.ObjectInfo) error {
		fmt.Println(o.Name, o.Size, o.ModTime)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Unknown query parameters are rejected, naming them.
func ExampleParseURL() {
	_, err := s3.ParseURL("s3://my-bucket/dstl?region=eu-west-1&partsize=8388608")
	fmt.Println(err)
	cfg, err := s3.ParseURL("s3://my-bucket/dstl?part_size=16777216&concurrency=8")
	fmt.Println(cfg.Bucket, cfg.Prefix, cfg.PartSize, cfg.Concurrency, err)
	// Output:
	// s3: base path "s3://my-bucket/dstl?region=eu-west-1&partsize=8388608": unknown query parameter(s) "partsize" (known: concurrency, endpoint, max_attempts, part_size, region, request_timeout, response_timeout, sse, sse_kms_key_id, timeout_attempts, unanswered_hold, unsigned_payload, use_path_style)
	// my-bucket dstl 16777216 8 <nil>
}
