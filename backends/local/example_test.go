package local_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
)

// Open a backend in code, with a Config.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dstl-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	b, err := local.Open(ctx, local.DefaultConfig(dir))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	const data = "hello, changelog"
	if err := b.Put(ctx, "job-1/000001", strings.NewReader(data), int64(len(data))); err != nil {
		log.Fatal(err)
	}
	r, err := b.Get(ctx, "job-1/000001", 7, 9) // a ranged read
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(got))
	// Output: changelog
}

// Open the backend by the URL of a base path, through the registry. The
// blank import of the package registers it:
//
//	import _ "github.com/dstlgo/dstl/backends/local"
func Example_openBackend() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dstl-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// fsync=false is for tests and examples only.
	b, id, err := backends.Open(ctx, "", "file://"+dir+"/objects?fsync=false")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	for _, name := range []string{"b/2", "a/1", "a/0"} {
		if err := b.Put(ctx, name, strings.NewReader(name), int64(len(name))); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("backend:", id)
	err = b.List(ctx, "a/", func(o backends.ObjectInfo) error {
		fmt.Println(o.Name, o.Size)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	_, _, err = backends.Open(ctx, "", "file://"+dir+"?sync=false")
	fmt.Println(err != nil)
	// Output:
	// backend: local
	// a/0 3
	// a/1 3
	// true
}
