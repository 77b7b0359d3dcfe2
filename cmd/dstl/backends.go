package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/azure"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/gcs"
	"github.com/dstlgo/dstl/backends/gocloud"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/backends/mem"
	"github.com/dstlgo/dstl/backends/s3"
	"github.com/dstlgo/dstl/dstl/objname"
)

// backendDoc is what "dstl backends" says of a backend beyond the
// registry's identifier and schemes and the URL parameters the backend
// package documents.
type backendDoc struct {
	BasePath    string `json:"base_path"`
	Credentials string `json:"credentials"`
	// Others says where query parameters not in the list go, when they
	// are not rejected.
	Others string `json:"other_options,omitempty"`
}

// backendDocs documents the backends of this module, by identifier.
var backendDocs = map[string]backendDoc{
	local.ID: {
		BasePath:    "/path, ./path or file:///path",
		Credentials: "none (file permissions)",
	},
	s3.ID: {
		BasePath:    "s3://BUCKET/PREFIX",
		Credentials: "AWS default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, shared config, IAM roles); AWS_CA_BUNDLE honoured",
	},
	gcs.ID: {
		BasePath:    "gs://BUCKET/PREFIX",
		Credentials: "Application Default Credentials, or credentials_file; none with an endpoint",
	},
	azure.ID: {
		BasePath:    "azblob://CONTAINER/PREFIX",
		Credentials: "AZURE_STORAGE_CONNECTION_STRING, else AZURE_STORAGE_KEY with the account, else DefaultAzureCredential",
	},
	gocloud.ID: {
		BasePath:    "mem://NAME/PREFIX; any gocloud.dev/blob URL with --storage gocloud",
		Credentials: "the driver's",
		Others:      "go to the driver, which rejects those it does not know: e.g. s3blob's endpoint, region, use_path_style, disable_https",
	},
	mem.ID: {
		BasePath:    "memory://NAME/PREFIX (a new, empty store in the process's memory: for tests and demonstrations)",
		Credentials: "none",
	},
}

// backendParameters are the URL parameters each backend package of this
// module documents, and its parser checks against.
var backendParameters = map[string][]driver.URLParameter{
	local.ID:   local.URLParameters,
	s3.ID:      s3.URLParameters,
	gcs.ID:     gcs.URLParameters,
	azure.ID:   azure.URLParameters,
	gocloud.ID: gocloud.URLParameters,
	mem.ID:     mem.URLParameters,
}

// backendReport is one backend in the output of "dstl backends".
type backendReport struct {
	ID      string                `json:"id"`
	Schemes []string              `json:"schemes"`
	Options []driver.URLParameter `json:"options"`
	backendDoc
}

func runBackends(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("backends", "[--json] [--check BASE_PATH [--storage ID]]", `Lists the registered backends: the identifier that the storage option (or
--storage) names, the URL schemes of the base paths each serves, the form of
its base path, where its credentials come from, and the query parameters its
base path URL takes. Unknown or repeated query parameters are rejected;
sizes take KiB/MiB/GiB or bytes, durations Go's syntax (30s, 1m).

With --check, it checks instead that the store at BASE_PATH refuses a put of
an existing name on every path its puts take, as the checkpoint catalog does
before it trusts a store: it puts a probe object (BASE_PATH/.create-only-UUID),
puts it again in one request and as a one-part multipart upload, both of which
the store must refuse, and deletes it (at most 7 requests; docs/STORES.md).
On an s3 base path with unsigned_payload=true, it also checks that the store
takes upload bodies that are not signed (a put of a probe object, signed too
if refused, then its delete). Exit status 0 when the store honours
create-only (and takes unsigned bodies, where asked), 1 when it ignores
create-only or refuses unsigned bodies, 3 when a check could not run.`, stderr)
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	check := fs.String("check", "", "check that the store at `BASE_PATH` honours create-only puts")
	storage := fs.String("storage", "", "backend `ID` for --check (default: chosen by the base path's scheme)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *check != "" {
		return checkCreateOnly(ctx, *storage, *check, *jsonOut, stdout, stderr)
	}
	if *storage != "" {
		fmt.Fprintln(stderr, "dstl backends: --storage is for --check")
		return exitUsage
	}
	var reps []backendReport
	for _, b := range backends.Backends() {
		reps = append(reps, backendReport{ID: b.ID, Schemes: b.Schemes, Options: backendParameters[b.ID], backendDoc: backendDocs[b.ID]})
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
		if len(r.Options) == 0 && r.Others == "" {
			fmt.Fprintln(tw, "    none")
		}
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
		if r.Others != "" {
			fmt.Fprintf(tw, "    (others)\t%s\n", r.Others)
		}
		tw.Flush()
	}
	return exitOK
}

// createOnlyReport is the outcome of "dstl backends --check".
type createOnlyReport struct {
	BasePath   string `json:"base_path"`
	Backend    string `json:"backend"`
	CreateOnly bool   `json:"create_only"`
	// UnsignedPayload is "taken" or "refused" where the backend was asked
	// to send unsigned bodies (s3's unsigned_payload), else empty.
	UnsignedPayload string `json:"unsigned_payload,omitempty"`
	Error           string `json:"error,omitempty"`
}

// unsignedPayloadVerifier is a backend that sends unsigned bodies where
// asked to, and checks that its store takes them (s3's).
type unsignedPayloadVerifier interface {
	UnsignedPayload() bool
	VerifyUnsignedPayload(ctx context.Context) error
}

// checkCreateOnly runs backends.VerifyCreateOnly on the store at base,
// after the check of unsigned bodies where the backend sends them.
func checkCreateOnly(ctx context.Context, storage, base string, jsonOut bool, stdout, stderr io.Writer) int {
	b, id, err := backends.Open(ctx, storage, base)
	if err != nil {
		printFailure(stderr, "dstl backends: ", err)
		if errors.Is(err, backends.ErrInvalidConfig) || errors.Is(err, backends.ErrUnknownBackend) {
			return exitUsage
		}
		return exitRuntime
	}
	defer b.Close()
	rep := createOnlyReport{BasePath: backends.RedactURL(base), Backend: id}
	// Unsigned bodies first: a store that refuses them refuses the
	// create-only check's puts too.
	if u, ok := b.(unsignedPayloadVerifier); ok && u.UnsignedPayload() {
		err = u.VerifyUnsignedPayload(ctx)
		switch {
		case err == nil:
			rep.UnsignedPayload = "taken"
		case errors.Is(err, s3.ErrUnsignedPayloadRefused):
			rep.UnsignedPayload = "refused"
		}
	}
	if err == nil {
		var name string
		if name, err = objname.NewCreateOnlyProbe(""); err == nil {
			err = backends.VerifyCreateOnly(ctx, b, name)
		}
		rep.CreateOnly = err == nil
	}
	code := exitOK
	switch {
	case errors.Is(err, backends.ErrCreateOnlyIgnored), errors.Is(err, s3.ErrUnsignedPayloadRefused):
		code = exitFailed
	case err != nil:
		code = exitRuntime
	}
	if err != nil {
		rep.Error = err.Error()
	}
	if jsonOut {
		if c := writeJSON(stdout, stderr, rep); c != exitOK {
			return c
		}
		return code
	}
	if err != nil {
		printFailure(stderr, "dstl backends --check: ", err)
		return code
	}
	fmt.Fprintf(stdout, "%s (%s): honours create-only puts on every path its puts take\n", rep.BasePath, id)
	if rep.UnsignedPayload != "" {
		fmt.Fprintf(stdout, "%s (%s): takes upload bodies that are not signed (unsigned_payload)\n", rep.BasePath, id)
	}
	return exitOK
}
