package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dstlgo/dstl/dstl"
)

// backendOption is a query parameter of a backend's base path URL.
type backendOption struct {
	Name        string `json:"name"`
	Value       string `json:"value"` // the kind of value: BOOL, SIZE, DURATION, N, URL, ...
	Default     string `json:"default,omitempty"`
	Description string `json:"description"`
}

// backendDoc is what "dstl backends" says of a backend beyond the
// registry's identifier and schemes.
type backendDoc struct {
	BasePath    string          `json:"base_path"`
	Credentials string          `json:"credentials"`
	Options     []backendOption `json:"options"`
}

// backendDocs documents the backends of this module, by identifier. A test
// checks that each backend's URL parser takes every option listed.
var backendDocs = map[string]backendDoc{
	"local": {
		BasePath:    "/path, ./path or file:///path",
		Credentials: "none (file permissions)",
		Options: []backendOption{
			{"mkdir", "BOOL", "true", "create the root directory when missing"},
			{"fsync", "BOOL", "true", "fsync files and directories; false is for tests and benchmarks only"},
		},
	},
	"s3": {
		BasePath:    "s3://BUCKET/PREFIX",
		Credentials: "AWS default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, shared config, IAM roles); AWS_CA_BUNDLE honoured",
		Options: []backendOption{
			{"endpoint", "URL", "AWS", "base URL of an S3-compatible service, e.g. MinIO's"},
			{"region", "NAME", "SDK chain, else us-east-1", "signing region"},
			{"use_path_style", "BOOL", "false", "path-style addressing (MinIO and the like)"},
			{"part_size", "SIZE", "8MiB", "multipart threshold and part size, 5MiB to 5GiB"},
			{"concurrency", "N", "4", "parts of one put in flight, 1 to 64"},
			{"sse", "MODE", "none", "server-side encryption: none, AES256 or aws:kms"},
			{"sse_kms_key_id", "ID", "the account's", "KMS key of sse=aws:kms"},
			{"request_timeout", "DURATION", "30s", "bound of each attempt of a request; 0 for none"},
			{"max_attempts", "N", "5", "attempts per request, the first included"},
		},
	},
	"gcs": {
		BasePath:    "gs://BUCKET/PREFIX",
		Credentials: "Application Default Credentials, or credentials_file; none with an endpoint",
		Options: []backendOption{
			{"endpoint", "URL", "Google Cloud Storage", "base URL of the service, e.g. fake-gcs-server's"},
			{"credentials_file", "PATH", "", "service account or other credentials JSON file"},
			{"anonymous", "BOOL", "false (true in effect with endpoint)", "send no credentials"},
			{"part_size", "SIZE", "16MiB", "resumable upload above it, in chunks of it; a multiple of 256KiB"},
			{"timeout", "DURATION", "30s", "per-request timeout"},
			{"max_attempts", "N", "5", "attempts per request, the first included"},
		},
	},
	"azure": {
		BasePath:    "azblob://CONTAINER/PREFIX",
		Credentials: "AZURE_STORAGE_CONNECTION_STRING, else AZURE_STORAGE_KEY with the account, else DefaultAzureCredential",
		Options: []backendOption{
			{"endpoint", "URL", "https://ACCOUNT.blob.core.windows.net", "Blob service URL of the account (alias account_url), e.g. Azurite's"},
			{"account", "NAME", "$AZURE_STORAGE_ACCOUNT", "storage account"},
			{"part_size", "SIZE", "8MiB", "staged blocks above it, of this size"},
			{"concurrency", "N", "4", "blocks of one put staged in parallel"},
			{"timeout", "DURATION", "30s", "per-request timeout"},
			{"max_attempts", "N", "5", "attempts per request, the first included"},
		},
	},
	"gocloud": {
		BasePath:    "mem://NAME/PREFIX; any gocloud.dev/blob URL with --storage gocloud",
		Credentials: "the driver's",
		Options: []backendOption{
			{"part_size", "SIZE", "5MiB", "objects above it go up in parts of it; 0: the driver's default"},
			{"concurrency", "N", "4", "parts of one object uploaded at once; 0: the driver's default"},
			{"request_timeout", "DURATION", "30s", "timeout of each attempt of a request; 0: none"},
			{"max_attempts", "N", "5", "attempts of each request, the first included"},
			{"(others)", "", "", "the driver's own, e.g. s3blob's endpoint, region, use_path_style, disable_https"},
		},
	},
}

// backendReport is one backend in the output of "dstl backends".
type backendReport struct {
	ID      string   `json:"id"`
	Schemes []string `json:"schemes"`
	backendDoc
}

func runBackends(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("backends", "[--json]", `Lists the registered backends: the identifier that the storage option (or
--storage) names, the URL schemes of the base paths each serves, the form of
its base path, where its credentials come from, and the query parameters its
base path URL takes. Unknown or repeated query parameters are rejected;
sizes take KiB/MiB/GiB or bytes, durations Go's syntax (30s, 1m).`, stderr)
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var reps []backendReport
	for _, b := range dstl.Backends() {
		reps = append(reps, backendReport{ID: b.ID, Schemes: b.Schemes, backendDoc: backendDocs[b.ID]})
	}
	if *jsonOut {
		return writeJSON(stdout, stderr, reps)
	}
	for i, r := range reps {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s  (URL schemes: %s)\n", r.ID, strings.Join(r.Schemes, ", "))
		if r.BasePath == "" {
			fmt.Fprintln(stdout, "  options: see the backend's documentation")
			continue
		}
		fmt.Fprintf(stdout, "  base path:    %s\n  credentials:  %s\n  options:\n", r.BasePath, r.Credentials)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, o := range r.Options {
			name := o.Name
			if o.Value != "" {
				name += "=" + o.Value
			}
			def := ""
			if o.Default != "" {
				def = " (default " + o.Default + ")"
			}
			fmt.Fprintf(tw, "    %s\t%s%s\n", name, o.Description, def)
		}
		tw.Flush()
	}
	return exitOK
}
