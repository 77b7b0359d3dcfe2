package azure_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/azure"
)

// Open a backend in code, with a Config: here with a shared key, against
// Azurite's development account (the key comes from the environment).
func ExampleOpen() {
	ctx := context.Background()
	cfg := azure.DefaultConfig("dstl")
	cfg.AccountURL = "http://127.0.0.1:10000/devstoreaccount1"
	cfg.Account = "devstoreaccount1"
	cfg.AccountKey = os.Getenv("AZURE_STORAGE_KEY")
	cfg.Prefix = "jobs/job-1/"
	b, err := azure.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	const data = "hello, changelog"
	if err := b.Put(ctx, "000001", strings.NewReader(data), int64(len(data))); err != nil {
		log.Fatal(err)
	}
	r, err := b.Get(ctx, "000001", 7, 9) // a ranged read: "changelog"
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
//	import _ "github.com/dstlgo/dstl/backends/azure"
//
// Without an endpoint the account URL is https://ACCOUNT.blob.core.windows.net;
// the credentials come from AZURE_STORAGE_CONNECTION_STRING, or
// AZURE_STORAGE_KEY, or else DefaultAzureCredential.
func Example_openBackend() {
	ctx := context.Background()
	b, id, err := backends.Open(ctx, "",
		"azblob://dstl/jobs/job-1?endpoint=http://127.0.0.1:10000/devstoreaccount1&account=devstoreaccount1&part_size=8MiB")
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
